// Whether reprise::Comm hands device buffers to MPI (a CUDA-aware MPI) or stages them through pinned host memory.
#pragma once

#include <string>

#include "reprise/config.hpp"

namespace reprise::protocol {

/// What the MPI says of device buffers (asked by MpiRuntime, which has MPI): it takes them, it does not, or it has
/// no run-time query (neither Open MPI's MPIX_Query_cuda_support nor MPICH's MPIX_GPU_query_support).
enum class MpiCudaSupport { Yes, No, Unknown };

struct DeviceMpiChoice {
  bool direct = false;  ///< device buffers go to MPI as they are
  std::string reason;   ///< why, in words (printed in Comm's stats)
};

/// The choice for `wanted` (Config::cuda_aware_mpi) when the device backend is `backend` ("cuda" or "host-twin",
/// gpu::Backend::name()) and the MPI says `mpi`. Yes with the CUDA backend and an MPI that says No: ConfigError
/// (MPI would read device pointers as host memory). The host-twin backend's device memory is host memory, so any
/// MPI takes it: Yes there runs the direct path without a GPU (tests); Auto stays staged, as on a real GPU with an
/// MPI that is not CUDA-aware.
DeviceMpiChoice choose_device_mpi(CudaAwareMpi wanted, const std::string& backend, MpiCudaSupport mpi);

}  // namespace reprise::protocol
