// Launch wrappers of the CUDA chunk kernels (kernels/chunk_kernels.cu). Included only by src/gpu/cuda_backend.cpp.
// Each returns the status of its own launches (not an error pending from earlier calls); all work is
// asynchronous on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace reprise::kernels {

cudaError_t launch_digest(const void* region, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests,
                          cudaStream_t stream);

/// Scratch (device memory) compare_compact needs for n chunks, in 32-bit words.
std::size_t compact_scratch_words(std::uint32_t n);
cudaError_t launch_compare_compact(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                                   std::uint32_t* indices, std::uint32_t* count, std::uint32_t* scratch,
                                   cudaStream_t stream);

cudaError_t launch_pack(const void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
                        std::uint32_t n, void* staging, cudaStream_t stream);
cudaError_t launch_unpack(void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
                          std::uint32_t n, const void* staging, cudaStream_t stream);

}  // namespace reprise::kernels
