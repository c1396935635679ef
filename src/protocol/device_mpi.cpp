#include "protocol/device_mpi.hpp"

#include "reprise/errors.hpp"

namespace reprise::protocol {

DeviceMpiChoice choose_device_mpi(CudaAwareMpi wanted, const std::string& backend, MpiCudaSupport mpi) {
  const bool cuda = backend == "cuda";
  const char* says = mpi == MpiCudaSupport::Yes ? "the MPI says it takes CUDA device buffers"
                     : mpi == MpiCudaSupport::ThroughHost
                         ? "the MPI says it takes CUDA device buffers, but Open MPI's ob1 (the PML that tolerates "
                           "failures) copies them through host memory in fragments, slower than staging"
                     : mpi == MpiCudaSupport::No ? "the MPI says it does not take CUDA device buffers"
                                                 : "the MPI has no query for CUDA support";
  switch (wanted) {
    case CudaAwareMpi::No:
      return {false, "REPRISE_CUDA_AWARE_MPI=no: device buffers staged through pinned host memory"};
    case CudaAwareMpi::Yes:
      if (cuda && mpi == MpiCudaSupport::No)
        throw ConfigError(std::string("REPRISE_CUDA_AWARE_MPI=yes, but ") + says +
                          " (MPIX_Query_cuda_support() or MPIX_GPU_query_support() returned 0): it would read "
                          "device pointers as host memory. Use a CUDA-aware MPI (Open MPI built with CUDA or UCX, "
                          "MPICH with MPIR_CVAR_ENABLE_GPU, Cray MPICH with MPICH_GPU_SUPPORT_ENABLED=1), or "
                          "REPRISE_CUDA_AWARE_MPI=auto or no");
      return {true, std::string("REPRISE_CUDA_AWARE_MPI=yes (") + backend + " backend; " + says +
                        "): device buffers handed to MPI"};
    case CudaAwareMpi::Auto:
      break;
  }
  if (cuda && mpi == MpiCudaSupport::Yes) return {true, std::string(says) + ": device buffers handed to MPI"};
  if (!cuda)
    return {false, "the " + backend +
                       " backend (no GPU): device buffers staged (REPRISE_CUDA_AWARE_MPI=yes hands "
                       "them to MPI)"};
  return {false, std::string(says) + ": device buffers staged through pinned host memory" +
                     (mpi == MpiCudaSupport::Unknown       ? " (REPRISE_CUDA_AWARE_MPI=yes if it is CUDA-aware)"
                      : mpi == MpiCudaSupport::ThroughHost ? " (REPRISE_CUDA_AWARE_MPI=yes hands them to MPI)"
                                                           : "")};
}

}  // namespace reprise::protocol
