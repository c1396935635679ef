// The group barrier's choice: the same decision at every member, from the same gathered data.
#include "protocol/barrier_choice.hpp"

#include <unistd.h>

#include <functional>
#include <map>

#include "reprise/errors.hpp"

namespace reprise::protocol {

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

}  // namespace reprise::protocol
