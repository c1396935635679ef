// MpiCoordination: what makes the Runtime distributed (reprise::MpiRuntime): a buddy level, group commits and ULFM
// recovery. It holds what its parts share (the job's layout, this rank's communicators, the failure flag, failure
// injection); the parts with state of their own are BuddyLink (buddy_link.hpp: shipping versions to the buddy,
// the progress thread, the wards' copies), GroupCommit (group_commit.hpp: commit agreement, job floor, group
// barrier) and Recovery (recovery.hpp: relaunch from files, repair, replacements, moving checkpoints).
// coordination.cpp: set-up, the Runtime's and Comm's hooks, the end of the job.
//
// Communicators (all duplicated from the job's, errors returned):
//   world  control: layout, recovery collectives, final barrier (main thread only)
//   app    handed to the application
//   group  the members of this rank's group: commit agreement at every checkpoint (main thread only)
//   data   owner -> buddy: version heads, payload pieces, releases (sent by the background thread, received by
//          the progress thread)
//   ack    buddy -> owner acknowledgements (sent by the progress thread, received by the background thread)
// Progress: a progress thread at every rank polls `data` (BuddyLink) and stores what its wards ship, so a version
// reaches the buddy while the application computes without calling the runtime.
//
// Failure handling: whoever sees a process failure first (the application through check(), the background
// thread while shipping, the progress thread while receiving) marks the link down and revokes every
// communicator, so every rank's next MPI call fails too. The main thread then recovers (recover()): stop the
// progress thread, let the background thread finish its queue (shipping fails fast), shrink, find the failed
// ranks, plan the rollback from what the survivors hold, take spares or spawn replacements, merge, restore the rank
// numbering, send each replacement its chain (from its buddy, or from its files) and re-ship the chains its wards had
// stored there, then throw Rollback (Recovery). Coordinated fallback: every rank rolls back to the planned version.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/bytes.hpp"
#include "core/version_store.hpp"
#include "gpu/backend.hpp"
#include "gpu/nccl_barrier.hpp"
#include "logging/message_log.hpp"
#include "mpi/buddy_link.hpp"
#include "mpi/check.hpp"
#include "mpi/comm_state.hpp"
#include "mpi/group_commit.hpp"
#include "mpi/recovery.hpp"
#include "mpi/spares.hpp"
#include "protocol/barrier_choice.hpp"
#include "protocol/buddy_store.hpp"
#include "protocol/device_mpi.hpp"
#include "protocol/failure_injection.hpp"
#include "protocol/job_floor.hpp"
#include "protocol/placement.hpp"
#include "protocol/recovery_plan.hpp"
#include "protocol/topology.hpp"
#include "reprise/config.hpp"
#include "runtime/coordination.hpp"

namespace reprise::mpi {

class MpiCoordination : public runtime::Coordination, public CommHost {
 public:
  /// Joins the job: a process of the launch adopts `user` (and, with REPRISE_DIR, agrees with the others on
  /// where to restart); a replacement spawned by a repair joins the survivors and gets its checkpoints.
  MpiCoordination(MPI_Comm user, Config& cfg);
  ~MpiCoordination() override;

  // ---- Coordination hooks (the Runtime's) ------------------------------------------------------------------
  std::unique_ptr<core::VersionStore> make_store(const Config&) override;
  void attach(std::function<void()> quiesce) override { quiesce_ = std::move(quiesce); }
  void before_capture(std::uint64_t version) override;
  void full_version_due() override { comm_state_->fit_log_region_next(); }
  void after_wait() override;
  void after_restore(std::uint64_t version) override {
    comm_state_->after_restore(version);
    if (restored_hook_) restored_hook_();
  }
  /// Called after every restore the application made (MpiRuntime::on_restore).
  void on_restore(std::function<void()> hook) { restored_hook_ = std::move(hook); }
  /// Called at every step() and first at every checkpoint (MpiRuntime::before_checkpoint).
  void before_checkpoint(std::function<void()> hook) { checkpoint_hook_ = std::move(hook); }
  std::optional<std::uint64_t> restore_target() const override { return recovery_.target(); }
  bool restarted() const override { return recovery_.restarted(); }
  bool take_start_over() override { return recovery_.take_start_over(); }
  unsigned ranks_on_node() const override;
  std::map<std::string, std::size_t> memory_use() override;
  void memory_budget(std::size_t bytes) override;
  std::size_t fit_budget(std::size_t excess) override { return comm_state_->release_pools(excess); }
  void memory_sampled(std::size_t bytes) override;
  std::map<std::string, std::size_t> memory_now() override;
  std::size_t shed(std::size_t bytes) override;
  void attach_room(const std::function<bool(std::size_t, bool)>& make_room,
                   const std::function<void(std::size_t)>& counted) override {
    std::lock_guard<std::mutex> lock(room_mutex_);
    room_ = make_room;
    counted_ = counted;
  }
  bool buddy_over_budget() const override { return buddy_over_budget_; }
  void release_store() override;

  // ---- CommHost (reprise::Comm's) --------------------------------------------------------------------------
  gpu::Backend& device() override;
  bool device_pointers_possible() override;
  protocol::DeviceMpiChoice device_mpi() override;
  MPI_Comm view_comm() const override { return view_; }
  MPI_Comm control_comm() const override { return ctl_; }
  bool spurious(int rc) override;
  void check_mpi(int rc, const CallSite& at) override;
  void request_failed(int rc, const CallSite& at) override;
  void before_restart_exchange() override;
  void poll_failure() override;
  void collective_ok(int rc, const CallSite& at) override { mpi::check(rc, at); }

  // ---- MpiRuntime API --------------------------------------------------------------------------------------
  MPI_Comm app() const { return app_; }
  CommState& comm_state() { return *comm_state_; }
  std::optional<std::uint64_t> acknowledged() const { return store_ ? store_->newest_acked_chain() : std::nullopt; }
  std::optional<std::uint64_t> committed() const { return store_ ? store_->committed() : std::nullopt; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const protocol::Layout& layout() const { return layout_; }
  void finish();
  void check(int rc);
  void step(std::uint64_t s);
  void collective_point();  // REPRISE_KILL RANK:STEP:collective (the MPI interposition)
  bool log_checkpoint_due(std::uint64_t s) { return commit_.log_checkpoint_due(s); }
  std::string placement_json() const;
  std::string buddy_json();
  std::string recovery_json() const;

 private:
  // ---- set-up, failures, end of the job (coordination.cpp) -------------------------------------------------
  bool no_failure();
  void agree_to_finish();
  void last_barrier();
  void trace_revoked(const char* where);
  static logging::MessageLog::Allocate log_memory();
  bool should_die(std::uint64_t step, protocol::KillPoint point) const;
  [[noreturn]] void die(const char* point, std::uint64_t step);
  void link_down(const char* who);
  void adopt(MPI_Comm world, bool keep_group = false);

  void recover(const std::string& why) { recovery_.recover(why); }

  Config cfg_;
  protocol::Layout layout_;
  int rank_ = 0, size_ = 0;
  MPI_Comm world_ = MPI_COMM_NULL, app_ = MPI_COMM_NULL, group_ = MPI_COMM_NULL, data_ = MPI_COMM_NULL,
           ack_ = MPI_COMM_NULL, msg_ = MPI_COMM_NULL, payload_ = MPI_COMM_NULL, view_ = MPI_COMM_NULL,
           ctl_ = MPI_COMM_NULL;
  std::unique_ptr<CommState> comm_state_;  // reprise::Comm (after the layout is known)
  std::vector<protocol::KillOrder> kills_;
  bool replacement_ = false;
  bool group_rollback_ = false;                           // REPRISE_ROLLBACK=group
  bool trace_ = std::getenv("REPRISE_TRACE") != nullptr;  // diagnostics of failures and revocations on stderr
  std::unique_ptr<gpu::Backend> device_;                  // reprise::Comm's device buffers
  std::optional<bool> device_possible_;
  mutable std::optional<protocol::Placement> placement_;  // placement_json(): hwloc, on first use
  std::uint64_t kill_floor_ = 0;
  long node_key_ = 0;  // the node this process runs on (mpi::own_node_key; for a replacement, where it started)
  bool on_layout_node_ = true;  // it runs on its rank's node in the layout (not a spare, nor a replacement elsewhere)
  std::uint64_t current_step_ = 0;
  std::atomic<bool> down_{false};
  // The memory budget as the buddy's progress thread sees it: the budget, what the rank held besides its wards'
  // copies when last sampled, the wards' part of that sample; and what this rank's buddy last said of its own.
  std::atomic<std::size_t> budget_{0}, held_besides_wards_{0}, wards_sampled_{0};
  std::atomic<bool> buddy_over_budget_{false};
  std::mutex comm_use_mutex_;
  std::map<std::string, std::size_t> comm_use_;  // reprise::Comm's part of memory_use(), as last read
  std::size_t log_new_ = 0;  // new log segments' bytes since that reading (taken on the application's thread)
  std::mutex room_mutex_;
  std::function<bool(std::size_t, bool)> room_;  // attach_room()'s
  std::function<void(std::size_t)> counted_;
  // (Under the lock: attach_room(nullptr, nullptr) waits for a call under way.)
  bool make_room(std::size_t bytes, bool head_start) {
    std::lock_guard<std::mutex> lock(room_mutex_);
    return !room_ || room_(bytes, head_start);
  }
  // What make_room() allowed is counted where it lives now (a ward's copy, a receive buffer, a log segment).
  void memory_counted(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(room_mutex_);
    if (counted_) counted_(bytes);
  }
  bool over_budget_with_wards(std::size_t wards) const;
  bool over_half_budget_with_wards(std::size_t wards) const;
  bool over_budget() const { return over_budget_with_wards(wards_sampled_); }  // at the last sample
  std::size_t room_for_wards() const;          // what the budget leaves for the wards' copies and receive buffers
  std::unique_ptr<core::VersionStore> local_;  // until make_store() wraps it
  std::unique_ptr<core::VersionStore> own_store() const;  // what local_ is (memory, files)
  protocol::BuddyStore* store_ = nullptr;                 // owned by the Runtime
  std::mutex store_mutex_;  // the progress thread's use of store_ (GroupCommit::on_floor) against release_store()
  std::function<void()> quiesce_;
  std::function<void()> restored_hook_;    // on_restore
  std::function<void()> checkpoint_hook_;  // before_checkpoint
  std::vector<MPI_Comm> retired_;          // communicators of earlier epochs
  SparePool spares_;                       // REPRISE_SPARES (spares.hpp)
  // The parts with state of their own (they use the members above; declared last: built after them, destroyed
  // first, the progress thread with the buddy link, before the recovery whose epoch it reads).
  friend class Recovery;
  friend class GroupCommit;
  friend class BuddyLink;
  Recovery recovery_{*this};
  GroupCommit commit_{*this};
  BuddyLink buddy_{*this};
};

}  // namespace reprise::mpi
