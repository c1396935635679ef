// What a group's barrier runs on (MPI or NCCL). The NCCL barrier itself is in src/gpu/nccl_barrier.hpp.
//
// The group barrier is the commit agreement of MpiRuntime (the newest version every member's buddy acknowledged,
// and at a group checkpoint the channel counters of reprise::Comm): an allgather of a few 64-bit words per member.
// NCCL runs it on the members' GPUs (one per member: NCCL does not allow two ranks of a communicator on one GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reprise/config.hpp"

namespace reprise::protocol {

/// A member's device, as the barrier choice sees it.
struct MemberDevice {
  std::uint64_t host = 0;  ///< identity of the machine (a hash of its host name)
  std::string gpu;         ///< PCI bus id of the CUDA device the member uses; empty without one
};

struct BarrierChoice {
  GroupBarrierKind kind = GroupBarrierKind::Mpi;  ///< Mpi or Nccl
  std::string reason;
};

/// The barrier of a group whose members (world ranks `members`) use `devices` (same order); `nccl_problem`: why
/// this process cannot use NCCL (nccl_problem()), empty when it can. Every member computes it from the same
/// gathered data, so all choose alike. GroupBarrierKind::Nccl when NCCL is impossible (NCCL unusable, a member
/// without GPU, two members on one GPU): throws ConfigError saying why and what to do.
BarrierChoice choose_group_barrier(GroupBarrierKind wanted, const std::string& nccl_problem,
                                   const std::vector<int>& members, const std::vector<MemberDevice>& devices);

/// A hash of this machine's host name (MemberDevice::host).
std::uint64_t host_identity();

}  // namespace reprise::protocol
