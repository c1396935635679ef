// The PCI bus id of the CUDA device in use (the NCCL barrier's choice compares members' GPUs by it).
#include <string>

#include "gpu/nccl_barrier.hpp"

#if REPRISE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace reprise::gpu {

std::string current_gpu_bus_id() {
#if REPRISE_HAVE_CUDA
  int count = 0, device = -1;
  char bus[32] = {};
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0 || cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return bus;
#else
  return "";
#endif
}

}  // namespace reprise::gpu
