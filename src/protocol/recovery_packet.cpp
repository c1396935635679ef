#include "protocol/recovery_packet.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

constexpr std::uint64_t kMagic = 0x33544b5053525052ULL;  // "RPRSPKT3", little-endian (the layout as its rule)

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
  std::map<int, std::uint64_t> floors(const char* what, int ranks) {
    std::map<int, std::uint64_t> v;
    for (std::uint64_t k = at_most(what, static_cast<std::uint64_t>(ranks)); k > 0; --k) {
      const int r = rank(what, ranks);
      v[r] = next(what);
    }
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

// The layout as its rule where it has one (a few words), its tables where it has them (one word per rank each):
// nodes (K, or 0 and a node per rank), groups (K, or 0 and a group per rank), buddies (0 none, 1 the rule, 2 a
// buddy per rank).
enum : std::uint64_t { kNoBuddies = 0, kRuleBuddies = 1, kTableBuddies = 2 };

void put_layout(std::vector<std::uint64_t>& out, const Layout& L) {
  const int n = L.size();
  const auto put_table = [&](auto of) {
    for (int r = 0; r < n; ++r) out.push_back(static_cast<std::uint64_t>(of(r)));
  };
  out.push_back(static_cast<std::uint64_t>(L.ranks_per_node()));
  if (L.ranks_per_node() == 0) put_table([&](int r) { return L.node_of(r); });
  out.push_back(static_cast<std::uint64_t>(L.group_map().per_group()));
  if (L.group_map().per_group() == 0) put_table([&](int r) { return L.group_of(r); });
  out.push_back(!L.has_buddies() ? kNoBuddies : L.rule_buddies() ? kRuleBuddies : kTableBuddies);
  if (L.has_buddies() && !L.rule_buddies()) put_table([&](int r) { return L.buddy_of(r); });
}

Layout read_layout(Reader& in, int n) {
  const auto most = static_cast<std::uint64_t>(n);
  const int per_node = static_cast<int>(in.at_most("the ranks per node", most));
  std::vector<int> node_of;
  if (per_node == 0) node_of = in.per_rank("a node index", n, most - 1);
  const int per_group = static_cast<int>(in.at_most("the ranks per group", most));
  const GroupMap groups = per_group > 0 ? GroupMap::blocks(static_cast<std::size_t>(n), per_group)
                                        : GroupMap(in.per_rank("a group index", n, most - 1));
  const std::uint64_t buddies = in.at_most("the buddies' kind", kTableBuddies);
  std::vector<int> buddy_of;
  if (buddies == kTableBuddies) buddy_of = in.per_rank("a buddy rank", n, most - 1);
  if (per_node > 0) {
    if (buddies == kRuleBuddies && per_node >= n)
      throw Error("recovery packet from the survivors is damaged: buddies by rule on a single node");
    const Layout L = Layout::regular(n, per_node, groups, buddies == kRuleBuddies);
    return buddies == kTableBuddies ? L.with_buddies(std::move(buddy_of)) : L;
  }
  if (buddies == kNoBuddies) buddy_of.assign(static_cast<std::size_t>(n), -1);
  if (buddies == kRuleBuddies)
    throw Error("recovery packet from the survivors is damaged: buddies by rule on nodes given rank by rank");
  return Layout::table(std::move(node_of), groups, std::move(buddy_of));
}

}  // namespace

std::vector<std::uint64_t> encode_packet(const RecoveryPacket& k) {
  const Layout& L = k.layout;
  const int n = L.size();
  std::vector<std::uint64_t> out{kMagic, static_cast<std::uint64_t>(n)};
  put_layout(out, L);
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
  out.push_back(k.kill_floors.size());
  for (const auto& [rank, floor] : k.kill_floors) out.insert(out.end(), {static_cast<std::uint64_t>(rank), floor});
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
  k.layout = read_layout(in, n);
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
  k.kill_floors = in.floors("a kill floor", n);
  in.done();
  return k;
}

}  // namespace reprise::protocol
