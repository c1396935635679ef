// One macro for every CUDA runtime call: a failure throws reprise::DeviceError naming the call, file and line.
// Kernel launches go through the wrappers of kernels/chunk_kernels_cuda.hpp, which return their launch status,
// so REPRISE_CUDA_CHECK(kernels::launch_...(...)) checks each launch too.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "reprise/errors.hpp"

namespace reprise::gpu {

[[noreturn]] inline void throw_cuda_error(cudaError_t rc, const char* call, const char* file, int line) {
  // The error is reported by the exception: clear it from the thread's pending error (non-sticky errors only),
  // or the application's next cudaGetLastError() (Kokkos checks it after its launches) would see it again.
  (void)cudaGetLastError();
  std::string hint;
  if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver)
    hint = ": no usable GPU or driver here; run on a GPU node or use the host-twin backend";
  else if (rc == cudaErrorMemoryAllocation)
    hint = ": device or pinned memory exhausted; lower REPRISE_STAGING_BYTES or REPRISE_PINNED_ARENA_BYTES";
  throw DeviceError(std::string(call) + " failed: " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ") at " +
                    file + ":" + std::to_string(line) + hint);
}

}  // namespace reprise::gpu

#define REPRISE_CUDA_CHECK(call)                                                     \
  do {                                                                               \
    const cudaError_t reprise_cuda_rc_ = (call);                                     \
    if (reprise_cuda_rc_ != cudaSuccess)                                             \
      ::reprise::gpu::throw_cuda_error(reprise_cuda_rc_, #call, __FILE__, __LINE__); \
  } while (0)
