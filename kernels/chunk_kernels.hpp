// Chunk kernels: the Lanes64 digest, compare+compact, pack, unpack. kernels/chunk_kernels.cu holds the CUDA
// versions and their launch wrappers (chunk_kernels_cuda.hpp); host_twins.cpp holds host versions with
// bit-identical results, used by the host-twin backend, by restore verification and by the tests.
//
// Lanes64 digest of one chunk of `len` bytes (specification; CUDA and host twin implement exactly this):
//   P1..P5 are the XXH64 primes. The chunk is read as units of 16 bytes, the last one zero-padded.
//   Lane l (0 <= l < 256) starts at acc = (l + 1) * P5 and, for units u = l, l + 256, l + 512, ..., takes the
//   unit's two little-endian 64-bit words w0, w1: acc = round(acc, w0); acc = round(acc, w1), where
//   round(a, w) = rotl64(a + w * P2, 31) * P1.
//   Then h = len * P5, and for each group g = 0..31 in order:
//     h_g = 0; for l = 8g .. 8g + 7: h_g = (h_g ^ round(0, acc_l)) * P1 + P4;
//     h = (h ^ round(0, h_g)) * P1 + P4.
//   Finally the XXH64 avalanche: h ^= h >> 33; h *= P2; h ^= h >> 29; h *= P3; h ^= h >> 32.
//   (All arithmetic modulo 2^64.) In CUDA one block of 256 threads digests one chunk, thread l being lane l,
//   so every warp reads 512 contiguous bytes per step.
#pragma once

#include <cstddef>
#include <cstdint>

namespace reprise::kernels {

// The XXH64 primes P1..P5 of the Lanes64 specification.
constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr std::uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr std::uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr std::uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
constexpr std::uint64_t kP5 = 0x27D4EB2F165667C5ULL;

constexpr unsigned kDigestLanes = 256;  // threads per block in the CUDA digest kernel
constexpr unsigned kDigestGroups = 32;  // lanes folded per group: kDigestLanes / kDigestGroups
constexpr std::size_t kDigestUnit = 16;

/// Lanes64 digest of one chunk (host twin of the device kernel).
std::uint64_t lanes64(const void* data, std::size_t len);
/// Host twin of the digest kernel: digests[i] = lanes64(chunk i).
void digest_chunks_host(const void* region, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests);
/// Host twin of compare+compact; returns the count.
std::uint32_t compare_compact_host(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                                   std::uint32_t* indices);
/// Host twins of pack and unpack.
void pack_host(const void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
               std::uint32_t n, void* staging);
void unpack_host(void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
                 std::uint32_t n, const void* staging);

/// Bytes in chunk `index` of a region of `bytes` bytes.
inline std::size_t chunk_length(std::size_t bytes, std::size_t chunk_bytes, std::size_t index) {
  const std::size_t begin = index * chunk_bytes;
  return begin >= bytes ? 0 : (bytes - begin < chunk_bytes ? bytes - begin : chunk_bytes);
}
inline std::size_t chunk_count(std::size_t bytes, std::size_t chunk_bytes) {
  return (bytes + chunk_bytes - 1) / chunk_bytes;
}

}  // namespace reprise::kernels
