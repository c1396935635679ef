// The NCCL group barrier (MpiRuntime's commit agreement on the members' GPUs) and the GPU identity the barrier
// choice needs, behind a small interface: nothing outside src/gpu includes NCCL or CUDA headers.
// A member that dies leaves an NCCL collective hanging, so NcclBarrier is polled, and the runtime aborts it when it
// learns of a failure (from ULFM on its MPI communicators) that its group does not survive.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace reprise::gpu {

/// Why NCCL cannot be used here (not in the build; libnccl.so.2 not loadable), or empty.
std::string nccl_problem();
/// The PCI bus id of the CUDA device the calling thread uses; empty without CUDA in the build or a usable GPU.
std::string current_gpu_bus_id();

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
  bool done();  ///< the allgather started last finished: result() holds it
  /// members x words, member-major (the layout of MPI_Allgather).
  const std::vector<std::uint64_t>& result() const;
  /// A member failed: abort the communicator and its pending collective. The object is unusable afterwards.
  void abort() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reprise::gpu
