// CUDA chunk kernels. Results are bit-identical to the host twins in host_twins.cpp (specification in
// chunk_kernels.hpp); tests/gpu compares them on random data.
#include <utility>

#include "chunk_kernels.hpp"
#include "chunk_kernels_cuda.hpp"

namespace reprise::kernels {
namespace {

constexpr std::uint64_t P1 = kP1, P2 = kP2, P3 = kP3, P4 = kP4, P5 = kP5;

__device__ __forceinline__ std::uint64_t rotl(std::uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}
__device__ __forceinline__ std::uint64_t round64(std::uint64_t acc, std::uint64_t w) {
  return rotl(acc + w * P2, 31) * P1;
}

__device__ __forceinline__ std::size_t chunk_len(std::size_t bytes, std::size_t chunk, std::size_t i) {
  const std::size_t begin = i * chunk;
  return bytes - begin < chunk ? bytes - begin : chunk;
}

// Reads unit u of a chunk (16 bytes, zero-padded past len) byte by byte: for misaligned data and the tail.
__device__ __forceinline__ void load_unit_bytes(const unsigned char* p, std::size_t len, std::size_t u,
                                                std::uint64_t& w0, std::uint64_t& w1) {
  w0 = 0;
  w1 = 0;
  const std::size_t off = u * kDigestUnit;
  for (int b = 0; b < 16; ++b) {
    const std::uint64_t byte = off + b < len ? p[off + b] : 0;
    if (b < 8)
      w0 |= byte << (8 * b);
    else
      w1 |= byte << (8 * (b - 8));
  }
}

// One block of kDigestLanes threads per chunk; thread l is lane l.
__global__ void __launch_bounds__(kDigestLanes)
    digest_kernel(const unsigned char* region, std::size_t bytes, std::size_t chunk, std::uint64_t* digests,
                  std::size_t n_chunks) {
  __shared__ std::uint64_t acc_s[kDigestLanes];
  __shared__ std::uint64_t group_s[kDigestGroups];
  const unsigned l = threadIdx.x;
  for (std::size_t c = blockIdx.x; c < n_chunks; c += gridDim.x) {
    const unsigned char* p = region + c * chunk;
    const std::size_t len = chunk_len(bytes, chunk, c);
    const std::size_t units = (len + kDigestUnit - 1) / kDigestUnit;
    const std::size_t full_units = len / kDigestUnit;
    std::uint64_t acc = (std::uint64_t(l) + 1) * P5;
    std::size_t u = l;
    if ((reinterpret_cast<std::uintptr_t>(p) & 15) == 0) {
      const uint4* v = reinterpret_cast<const uint4*>(p);
      // Four loads in flight before their rounds (the rounds of one lane are a dependent chain).
      for (; u + 3 * kDigestLanes < full_units; u += 4 * kDigestLanes) {
        uint4 a = __ldg(v + u), b = __ldg(v + u + kDigestLanes), d = __ldg(v + u + 2 * kDigestLanes),
              e = __ldg(v + u + 3 * kDigestLanes);
        const uint4 q[4] = {a, b, d, e};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          acc = round64(acc, (std::uint64_t(q[k].y) << 32) | q[k].x);
          acc = round64(acc, (std::uint64_t(q[k].w) << 32) | q[k].z);
        }
      }
      for (; u < full_units; u += kDigestLanes) {
        const uint4 a = __ldg(v + u);
        acc = round64(acc, (std::uint64_t(a.y) << 32) | a.x);
        acc = round64(acc, (std::uint64_t(a.w) << 32) | a.z);
      }
    }
    for (; u < units; u += kDigestLanes) {  // misaligned chunks, and the padded tail unit
      std::uint64_t w0, w1;
      load_unit_bytes(p, len, u, w0, w1);
      acc = round64(acc, w0);
      acc = round64(acc, w1);
    }
    acc_s[l] = acc;
    __syncthreads();
    if (l < kDigestGroups) {
      constexpr unsigned per = kDigestLanes / kDigestGroups;
      std::uint64_t hg = 0;
      for (unsigned k = l * per; k < (l + 1) * per; ++k) hg = (hg ^ round64(0, acc_s[k])) * P1 + P4;
      group_s[l] = hg;
    }
    __syncthreads();
    if (l == 0) {
      std::uint64_t h = std::uint64_t(len) * P5;
      for (unsigned g = 0; g < kDigestGroups; ++g) h = (h ^ round64(0, group_s[g])) * P1 + P4;
      h ^= h >> 33;
      h *= P2;
      h ^= h >> 29;
      h *= P3;
      h ^= h >> 32;
      digests[c] = h;
    }
    __syncthreads();  // acc_s/group_s are reused by the next chunk of this block
  }
}

// Compaction in three steps, deterministic and ascending: per-block counts, one-block scan of the counts,
// scatter. Blocks of 1024 chunks (32 warps of 32).
constexpr unsigned kCompactThreads = 1024;

// Chunk indices are computed in 64 bits: with n close to 2^32 the last block's 32-bit index would wrap.
__device__ __forceinline__ std::uint64_t chunk_index() {
  return std::uint64_t(blockIdx.x) * kCompactThreads + threadIdx.x;
}
__device__ __forceinline__ bool is_dirty(const std::uint64_t* cur, const std::uint64_t* prev, std::uint64_t i,
                                         std::uint32_t n, bool all) {
  return i < n && (all || cur[i] != prev[i]);
}

__global__ void __launch_bounds__(kCompactThreads) count_kernel(const std::uint64_t* cur, const std::uint64_t* prev,
                                                                std::uint32_t n, bool all, std::uint32_t* counts) {
  __shared__ std::uint32_t warp_counts[kCompactThreads / 32];
  const std::uint64_t i = chunk_index();
  const unsigned ballot = __ballot_sync(0xFFFFFFFFu, is_dirty(cur, prev, i, n, all));
  if ((threadIdx.x & 31) == 0) warp_counts[threadIdx.x / 32] = __popc(ballot);
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint32_t total = 0;
    for (unsigned w = 0; w < kCompactThreads / 32; ++w) total += warp_counts[w];
    counts[blockIdx.x] = total;
  }
}

// counts[0..blocks) -> exclusive offsets in place; total to *count.
__global__ void __launch_bounds__(kCompactThreads)
    scan_kernel(std::uint32_t* counts, std::uint32_t blocks, std::uint32_t* count) {
  __shared__ std::uint32_t s[kCompactThreads];
  __shared__ std::uint32_t carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (std::uint32_t base = 0; base < blocks; base += kCompactThreads) {
    const std::uint32_t i = base + threadIdx.x;
    const std::uint32_t v = i < blocks ? counts[i] : 0;
    s[threadIdx.x] = v;
    __syncthreads();
    for (unsigned off = 1; off < kCompactThreads; off <<= 1) {  // Hillis-Steele inclusive scan
      const std::uint32_t add = threadIdx.x >= off ? s[threadIdx.x - off] : 0;
      __syncthreads();
      s[threadIdx.x] += add;
      __syncthreads();
    }
    if (i < blocks) counts[i] = carry + s[threadIdx.x] - v;
    __syncthreads();
    if (threadIdx.x == kCompactThreads - 1) carry += s[threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.x == 0) *count = carry;
}

__global__ void __launch_bounds__(kCompactThreads)
    scatter_kernel(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                   const std::uint32_t* offsets, std::uint32_t* indices) {
  __shared__ std::uint32_t warp_base[kCompactThreads / 32];
  const std::uint64_t i = chunk_index();
  const bool dirty = is_dirty(cur, prev, i, n, all);
  const unsigned ballot = __ballot_sync(0xFFFFFFFFu, dirty);
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  if (lane == 0) warp_base[warp] = __popc(ballot);
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint32_t run = 0;
    for (unsigned w = 0; w < kCompactThreads / 32; ++w) {
      const std::uint32_t c = warp_base[w];
      warp_base[w] = run;
      run += c;
    }
  }
  __syncthreads();
  if (dirty) indices[offsets[blockIdx.x] + warp_base[warp] + __popc(ballot & ((1u << lane) - 1))] = std::uint32_t(i);
}

// One block per moved chunk. Vector copies when both sides are 16-byte aligned, bytes for the rest.
__device__ __forceinline__ void copy_chunk(unsigned char* dst, const unsigned char* src, std::size_t len) {
  std::size_t done = 0;
  if (((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) & 15) == 0) {
    const std::size_t vecs = len / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (std::size_t k = threadIdx.x; k < vecs; k += blockDim.x) d[k] = __ldg(s + k);
    done = vecs * 16;
  }
  for (std::size_t k = done + threadIdx.x; k < len; k += blockDim.x) dst[k] = src[k];
}

__global__ void pack_kernel(const unsigned char* region, std::size_t bytes, std::size_t chunk,
                            const std::uint32_t* indices, std::uint32_t n, unsigned char* staging) {
  for (std::size_t j = blockIdx.x; j < n; j += gridDim.x) {
    const std::size_t c = indices[j];
    copy_chunk(staging + j * chunk, region + c * chunk, chunk_len(bytes, chunk, c));
  }
}

__global__ void unpack_kernel(unsigned char* region, std::size_t bytes, std::size_t chunk, const std::uint32_t* indices,
                              std::uint32_t n, const unsigned char* staging) {
  for (std::size_t j = blockIdx.x; j < n; j += gridDim.x) {
    const std::size_t c = indices[j];
    copy_chunk(region + c * chunk, staging + j * chunk, chunk_len(bytes, chunk, c));
  }
}

unsigned grid_for(std::size_t items) {
  constexpr std::size_t kMaxGrid = 1u << 20;  // grid-stride loops cover the rest
  return static_cast<unsigned>(items < kMaxGrid ? (items ? items : 1) : kMaxGrid);
}

// Launches through cudaLaunchKernelEx, whose return is this launch's own status: cudaGetLastError after a
// <<<>>> launch would also report (and clear) an unrelated error left pending by the application's own calls.
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), unsigned grid, unsigned block, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

constexpr unsigned kCopyThreads = 256;

}  // namespace

cudaError_t launch_digest(const void* region, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests,
                          cudaStream_t stream) {
  const std::size_t n = chunk_count(bytes, chunk_bytes);
  if (n == 0) return cudaSuccess;
  return launch(digest_kernel, grid_for(n), kDigestLanes, stream, static_cast<const unsigned char*>(region), bytes,
                chunk_bytes, digests, n);
}

std::size_t compact_scratch_words(std::uint32_t n) {
  return (std::size_t(n) + kCompactThreads - 1) / kCompactThreads + 1;
}

cudaError_t launch_compare_compact(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                                   std::uint32_t* indices, std::uint32_t* count, std::uint32_t* scratch,
                                   cudaStream_t stream) {
  if (n == 0) return cudaMemsetAsync(count, 0, sizeof(std::uint32_t), stream);
  const std::uint32_t blocks = static_cast<std::uint32_t>((std::size_t(n) + kCompactThreads - 1) / kCompactThreads);
  cudaError_t rc = launch(count_kernel, blocks, kCompactThreads, stream, cur, prev, n, all, scratch);
  if (rc == cudaSuccess) rc = launch(scan_kernel, 1, kCompactThreads, stream, scratch, blocks, count);
  if (rc == cudaSuccess)
    rc = launch(scatter_kernel, blocks, kCompactThreads, stream, cur, prev, n, all, scratch, indices);
  return rc;
}

cudaError_t launch_pack(const void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
                        std::uint32_t n, void* staging, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch(pack_kernel, grid_for(n), kCopyThreads, stream, static_cast<const unsigned char*>(region), bytes,
                chunk_bytes, indices, n, static_cast<unsigned char*>(staging));
}

cudaError_t launch_unpack(void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
                          std::uint32_t n, const void* staging, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch(unpack_kernel, grid_for(n), kCopyThreads, stream, static_cast<unsigned char*>(region), bytes,
                chunk_bytes, indices, n, static_cast<const unsigned char*>(staging));
}

}  // namespace reprise::kernels
