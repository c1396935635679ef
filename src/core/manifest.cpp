#include "core/manifest.hpp"

#include <cstring>
#include <type_traits>

#include "kernels/chunk_kernels.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {
namespace {

class Writer {
 public:
  template <class T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<std::uint32_t>(static_cast<std::uint32_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
  }
  template <class T>
  void put_array(const std::vector<T>& v) {
    put<std::uint64_t>(v.size());
    const auto* p = reinterpret_cast<const std::byte*>(v.data());
    out_.insert(out_.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  Reader(const std::byte* data, std::size_t bytes, const std::string& where)
      : data_(data), bytes_(bytes), where_(where) {}
  template <class T>
  T get(const char* field) {
    need(sizeof(T), field);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string get_string(const char* field) {
    const auto n = get<std::uint32_t>(field);
    if (n > 4096) fail(std::string("manifest field '") + field + "' has an implausible length " + std::to_string(n));
    need(n, field);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  template <class T>
  std::vector<T> get_array(const char* field) {
    const auto n = get<std::uint64_t>(field);
    if (n > (bytes_ - pos_) / sizeof(T)) fail(std::string("manifest array '") + field + "' runs past the end");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), data_ + pos_, n * sizeof(T));  // (an empty vector's data() may be null)
    pos_ += n * sizeof(T);
    return v;
  }
  bool done() const { return pos_ == bytes_; }
  [[noreturn]] void fail(const std::string& what) const { throw CorruptCheckpointError(where_, what); }

 private:
  void need(std::size_t n, const char* field) const {
    if (n > bytes_ - pos_)
      fail(std::string("manifest truncated while reading '") + field + "' at offset " + std::to_string(pos_));
  }
  const std::byte* data_;
  std::size_t bytes_;
  std::size_t pos_ = 0;
  const std::string& where_;
};

constexpr std::uint32_t kManifestTag = 0x4D465052;  // "RPFM"

}  // namespace

const char* to_string(VersionKind kind) {
  return kind == VersionKind::Full ? "full" : "differential";
}

std::uint64_t RegionRecord::chunk_length(std::uint32_t index) const {
  return kernels::chunk_length(bytes, chunk_bytes, index);
}

std::uint64_t RegionRecord::stored_bytes() const {
  std::uint64_t n = 0;
  for (auto c : chunks) n += chunk_length(c);
  return n;
}

std::uint64_t Manifest::payload_bytes() const {
  std::uint64_t n = 0;
  for (const auto& r : regions) n += r.stored_bytes();
  return n;
}

std::uint64_t Manifest::protected_bytes() const {
  std::uint64_t n = 0;
  for (const auto& r : regions) n += r.bytes;
  return n;
}

const RegionRecord* Manifest::find(const std::string& name) const {
  for (const auto& r : regions)
    if (r.name == name) return &r;
  return nullptr;
}

std::uint64_t Manifest::layout_payload() {
  std::uint64_t offset = 0;
  for (auto& r : regions) {
    r.payload_offset = offset;
    offset += r.stored_bytes();
  }
  return offset;
}

std::vector<std::byte> encode_manifest(const Manifest& m) {
  Writer w;
  w.put(kManifestTag);
  w.put(m.rank);
  w.put(m.version);
  w.put(static_cast<std::uint8_t>(m.kind));
  w.put(m.base_version);
  w.put(m.chain_index);
  w.put(m.created_unix);
  w.put(static_cast<std::uint32_t>(m.regions.size()));
  for (const auto& r : m.regions) {
    w.put_string(r.name);
    w.put(r.bytes);
    w.put(static_cast<std::uint8_t>(r.space));
    w.put(static_cast<std::uint8_t>(r.digest_kind));
    w.put(r.chunk_bytes);
    w.put(r.payload_offset);
    w.put_array(r.digests);
    w.put_array(r.chunks);
  }
  return w.take();
}

Manifest decode_manifest(const std::byte* data, std::size_t bytes, const std::string& where) {
  Reader rd(data, bytes, where);
  if (rd.get<std::uint32_t>("tag") != kManifestTag) rd.fail("manifest does not start with its tag");
  Manifest m;
  m.rank = rd.get<std::uint32_t>("rank");
  m.version = rd.get<std::uint64_t>("version");
  const auto kind = rd.get<std::uint8_t>("kind");
  if (kind > 1) rd.fail("unknown version kind " + std::to_string(kind));
  m.kind = static_cast<VersionKind>(kind);
  m.base_version = rd.get<std::uint64_t>("base_version");
  m.chain_index = rd.get<std::uint32_t>("chain_index");
  m.created_unix = rd.get<double>("created_unix");
  const auto n = rd.get<std::uint32_t>("region_count");
  std::uint64_t offset = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    RegionRecord r;
    r.name = rd.get_string("region name");
    r.bytes = rd.get<std::uint64_t>("region bytes");
    const auto space = rd.get<std::uint8_t>("region space");
    const auto dk = rd.get<std::uint8_t>("digest kind");
    if (space > 1) rd.fail("region '" + r.name + "': unknown memory space " + std::to_string(space));
    if (dk < 1 || dk > 2) rd.fail("region '" + r.name + "': unknown digest kind " + std::to_string(dk));
    r.space = static_cast<MemorySpace>(space);
    r.digest_kind = static_cast<gpu::DigestKind>(dk);
    r.chunk_bytes = rd.get<std::uint32_t>("chunk bytes");
    r.payload_offset = rd.get<std::uint64_t>("payload offset");
    r.digests = rd.get_array<std::uint64_t>("digests");
    r.chunks = rd.get_array<std::uint32_t>("chunks");
    // Structural checks: a manifest that passes them cannot make restore read or write out of bounds.
    if (r.chunk_bytes == 0) rd.fail("region '" + r.name + "': chunk size 0");
    if (r.digests.size() != kernels::chunk_count(r.bytes, r.chunk_bytes))
      rd.fail("region '" + r.name + "': digest table does not match its size");
    for (std::size_t k = 0; k < r.chunks.size(); ++k)
      if (r.chunks[k] >= r.digests.size() || (k > 0 && r.chunks[k] <= r.chunks[k - 1]))
        rd.fail("region '" + r.name + "': stored chunk list is not ascending within the region");
    if (m.kind == VersionKind::Full && r.chunks.size() != r.digests.size()) {
      // A chunk a full version leaves out reads as zeros (a runtime region's room); its digest says so with 0.
      for (std::size_t k = 0, c = 0; c < r.digests.size(); ++c) {
        if (k < r.chunks.size() && r.chunks[k] == c) {
          ++k;
        } else if (r.digests[c] != 0) {
          rd.fail("region '" + r.name + "': chunk " + std::to_string(c) +
                  " is left out of a full version but its digest is not 0 (a chunk left out reads as zeros)");
        }
      }
    }
    if (r.payload_offset != offset) rd.fail("region '" + r.name + "': payload offset out of sequence");
    offset += r.stored_bytes();
    m.regions.push_back(std::move(r));
  }
  if (!rd.done()) rd.fail("manifest has trailing bytes");
  return m;
}

}  // namespace reprise::core
