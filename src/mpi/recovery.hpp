// Relaunch and repair (a part of MpiCoordination with its own state): the restart point of a launch on files that
// hold versions, the ULFM repair of a failure (shrink, plan, spares or spawn, merge, rank order, retries), a
// replacement (spare or spawned) joining the survivors, moving checkpoints to the ranks that restore them, and the
// record of every recovery.
//   recover() = stop the background threads, then per attempt: shrink_and_agree && plan_recovery && replace &&
//               merge; then finish_repair (the data phase, the restart exchange, Rollback or return).
// Each attempt shrinks the communicator of the previous one; a failure during an attempt (a survivor or a
// replacement dies) makes every survivor agree to start a new attempt with the union of the failures.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "mpi/check.hpp"
#include "mpi/recovery_watch.hpp"
#include "protocol/failure_injection.hpp"
#include "protocol/recovery_plan.hpp"
#include "reprise/config.hpp"

namespace reprise::mpi {

class MpiCoordination;

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// "rank 5" or "ranks 0 and 7", for messages.
inline std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() > 1 ? "ranks " : "rank ") + protocol::list_ranks(ranks);
}

/// One recovery as this rank saw it (MpiRuntime::recovery_json()).
struct RecoveryRecord {
  std::vector<int> failed;
  std::uint64_t version = 0;
  bool replacement = false;
  bool from_start = false;  // nothing was committed: every rank started over
  double repair_seconds = 0, transfer_seconds = 0, total_seconds = 0;
  int attempts = 1;
  std::vector<int> rolled_back;
  std::uint64_t bytes_sent = 0, bytes_received = 0;
  bool group = false;        // a group rollback: only `rolled_back` rolled back
  bool this_rank = true;     // this rank rolled back (or started over)
  bool interrupted = false;  // another process failed during it: a new recovery took over (its own record)
  std::vector<std::pair<int, int>> buddies_on_one_node;  // {rank, buddy} on one node after the repair
  double at = 0;                                  // when the recovery began (steady clock, seconds since its epoch)
  int spares_used = 0, spawned = 0;               // where the replacements came from (REPRISE_SPARES, MPI_Comm_spawn)
  std::vector<std::pair<int, long>> replaced_on;  // {failed rank, node its replacement runs on} (mpi::own_node_key)
};

class Recovery {
 public:
  explicit Recovery(MpiCoordination& job) : job_(job) {}
  Recovery(const Recovery&) = delete;
  Recovery& operator=(const Recovery&) = delete;

  /// A launch (not a replacement) on REPRISE_DIR: agrees with every rank on the version to restart from.
  void agree_on_restart();
  /// A process spawned by a repair, or a spare taken by one (`parent`: the intercommunicator to the survivors;
  /// `spare_node`: a spare's node, where a spawned process runs on that of the rank it replaces): joins the
  /// survivors, adopts the repaired world, gets its checkpoints.
  void join_as_replacement(MPI_Comm parent, Config& cfg, std::optional<long> spare_node = std::nullopt);
  /// Repairs the job after a process failure. Throws Rollback at every rank that rolls back (or starts over);
  /// returns at a survivor of a group rollback once the job is repaired and the restart exchange done.
  void recover(const std::string& why);
  /// reprise::Comm now exists: the part of a recovery or relaunch that needs it begins.
  void on_comm_created();

  /// The version the application restores at start (a relaunch, or a replacement's recovery).
  std::optional<std::uint64_t> target() const { return target_; }
  bool restarted() const { return restarted_; }
  bool take_start_over() { return std::exchange(start_over_, false); }
  /// Recoveries of the job so far (the epochs of reprise::Comm's channels).
  std::uint32_t epoch() const { return epoch_; }
  /// MpiRuntime::recovery_json(): one object per recovery.
  nlohmann::json json() const;

 private:
  // One recovery attempt: the shrunk communicator, the failed ranks, the plan, the repaired world.
  struct Attempt {
    int number = 1;
    MPI_Comm shrunk = MPI_COMM_NULL, inter = MPI_COMM_NULL, merged = MPI_COMM_NULL, world = MPI_COMM_NULL;
    std::vector<int> failed;
    protocol::RecoveryPlan plan;
    std::uint64_t max_step = 0;
    bool from_spares = false;  // the replacements are spares (REPRISE_SPARES), not spawned
    // Per failed rank: the version it restores and how many times in a row it failed after it (check_repeats),
    // kept in repeats_ once the recovery is done (an attempt that fails is not a failure of the program).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> repeats;
  };
  // Ranks that failed after a recovery restored them, with the version they restored and how many times in a row
  // they failed after restoring it (Config::max_repeated_failures). Only ranks that failed: nothing here grows with
  // the job's size. A survivor's count is the job's (the counts are reduced with MPI_MAX in each plan: a
  // replacement knows none).
  struct Repeats {
    std::uint64_t version = 0;
    std::uint64_t count = 0;
  };
  std::map<int, Repeats> repeats_;
  /// The plan's failed ranks failing again after the same version: the counts, agreed (into a.repeats); an
  /// UnrecoverableFailure when one reached the limit.
  std::exception_ptr check_repeats(Attempt& a);
  // Attempts in a row whose replacements could not start, for the same failed ranks.
  struct StartFailures {
    int count = 0;
    std::vector<int> failed;
  };
  // The stages of recover().
  void shrink_and_agree(MPI_Comm base, const std::string& why, Attempt& a);
  bool plan_recovery(Attempt& a);
  bool replace(Attempt& a, StartFailures& starts);
  // REPRISE_KILL's `stall` points: when due at this rank, says so (`where`) and sleeps forever, like a process hung
  // inside the MPI library (the recovery limit ends it).
  void stall_if_told(protocol::KillPoint point, const char* where) const;
  std::optional<bool> take_spares(Attempt& a);
  bool merge(Attempt& a, StartFailures& starts);
  void start_failed(StartFailures& starts, const std::vector<int>& failed, const std::string& what);
  void finish_repair(Attempt& a, Clock::time_point t0);

  RecoveryRecord record_of(const protocol::RecoveryPlan& plan, Clock::time_point t0) const;
  void recover_group(const protocol::RecoveryPlan& plan, const std::vector<int>& failed, RecoveryRecord& rec,
                     Clock::time_point t0);
  void begin_comm_recovery(const std::set<int>& rolled_back, int coordinator);
  std::vector<std::uint64_t> my_records(const std::vector<int>& files_of, const std::set<int>* groups);
#if REPRISE_HAVE_ULFM
  // MPIX_Comm_agree over `comm`: the AND of every live member's `mine`, the same at every member; nullopt when a
  // process failed meanwhile. agreed(): true only when it is true.
  static std::optional<bool> agreement(MPI_Comm comm, bool mine);
  static bool agreed(MPI_Comm comm, bool mine);
  void move_data_or_recover(const protocol::RecoveryPlan& plan, RecoveryRecord& rec, Clock::time_point t0,
                            Clock::time_point t1);
#endif
  std::vector<int> failed_ranks(MPI_Comm shrunk);
  void start_over();
  void finish_recovery(std::uint64_t version);
  std::vector<std::uint64_t> make_packet(const protocol::RecoveryPlan& plan, std::uint64_t max_step);
  static void broadcast_packet(MPI_Comm merged, std::vector<std::uint64_t>& p);
  void move_data(const protocol::RecoveryPlan& plan, RecoveryRecord& rec);
  void check_placement(RecoveryRecord& rec);
  void greet_replacements(const std::vector<int>& replaced);  // (sorted)
  void trim_wards(const std::function<std::optional<std::uint64_t>(int)>& keep_of);
  void stage(const char* what) {
    if (watch_) watch_->stage(what);
  }
  // The failures a recovery that completes here repaired, for its message: `failed` and those of the recoveries
  // it took over (interrupted by it, so they never said they were done); forgets the latter.
  std::string repaired_phrase(const std::vector<int>& failed);

  MpiCoordination& job_;
  RecoveryWatch* watch_ = nullptr;  // of the recovery under way (recover()), set by the watch itself
  std::uint32_t epoch_ = 0;         // recoveries of the job so far (group rollback)
  bool lowest_survivor_ = false;    // of the last shrink: it speaks for the survivors
  std::optional<std::uint64_t> target_;
  bool restarted_ = false;
  bool start_over_ = false;
  bool joined_group_recovery_ = false;  // a replacement: begin_recovery once Comm exists (on_comm_created)
  std::set<int> joined_rolled_back_;
  int joined_coordinator_ = -1;
  bool data_pending_ = false;         // a replacement whose recovery's data phase has not completed yet
  protocol::KillFloors kill_floors_;  // per rank that failed (protocol::kill_floors)
  std::vector<RecoveryRecord> recoveries_;
  std::vector<int> interrupted_failed_;  // failures of recoveries interrupted here, not yet said repaired (sorted)
};

}  // namespace reprise::mpi
