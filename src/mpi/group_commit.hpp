// The group's side of a checkpoint (a part of MpiCoordination with its own state): the commit agreement of the
// group (MPI, or NCCL on the members' GPUs), the job floor (the groups' first ranks reduce their commits in a tree,
// every rank applies the floor), and waiting for the group while serving the protocol.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "gpu/nccl_barrier.hpp"
#include "mpi/check.hpp"
#include "protocol/barrier_choice.hpp"
#include "protocol/job_floor.hpp"

namespace reprise::core {
struct FilesProgress;
}

namespace reprise::mpi {

class MpiCoordination;

class GroupCommit {
 public:
  explicit GroupCommit(MpiCoordination& job) : job_(job) {}
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  /// The group barrier: members agree on the newest version every member's buddy acknowledged (committed), and
  /// at a checkpoint (`capture`) also exchange reprise::Comm's channel counters in the same collective.
  void agree(std::optional<std::uint64_t> capture = std::nullopt);
  /// The log bound's group decision at every log_check_every-th step (MpiRuntime::step).
  bool log_checkpoint_due(std::uint64_t s);
  /// Whether ranks keep a version common to all (the job floor): coordinated rollback, or files to relaunch from.
  bool holds_job_floor() const;
  /// Says once that this rank's file writer skipped versions (a disk slower than the checkpoints), if it did.
  void tell_skipping(const core::FilesProgress& files);

  // The progress thread's part (a group's first rank: its child groups' reports; every rank: the floor).
  void on_floor_report(int src);
  /// The floor and the writers' mark (protocol::FloorNode::Out): forwarded down the tree and applied to the store
  /// now, to the message log's views and the writers at the next checkpoint.
  void on_floor(std::uint64_t floor, std::uint64_t mark);

  // Repairs.
  void new_communicators(int groups);  ///< every group reports again; the reduction tree starts over
  void forget_floor() { floor_received_ = -1; }
  void reset_barrier();  ///< a new group communicator: the barrier is chosen (and built) again
  void cancel_wait();    ///< a recovery abandons the group collective this rank waits for

 private:
  void report_commit();
  struct FloorStep {
    protocol::FloorNode::Out out;
    int group = 0, parent_rank = -1;
  };
  void floor_out(const FloorStep& step);  // a report up the groups' tree, or the floor down
  bool nccl_group();
  void wait_nccl(const std::function<bool()>& finished);
  /// REPRISE_GROUP_COLLECTIVE(call, req, what) calls it.
  void group_collective(int started, MPI_Request& req, const char* what, const CallSite& at);
  int wait_group(MPI_Request& req);

  MpiCoordination& job_;
  MPI_Request* pending_ = nullptr;                  // the group collective this rank waits for (wait_group)
  std::optional<protocol::BarrierChoice> barrier_;  // the group barrier's kind, chosen with the group
  std::unique_ptr<gpu::NcclBarrier> nccl_;          // an NCCL group's communicator
  // A group's first rank: its place in the groups' reduction tree (its own commits from the main thread, its
  // child groups' reports from the progress thread).
  std::mutex floor_mutex_;
  protocol::FloorNode floor_node_;
  bool first_of_group_ = false;                   // (from the layout, at new_communicators)
  int floor_parent_rank_ = -1;                    // the first rank of the parent group (-1: group 0)
  std::atomic<std::int64_t> floor_received_{-1};  // the newest job floor from rank 0 (-1: none yet)
  std::atomic<std::uint64_t> mark_received_{0};   // the writers' mark that came with it
  std::int64_t files_written_ = INT64_MAX;        // the group's oldest files_progress().written (INT64_MAX: none)
  // What the group's writers skipped (their span: none UINT64_MAX, 0) and the pins they wrote (+ 1; 0: none), at
  // the last agreement (protocol::FloorSummary).
  std::uint64_t files_skipped_oldest_ = UINT64_MAX, files_skipped_newest_ = 0, files_pin_oldest_ = 0,
                files_pin_newest_ = 0;
  bool told_skipping_ = false;      // this rank said once that its writer skips
  bool told_skips_paused_ = false;  // ... and once that its memory budget stopped it
};

}  // namespace reprise::mpi

/// Inside GroupCommit: a collective of the group, started by `call` on request `req` (group_collective).
#define REPRISE_GROUP_COLLECTIVE(call, req, what) group_collective((call), (req), (what), REPRISE_MPI_SITE(call))
