// The distributed runtime: Reprise over MPI, with buddy copies of every checkpoint, coordinated group commits and
// online recovery from process failures (ULFM).
//
//   MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
//   {
//     reprise::MpiRuntime rt(MPI_COMM_WORLD);         // collective; a replacement process joins the job here
//     rt.protect(u); rt.protect("step", &step);
//     if (rt.restarted()) rt.restore();               // replacement or relaunch: data and step come back
//     for (;;) {
//       try {
//         while (step < n) {
//           rt.step(step);                            // failure injection (REPRISE_KILL), pending-failure check
//           rt.check(MPI_Sendrecv(..., rt.comm(), ...)); // every MPI call on rt.comm() goes through check()
//           compute(u);
//           ++step;                                   // the protected step counts the steps done
//           if (step % k == 0) rt.checkpoint(step);   // version = step
//         }
//         result = reduce(u, rt.comm());               // the final collectives, through check() too
//         rt.finish();                                // every rank got here: last version committed, no failure
//         break;
//       } catch (const reprise::Rollback& r) {
//         if (r.from_start()) init(u, step);          // failed before any commit: start over from the beginning
//         else rt.restore();                          // back to the version the job agreed on; loop again
//       }
//     }
//   }
//   MPI_Finalize();
//
// Never use MPI_COMM_WORLD for application messages: a replacement process is not in it. rt.comm() has the
// original rank numbering and is replaced after every recovery (take it again after a Rollback).
//
// Group rollback (Config::group_rollback, REPRISE_ROLLBACK=group): when every application message goes through
// rt.messages() (reprise::Comm), only the ranks of the groups with a failed rank throw Rollback; the others never
// see one: the runtime call that noticed the failure takes part in the repair and returns, and the job goes on
// (their pending messages to and from the rolled-back ranks are completed or posted again; what those ranks need
// is replayed from the logs). Raw MPI on rt.comm() is then not protected: a failure during such a call throws
// Error at a surviving rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "reprise/comm.hpp"
#include "reprise/reprise.hpp"

namespace reprise {

namespace mpi {
class MpiCoordination;
}
namespace interpose {
class Wrapped;
}

class MpiRuntime : public Runtime {
 public:
  /// Collective over `comm` (normally MPI_COMM_WORLD; MPI must be initialised with MPI_THREAD_MULTIPLE). Reads
  /// the layout (REPRISE_RANKS_PER_NODE, REPRISE_GROUPS, REPRISE_BUDDIES) and REPRISE_KILL. In a replacement
  /// process spawned by a recovery it joins the repaired job and fetches its checkpoints from its buddy.
  /// Throws ConfigError (bad layout, no buddy on another node without REPRISE_DIR, MPI without thread support).
  /// Every rank on one node with REPRISE_DIR: no buddy (buddy() is -1), checkpoints in files only.
  explicit MpiRuntime(MPI_Comm comm, Config config = Config::from_env());
  ~MpiRuntime() override;

  /// The application's communicator (original rank numbering, errors returned, not fatal).
  MPI_Comm comm() const;
  int rank() const;
  int size() const;
  int group() const;
  int buddy() const;

  /// The application's messages under the hierarchical protocol (sender-based logging between groups, channel
  /// counters in every checkpoint): see reprise/comm.hpp. Valid for the runtime's lifetime, across recoveries.
  Comm& messages();

  /// Pass the result of every MPI call made on comm(). MPI_SUCCESS: nothing. A process failure (or a revoked
  /// communicator): the runtime repairs the job and throws Rollback. Another error: throws Error.
  void check(int mpi_result);
  /// The last call of the application's try block, after its final collectives (gathering or reducing the
  /// result): waits for the last version to commit (wait()), then all surviving ranks agree that none of them saw
  /// a failure. Uniform: either every rank returns, or every rank takes part in a recovery and throws Rollback.
  /// Without it a rank whose group is done could leave while another still has to roll back.
  void finish();
  /// Call once at the start of every step, with the number of steps done (the version checkpoint() is given
  /// after a step): failure injection (REPRISE_KILL) and a check for failures the runtime's own threads detected.
  /// May throw Rollback. With a message log bound (Config::log_bound_bytes) it may also take checkpoint(step)
  /// itself when the group was asked to, so the protected data must then be those of `step` steps done, with no
  /// message inside the group in flight: the same state as right after the previous step's checkpoint() would be.
  void step(std::uint64_t step);

  /// Newest version whose whole chain this rank's buddy acknowledged (it holds it in host memory), and the
  /// newest version this rank's group committed. Both only read state: they make no progress themselves.
  std::optional<std::uint64_t> acknowledged() const;
  std::optional<std::uint64_t> committed() const;

  /// Recoveries this process took part in, as JSON (failed ranks, version, seconds per phase, bytes).
  std::string recovery_json() const;

  /// What this rank holds as a buddy, as JSON: "wards" maps each rank whose versions it keeps to their numbers,
  /// "receive_buffers" counts the versions received into fresh memory and into recycled buffers (a released
  /// version's buffer takes the next one), those received into fresh memory although released buffers were kept
  /// ("fresh_while_pool_kept": only when every kept one is over twice the size needed), and the bytes now waiting
  /// for reuse. Local: no communication.
  std::string buddy_json() const;

  /// Where this rank runs, as JSON: rank, node, local_index, group, buddy, and from hwloc numa_node, cpuset, the
  /// CUDA device closest to it (gpu, -1 without GPUs; see closest_gpu) and that device's gpu_numa_node (-1:
  /// unknown). Local: no communication.
  std::string placement_json() const;
  /// Collective over comm(): every rank gets the placement_json() of every rank, in rank order, as a JSON array.
  /// Raw MPI: call it after finish() (every rank is there, and with group rollback a failure inside a raw
  /// collective cannot be repeated).
  std::string placements_json();

  /// The CUDA device hwloc finds closest to the calling rank: among the GPUs attached to its NUMA node (all GPUs
  /// when none is), the (local index on its node mod their count)-th; -1 without GPUs. Collective over `comm`
  /// (nodes as the runtime sees them, REPRISE_RANKS_PER_NODE included). Call it after MPI_Init and before the
  /// device is chosen (e.g. Kokkos::initialize with --kokkos-device-id=N): the runtime itself works on the
  /// device the application uses. In a replacement process started by a repair (`comm` its MPI_COMM_WORLD), the
  /// choice is that of the rank it replaces (REPRISE_REPLACING, set by the survivors), and says so on stderr.
  static int closest_gpu(MPI_Comm comm);

  /// Calls `init` (the program's MPI_Init_thread, e.g. the interposition's PMPI_Init_thread) and returns its
  /// result. In a replacement process started by a repair (REPRISE_REPLACING in its environment) MPI_Init returns
  /// only once the survivors' MPI_Comm_spawn does: if it has not after the recovery limit
  /// (REPRISE_RECOVERY_TIMEOUT_S, default 600 s; 0: none), the process says so and stops with exit status 4, as the
  /// survivors' own recovery limit does, so that no orphaned replacement keeps the job from ending.
  static int init_within_recovery_limit(const std::function<int()>& init);

  /// True on one of the runtime's own threads (its buddy progress, drain, file writer, pools): a layer that
  /// interposes MPI tells their calls from those of the application's threads.
  static bool own_thread();

 private:
  // The MPI interposition (libreprise_interpose.so) keeps its communicators in a region of its own
  // (protect_resizable), reads them back before the program's set-up runs again after a rollback (restore_own), and
  // learns when the program restored (on_restore).
  friend class interpose::Wrapped;
  void on_restore(std::function<void()> hook);
  // ... and carries out the program's non-blocking collectives where every run reaches the same point: at every
  // step() and first at every checkpoint (a forced one included), before the group agrees on it.
  void before_checkpoint(std::function<void()> hook);
  void collective_point();  // REPRISE_KILL RANK:STEP:collective, as the program enters a collective
  struct Parts;
  explicit MpiRuntime(Parts parts);
  mpi::MpiCoordination* coord_;  // owned by the Runtime
  // finish() returned and no step() came since: MPI_Finalize of a wrapped program that called finish() itself (a
  // program catching Rollback) does not agree once more.
  bool finished_ = false;
};

}  // namespace reprise
