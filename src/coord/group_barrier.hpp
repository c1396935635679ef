// What a group's barrier runs on (MPI or NCCL), and the NCCL barrier itself.
//
// The group barrier is the commit agreement of MpiRuntime (the newest version every member's buddy acknowledged,
// and at a group checkpoint the channel counters of reprise::Comm): an allgather of a few 64-bit words per member.
// NCCL runs it on the members' GPUs (one per member: NCCL does not allow two ranks of a communicator on one GPU).
// A member that dies leaves an NCCL collective hanging, so NcclBarrier is polled, and the runtime aborts it when it
// learns of a failure (from ULFM on its MPI communicators) that its group does not survive.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reprise/config.hpp"

namespace reprise::coord {

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

/// Why NCCL cannot be used here (not in the build; libnccl.so.2 not loadable), or empty.
std::string nccl_problem();
/// The PCI bus id of the CUDA device the calling thread uses; empty without CUDA in the build or a usable GPU.
std::string current_gpu_bus_id();
/// A hash of this machine's host name (MemberDevice::host).
std::uint64_t host_identity();

using NcclId = std::array<char, 128>;
/// A new NCCL unique id (one member creates it, the others receive it). Throws DeviceError without NCCL.
NcclId nccl_unique_id();

/// An allgather of the same number of 64-bit words per member on an NCCL communicator of the group, on its own
/// stream of the current device. Every call returns at once; ready() and done() are polled. Throws DeviceError on
/// NCCL or CUDA errors (and when built without NCCL).
class NcclBarrier {
 public:
  /// Starts a non-blocking ncclCommInitRank on the current device.
  NcclBarrier(const NcclId& id, int members, int index);
  ~NcclBarrier();  ///< aborts the communicator (never waits for the other members)
  NcclBarrier(const NcclBarrier&) = delete;
  NcclBarrier& operator=(const NcclBarrier&) = delete;

  bool ready();  ///< the communicator is initialised
  void start(const std::vector<std::uint64_t>& mine);
  bool done();   ///< the allgather started last finished: result() holds it
  /// members x words, member-major (the layout of MPI_Allgather).
  const std::vector<std::uint64_t>& result() const;
  /// A member failed: abort the communicator and its pending collective. The object is unusable afterwards.
  void abort() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reprise::coord
