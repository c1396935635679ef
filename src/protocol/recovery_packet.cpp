#include "protocol/recovery_packet.hpp"

#include <algorithm>
#include <cstring>

#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

constexpr std::uint64_t kMagic = 0x32544b5053525052ULL;  // "RPRSPKT2", little-endian (per-rank fields sparse)

void put_list(std::vector<std::uint64_t>& out, const std::vector<int>& v) {
  out.push_back(v.size());
  for (int x : v) out.push_back(static_cast<std::uint64_t>(x));
}

// A plan's per-rank field: its entries (rank, value), as many as the ranks it names.
template <class T>
void put_entries(std::vector<std::uint64_t>& out, const PerRank<T>& v) {
  out.push_back(v.entries().size());
  for (const auto& [rank, value] : v.entries()) out.insert(out.end(), {rank, static_cast<std::uint64_t>(value)});
}

// Reads the words in order; every read says what it reads, so a short or damaged packet names what is missing.
class Reader {
 public:
  explicit Reader(const std::vector<std::uint64_t>& w) : w_(w) {}
  std::uint64_t next(const char* what) {
    if (i_ >= w_.size())
      throw Error("recovery packet from the survivors is truncated: " + std::to_string(w_.size()) +
                  " words, no room for " + what + " (survivors and replacement run different Reprise builds?)");
    return w_[i_++];
  }
  std::uint64_t at_most(const char* what, std::uint64_t most) {
    const std::uint64_t n = next(what);
    if (n > most)
      throw Error("recovery packet from the survivors is damaged: " + std::string(what) + " " + std::to_string(n) +
                  " is out of range");
    return n;
  }
  int rank(const char* what, int ranks) {
    return static_cast<int>(at_most(what, static_cast<std::uint64_t>(ranks) - 1));
  }
  std::vector<int> ranks(const char* what, int ranks) {
    std::vector<int> v(at_most(what, static_cast<std::uint64_t>(ranks)));
    for (int& r : v) r = rank(what, ranks);
    return v;
  }
  template <class T>
  PerRank<T> entries(const char* what, int ranks, std::uint64_t most) {
    PerRank<T> v;
    for (std::uint64_t k = at_most(what, static_cast<std::uint64_t>(ranks)); k > 0; --k) {
      const int r = rank(what, ranks);
      v.set(static_cast<std::size_t>(r), static_cast<T>(at_most(what, most)));
    }
    return v;
  }
  std::vector<int> per_rank(const char* what, int ranks, std::uint64_t most) {
    std::vector<int> v;  // filled as read: a damaged count fails at the end of the packet, not in an allocation
    for (int r = 0; r < ranks; ++r) v.push_back(static_cast<int>(at_most(what, most)));
    return v;
  }
  void done() const {
    if (i_ != w_.size())
      throw Error("recovery packet from the survivors is damaged: " + std::to_string(w_.size() - i_) +
                  " words left over after its last field");
  }

 private:
  const std::vector<std::uint64_t>& w_;
  std::size_t i_ = 0;
};

}  // namespace

std::vector<std::uint64_t> encode_packet(const RecoveryPacket& k) {
  const Layout& L = k.layout;
  const int n = L.size();
  std::vector<std::uint64_t> out{kMagic, static_cast<std::uint64_t>(n)};
  for (const auto* field : {&L.node_of, &L.local_index, &L.group_of, &L.buddy_of})
    for (int x : *field) out.push_back(static_cast<std::uint64_t>(x));
  const RecoveryPlan& p = k.plan;
  out.push_back(p.version);
  out.push_back(p.from_start ? 1 : 0);
  out.push_back(p.partial ? 1 : 0);
  put_list(out, p.failed);
  put_entries(out, p.source);
  put_list(out, p.rolled_back);
  if (p.partial) {
    put_entries(out, p.version_of);
    put_entries(out, p.starts_over);
  }
  out.push_back(k.epoch);
  std::string env;
  for (const std::string& e : k.env) env += e + '\n';
  out.push_back(env.size());
  for (std::size_t i = 0; i < env.size(); i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, env.data() + i, std::min<std::size_t>(8, env.size() - i));
    out.push_back(w);
  }
  for (int r = 0; r < n; ++r) out.push_back(k.kill_floors.at(static_cast<std::size_t>(r)));
  return out;
}

RecoveryPacket decode_packet(const std::vector<std::uint64_t>& words) {
  Reader in(words);
  if (in.next("its magic word") != kMagic)
    throw Error(
        "recovery packet from the survivors does not start with Reprise's magic word (survivors and "
        "replacement run different Reprise builds?)");
  RecoveryPacket k;
  const int n = static_cast<int>(in.at_most("the rank count", 1u << 24));
  if (n < 1) throw Error("recovery packet from the survivors is damaged: a job of 0 ranks");
  Layout& L = k.layout;
  L.node_of = in.per_rank("a node index", n, static_cast<std::uint64_t>(n) - 1);
  L.local_index = in.per_rank("a local index", n, static_cast<std::uint64_t>(n) - 1);
  L.group_of = in.per_rank("a group index", n, static_cast<std::uint64_t>(n) - 1);
  L.buddy_of = in.per_rank("a buddy rank", n, static_cast<std::uint64_t>(n) - 1);
  RecoveryPlan& p = k.plan;
  p.version = in.next("the plan's version");
  p.from_start = in.at_most("the plan's start-over flag", 1) != 0;
  p.partial = in.at_most("the plan's group-rollback flag", 1) != 0;
  p.failed = in.ranks("a failed rank", n);
  p.source = in.entries<DataSource>("a data source", n, 1);
  p.rolled_back = in.ranks("a rolled-back rank", n);
  if (p.partial) {
    p.version_of = in.entries<std::uint64_t>("a rank's version", n, ~std::uint64_t{0});
    p.starts_over = in.entries<char>("a start-over flag", n, 1);
  }
  k.epoch = static_cast<std::uint32_t>(in.at_most("the recovery epoch", UINT32_MAX));
  const std::uint64_t env_bytes = in.at_most("the environment's length", words.size() * 8);
  std::string env(env_bytes, '\0');
  for (std::size_t i = 0; i < env.size(); i += 8) {
    const std::uint64_t w = in.next("the environment");
    std::memcpy(env.data() + i, &w, std::min<std::size_t>(8, env.size() - i));
  }
  for (std::size_t b = 0, e = env.find('\n'); e != std::string::npos; b = e + 1, e = env.find('\n', b))
    k.env.push_back(env.substr(b, e - b));
  k.kill_floors.resize(static_cast<std::size_t>(n));
  for (auto& f : k.kill_floors) f = in.next("a kill floor");
  in.done();
  return k;
}

}  // namespace reprise::protocol
