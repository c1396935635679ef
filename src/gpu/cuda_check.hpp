// One macro for every CUDA runtime call: a failure throws reprise::DeviceError naming the call, file and line.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "reprise/errors.hpp"

namespace reprise::gpu {

[[noreturn]] inline void throw_cuda_error(cudaError_t rc, const char* call, const char* file, int line) {
  throw DeviceError(std::string(call) + " failed: " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ") at " +
                    file + ":" + std::to_string(line));
}

}  // namespace reprise::gpu

#define REPRISE_CUDA_CHECK(call)                                                     \
  do {                                                                               \
    const cudaError_t reprise_cuda_rc_ = (call);                                     \
    if (reprise_cuda_rc_ != cudaSuccess)                                             \
      ::reprise::gpu::throw_cuda_error(reprise_cuda_rc_, #call, __FILE__, __LINE__); \
  } while (0)
