// The barrier choice (pure), and the pieces of the NCCL barrier that do not need NCCL.
#include "coord/group_barrier.hpp"

#include <unistd.h>

#include <functional>
#include <map>

#include "reprise/errors.hpp"

#if REPRISE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace reprise::coord {

BarrierChoice choose_group_barrier(GroupBarrierKind wanted, const std::string& nccl_problem,
                                   const std::vector<int>& members, const std::vector<MemberDevice>& devices) {
  if (devices.size() != members.size())
    throw UsageError("choose_group_barrier: " + std::to_string(devices.size()) + " devices for " +
                     std::to_string(members.size()) + " members");
  if (wanted == GroupBarrierKind::Mpi) return {GroupBarrierKind::Mpi, "REPRISE_GROUP_BARRIER=mpi"};
  std::string problem = nccl_problem;
  std::map<std::pair<std::uint64_t, std::string>, int> seen;
  for (std::size_t i = 0; i < members.size() && problem.empty(); ++i) {
    if (devices[i].gpu.empty()) {
      problem = "rank " + std::to_string(members[i]) + " has no GPU";
    } else if (auto [it, fresh] = seen.emplace(std::make_pair(devices[i].host, devices[i].gpu), members[i]); !fresh) {
      problem = "ranks " + std::to_string(it->second) + " and " + std::to_string(members[i]) + " share the GPU " +
                devices[i].gpu + " (NCCL needs one GPU per rank of a group)";
    }
  }
  if (problem.empty()) return {GroupBarrierKind::Nccl, "every member has its own GPU"};
  if (wanted == GroupBarrierKind::Nccl)
    throw ConfigError("REPRISE_GROUP_BARRIER=nccl, but " + problem +
                      ": use REPRISE_GROUP_BARRIER=mpi (or auto, which falls back to MPI)");
  return {GroupBarrierKind::Mpi, problem};
}

std::uint64_t host_identity() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return std::hash<std::string>{}(name);
}

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

#if !REPRISE_HAVE_NCCL
namespace {
[[noreturn]] void no_nccl() {
  throw DeviceError("this build of Reprise has no NCCL: the group barrier runs on MPI (REPRISE_GROUP_BARRIER=mpi)");
}
}  // namespace

std::string nccl_problem() { return "this build of Reprise has no NCCL (configure with CUDA and NCCL)"; }
NcclId nccl_unique_id() { no_nccl(); }
struct NcclBarrier::Impl {};
NcclBarrier::NcclBarrier(const NcclId&, int, int) { no_nccl(); }
NcclBarrier::~NcclBarrier() = default;
bool NcclBarrier::ready() { no_nccl(); }
void NcclBarrier::start(const std::vector<std::uint64_t>&) { no_nccl(); }
bool NcclBarrier::done() { no_nccl(); }
const std::vector<std::uint64_t>& NcclBarrier::result() const { no_nccl(); }
void NcclBarrier::abort() noexcept {}
#endif

}  // namespace reprise::coord
