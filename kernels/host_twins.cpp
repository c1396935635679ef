// Host twins of the chunk kernels: same algorithms, bit-identical results (see chunk_kernels.hpp).
#include <cstring>

#include "chunk_kernels.hpp"

namespace reprise::kernels {
namespace {

constexpr std::uint64_t P1 = kP1, P2 = kP2, P3 = kP3, P4 = kP4, P5 = kP5;

inline std::uint64_t rotl(std::uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}
inline std::uint64_t round(std::uint64_t acc, std::uint64_t w) {
  return rotl(acc + w * P2, 31) * P1;
}
inline std::uint64_t load64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);  // x86-64 and CUDA devices are little-endian, as the format requires
  return v;
}

}  // namespace

std::uint64_t lanes64(const void* data, std::size_t len) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const std::size_t units = (len + kDigestUnit - 1) / kDigestUnit;
  std::uint64_t acc[kDigestLanes];
  for (unsigned l = 0; l < kDigestLanes; ++l) acc[l] = (std::uint64_t(l) + 1) * P5;
  const std::size_t full_units = len / kDigestUnit;
  // Whole units straight from memory, lane by lane in step (u = round * 256 + lane).
  std::size_t u = 0;
  for (; u + kDigestLanes <= full_units; u += kDigestLanes) {
    const unsigned char* p = bytes + u * kDigestUnit;
    for (unsigned l = 0; l < kDigestLanes; ++l) {
      acc[l] = round(acc[l], load64(p + l * kDigestUnit));
      acc[l] = round(acc[l], load64(p + l * kDigestUnit + 8));
    }
  }
  for (; u < units; ++u) {
    unsigned char unit[kDigestUnit] = {};
    const std::size_t off = u * kDigestUnit;
    std::memcpy(unit, bytes + off, len - off < kDigestUnit ? len - off : kDigestUnit);
    std::uint64_t& a = acc[u % kDigestLanes];
    a = round(a, load64(unit));
    a = round(a, load64(unit + 8));
  }
  std::uint64_t h = std::uint64_t(len) * P5;
  constexpr unsigned per_group = kDigestLanes / kDigestGroups;
  for (unsigned g = 0; g < kDigestGroups; ++g) {
    std::uint64_t hg = 0;
    for (unsigned l = g * per_group; l < (g + 1) * per_group; ++l) hg = (hg ^ round(0, acc[l])) * P1 + P4;
    h = (h ^ round(0, hg)) * P1 + P4;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

void digest_chunks_host(const void* region, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests) {
  const auto* base = static_cast<const unsigned char*>(region);
  const std::size_t n = chunk_count(bytes, chunk_bytes);
  for (std::size_t i = 0; i < n; ++i) digests[i] = lanes64(base + i * chunk_bytes, chunk_length(bytes, chunk_bytes, i));
}

std::uint32_t compare_compact_host(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                                   std::uint32_t* indices) {
  std::uint32_t count = 0;
  for (std::uint32_t i = 0; i < n; ++i)
    if (all || cur[i] != prev[i]) indices[count++] = i;
  return count;
}

void pack_host(const void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
               std::uint32_t n, void* staging) {
  const auto* src = static_cast<const unsigned char*>(region);
  auto* dst = static_cast<unsigned char*>(staging);
  for (std::uint32_t j = 0; j < n; ++j)
    std::memcpy(dst + std::size_t(j) * chunk_bytes, src + std::size_t(indices[j]) * chunk_bytes,
                chunk_length(bytes, chunk_bytes, indices[j]));
}

void unpack_host(void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
                 std::uint32_t n, const void* staging) {
  auto* dst = static_cast<unsigned char*>(region);
  const auto* src = static_cast<const unsigned char*>(staging);
  for (std::uint32_t j = 0; j < n; ++j)
    std::memcpy(dst + std::size_t(indices[j]) * chunk_bytes, src + std::size_t(j) * chunk_bytes,
                chunk_length(bytes, chunk_bytes, indices[j]));
}

}  // namespace reprise::kernels
