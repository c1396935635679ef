// Spare processes (REPRISE_SPARES=k): the job starts with N + k processes; the application sees the first N; the
// last k hold no data and wait inside the runtime's set-up. A recovery takes its replacements from them, without
// MPI_Comm_spawn (which needs free slots, and has open bugs after failures in Open MPI 5.0.x), while enough are
// left; the application's ranks release them at the end of the job.
//
// The pool communicator holds every live process the job started with (application ranks and spares; a spawned
// replacement is never in it). Nobody uses it while the job runs, except the spares, who wait in a barrier on it.
// A round, the same at every member: revoke the pool (the spares' barrier ends), shrink it, and learn in one
// reduction how many spares live and which ranks failed, then agree that nothing failed meanwhile. Rounds happen
// in a recovery (its survivors), at the end of the job when a spare died (the barrier failed), and whenever a
// spare sees a failure (the others join it at their next recovery or at the end). Invariant: every application
// rank is in the pool, or none is (the spares are retired, at every member at once, when a recovery needs more
// than are left and its replacements are spawned), so a recovery's survivors all take part in its rounds.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

namespace reprise::mpi {

/// A round's result, the same at every member of the new pool.
struct PoolRound {
  int failed = 0;             // ranks a recovery replaces (0: the end of the job, or only spares failed)
  int spares = 0;             // live spares
  int spare_index = -1;       // this spare's place among them (-1: an application rank)
  int survivors_leader = -1;  // pool rank of the survivors' leader (rank 0 of the shrunk communicator)
  int spares_leader = -1;     // pool rank of spare 0
  bool application = false;   // some application rank is still in the pool
  // With enough spares for `failed` ranks (protocol::assign_spares): for failed rank i, the spare taking its
  // place; and every spare's pool rank.
  std::vector<int> spare_of;
  std::vector<long> spare_pool_rank;
};

class SparePool {
 public:
  SparePool() = default;
  SparePool(const SparePool&) = delete;
  SparePool& operator=(const SparePool&) = delete;
  ~SparePool();

  /// Collective over `user`: its last `k` processes are spares. Returns (a duplicate of) the communicator of the
  /// application's ranks, MPI_COMM_NULL at a spare. k = 0: a duplicate of `user`, and no pool.
  MPI_Comm start(MPI_Comm user, unsigned k);
  bool spare() const { return spare_; }
  bool active() const { return pool_ != MPI_COMM_NULL; }
  /// Where this process runs (mpi::own_node_key): a spare's own node.
  long node_key() const { return node_key_; }
  /// This process's rank in the communicator the job started with (messages).
  int start_rank() const { return start_rank_; }

  /// A spare: waits until a recovery takes it; returns the intercommunicator to the survivors, to join them as a
  /// replacement (Recovery::join_as_replacement). When the job ends (or no longer needs it), it finalizes MPI and
  /// ends this process with status 0: it never returns then.
  MPI_Comm wait_until_needed();

  /// The survivors of a recovery (all in the pool): a round with failed ranks to replace, `failed_node[i]` the
  /// node failed rank i ran on where this survivor ran on it too (else protocol::kUnknownNode); `leader`: rank 0
  /// of the shrunk communicator. nullopt: a process failed meanwhile (the same at every member: a new attempt).
  std::optional<PoolRound> survivors_round(const std::vector<long>& failed_node, bool leader) {
    return round(static_cast<int>(failed_node.size()), leader, failed_node);
  }
  /// After such a round with enough spares: the intercommunicator from `survivors` (the shrunk communicator) to
  /// the first `failed` spares, who replace the failed ranks in order. Throws PeerFailure.
  MPI_Comm take(MPI_Comm survivors, const PoolRound& r);
  /// Fewer spares than a recovery needs: its replacements are spawned, the spares leave (they learn it from the
  /// same round) and the pool is dropped here.
  void retire();
  /// The end of the job, at the application's ranks: the spares' barrier; then they finalize and leave.
  void release();

 private:
  std::optional<PoolRound> round(int failed, bool leader, const std::vector<long>& failed_node = {});
  [[noreturn]] void leave(bool job_ended, const std::string& why);

  MPI_Comm pool_ = MPI_COMM_NULL;
  bool spare_ = false;
  int start_rank_ = 0;
  long node_key_ = 0;
  std::vector<MPI_Comm> retired_;  // earlier pools (revoked), freed at the end
};

}  // namespace reprise::mpi
