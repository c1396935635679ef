// Whether reprise::Comm hands device buffers to MPI (a CUDA-aware MPI) or stages them through pinned host memory.
#pragma once

#include <string>

#include "reprise/config.hpp"

namespace reprise::protocol {

/// What the MPI says of device buffers (asked by MpiRuntime, which has MPI): it takes them, it does not, or it has
/// no run-time query (neither Open MPI's MPIX_Query_cuda_support nor MPICH's MPIX_GPU_query_support).
/// ThroughHost: it takes them, but its fault-tolerant path copies them through host memory itself (Open MPI with
/// ULFM: only the ob1 PML tolerates failures, and it moves device buffers in host-copied fragments; measured on an
/// H200 with 4 ranks, 1 MiB: 0.68 ms handed to MPI, 0.20 ms staged; bench/results/README.md).
enum class MpiCudaSupport { Yes, ThroughHost, No, Unknown };

struct DeviceMpiChoice {
  bool direct = false;  ///< device buffers go to MPI as they are
  std::string reason;   ///< why, in words (printed in Comm's stats)
};

/// The choice for `wanted` (Config::cuda_aware_mpi) when the device backend is `backend` ("cuda" or "host-twin",
/// gpu::Backend::name()) and the MPI says `mpi`. Yes with the CUDA backend and an MPI that says No: ConfigError
/// (MPI would read device pointers as host memory). The host-twin backend's device memory is host memory, so any
/// MPI takes it: Yes there runs the direct path without a GPU (tests); Auto stays staged, as on a real GPU with an
/// MPI that is not CUDA-aware. Auto with ThroughHost stages too (faster); Yes hands device buffers to it.
DeviceMpiChoice choose_device_mpi(CudaAwareMpi wanted, const std::string& backend, MpiCudaSupport mpi);

}  // namespace reprise::protocol
