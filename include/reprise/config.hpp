// Runtime configuration: a plain struct, overridable by REPRISE_* environment variables (docs/CONFIGURATION.md lists
// them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace reprise {

/// Which implementation runs the device-side kernels (digest, compare+compact, pack, unpack).
enum class DeviceBackendKind {
  Auto,      ///< CUDA when built with CUDA and a GPU is usable; otherwise a DeviceError when a device region is
             ///< protected (it says to set REPRISE_DEVICE_BACKEND=host-twin for tests)
  Cuda,      ///< CUDA; an error when no GPU is usable
  HostTwin,  ///< the host twins of the kernels; "device" regions must then be host-accessible (tests)
};

/// MpiRuntime: what a group's commit agreement (its barrier) runs on.
enum class GroupBarrierKind {
  Mpi,   ///< MPI on the group's communicator (always possible)
  Nccl,  ///< NCCL on the devices the members use: a ConfigError when a member has no GPU, two share one, or the
         ///< build has no NCCL
  Auto,  ///< NCCL when every member has its own GPU and the build has NCCL, otherwise MPI
};

/// MpiRuntime: how reprise::Comm moves a message in device memory.
enum class CudaAwareMpi {
  Auto,  ///< hand device buffers to MPI when the CUDA backend is in use and the MPI says at run time that it takes
         ///< them (MPIX_Query_cuda_support in Open MPI, MPIX_GPU_query_support in MPICH 4); staged otherwise
  Yes,   ///< always hand them to MPI (a CUDA-aware MPI without that query); a ConfigError when the MPI says it
         ///< cannot take them
  No,    ///< always stage them through pinned host memory
};

struct Config {
  /// Rank id used to name this process's checkpoint files (single-rank runtime; MPI sets it later).
  int rank = 0;
  /// Dirty-tracking unit. Multiple of 16, at least 256 bytes.
  std::size_t chunk_bytes = 64 * 1024;
  /// A full version every `full_every` versions; differential versions in between. 1 = always full.
  unsigned full_every = 8;
  /// A differential version in which at least this percentage of the protected bytes changed is stored as a full
  /// one (its unchanged chunks packed too, at most 100 - this % of the data more): its chain starts over, so the
  /// versions before it are released instead of piling up until the next scheduled full version (a stencil's
  /// field changes everywhere at every step: full_every copies of it, here and at the buddy). 0 = never.
  unsigned full_at_dirty_percent = 90;
  /// Differential chains (a full version and its differentials) kept; older chains are released.
  unsigned keep_chains = 2;
  /// Directory store root; empty = versions kept in this process's host memory.
  std::string dir;
  /// MPI with a buddy: a file writer slower than the checkpoints skips the versions that wait in front of a newer
  /// full one (docs/DISTRIBUTED.md). Off: every version is written, and a checkpoint waits for the disk once more
  /// than two versions are still to be written.
  bool files_skip = true;
  /// Host threads that digest, pack and checksum host regions (and check chunks at restore).
  unsigned digest_threads = 2;
  /// Versions holding device data live in pinned host memory, so the drain is one DMA per segment. Off: they
  /// live in pageable memory and the drain goes through two pinned buffers of `pinned_piece_bytes`.
  bool pinned_payload = true;
  /// Pinned memory set aside for those versions, pinned when device regions are protected. 0 = twice the
  /// protected device bytes. A version that finds no room goes through the bounce buffers instead.
  std::size_t pinned_arena_bytes = 0;
  /// Size of each of the two pinned bounce buffers the drain uses when `pinned_payload` is off.
  std::size_t pinned_piece_bytes = 8u << 20;
  /// Device staging memory a checkpoint may use at once; more dirty data is packed and drained in rounds.
  std::size_t staging_bytes = std::size_t(1) << 30;
  /// Memory this rank's Reprise may hold: pinned arena, bounce buffers, device staging, payload buffers kept for
  /// reuse, its own versions in host memory, its wards' copies and reprise::Comm's message log (Runtime::
  /// memory_json() reports each). 0 = half the node's physical memory shared among the ranks on the node. Within
  /// it Reprise degrades rather than fails: a smaller pinned arena (versions that do not fit go through the
  /// bounce buffers), less staging (more pack rounds), fewer chains kept than `keep_chains`, and, without
  /// `log_bound_bytes`, a log bound derived from the budget; each says once on stderr which setting to raise.
  /// REPRISE_MEMORY_BUDGET=16G.
  std::size_t memory_budget_bytes = 0;
  /// Checkpoints whose drain is not finished before checkpoint() waits for the oldest one.
  unsigned max_inflight = 2;
  /// Check every restored chunk against the version's digests before writing any protected data.
  bool verify_restore = true;
  /// Device kernels implementation.
  DeviceBackendKind device_backend = DeviceBackendKind::Auto;
  /// When not empty, metrics JSON is written there by wait() and at shutdown.
  std::string metrics_file;
  /// MpiRuntime: when not empty, a directory where every rank writes at finish() the bytes its reprise::Comm sent
  /// to each peer (`row-<rank>.matrix`; re-sent duplicates and replays not counted), the input of `reprise groups`.
  /// REPRISE_COMM_MATRIX=DIR.
  std::string comm_matrix_dir;
  /// MpiRuntime: after a process failure only the groups of the failed ranks roll back (each to its newest
  /// committed version); the other ranks go on, replaying the logged messages the rolled-back ranks need. Needs
  /// every application message to go through MpiRuntime::messages() (reprise::Comm): raw MPI traffic on comm()
  /// is neither logged nor replayed. Off: every rank rolls back to a version common to all (coordinated).
  /// REPRISE_ROLLBACK=group|all.
  bool group_rollback = false;
  /// MpiRuntime: memory bound of reprise::Comm's message log (bytes of log memory held, snapshots included); 0 =
  /// unbounded. A process over it asks its own group and the groups it holds log entries for to checkpoint; a
  /// group that was asked checkpoints at its next step() (version = the step number, as if the application had
  /// called checkpoint(step) at the end of the previous step), so commits release the log (reported in the
  /// metrics: CheckpointMetrics::forced, Comm's stats). The log takes memory in segments (`log_segment_bytes`). A
  /// log still over the bound at 32 checks in a row (a bound below what it must hold until its receivers commit:
  /// every check forces a checkpoint) warns once on stderr. REPRISE_LOG_BOUND=64M.
  std::size_t log_bound_bytes = 0;
  /// MpiRuntime: the size of the message log's segments (the unit in which it takes memory; a payload larger than
  /// one gets its own). 0: 1 MiB, or with an explicit `memory_budget_bytes` a 64th of it (64 KiB to 1 MiB), so that a
  /// small budget's log is not held in 1 MiB steps. REPRISE_LOG_SEGMENT_BYTES=256K.
  std::size_t log_segment_bytes = 0;
  /// With a log bound: the members of a group decide together, in a group reduction at every
  /// `log_check_every`-th step(), whether one of them was asked. REPRISE_LOG_CHECK_EVERY.
  unsigned log_check_every = 1;
  /// MpiRuntime: the group barrier (commit agreement and the channel check of every group checkpoint).
  /// REPRISE_GROUP_BARRIER=mpi|nccl|auto. The NCCL barrier is built when NCCL is found with CUDA; it has run
  /// with one-member groups only (one GPU lent so far: docs/GPU.md), hence the default MPI.
  GroupBarrierKind group_barrier = GroupBarrierKind::Mpi;
  /// MpiRuntime: device buffers of reprise::Comm go to MPI directly (a CUDA-aware MPI: no staging copy; messages
  /// to another group are copied D2H into the log while MPI sends them) or through pinned host memory. Payloads
  /// small enough to travel packed behind their header (3968 B) are staged either way. REPRISE_CUDA_AWARE_MPI=
  /// auto|yes|no.
  CudaAwareMpi cuda_aware_mpi = CudaAwareMpi::Auto;
  /// MpiRuntime: while a recovery lasts longer than this, every rank says on stderr, this often, which stage it is
  /// in (shrink, spawn, merge, moving checkpoints, ...) and for how long; 0 = never. REPRISE_RECOVERY_WATCH_MS.
  unsigned recovery_watch_ms = 20000;
  /// MpiRuntime: a recovery that has not finished after this many seconds stops the process with a clear error
  /// (exit status 4) instead of hanging: a process hung inside the MPI library (seen with Open MPI 5.0.7: survivors
  /// stuck in MPIX_Comm_shrink) would otherwise hold the whole job forever. 0 = wait forever.
  /// REPRISE_RECOVERY_TIMEOUT_S.
  unsigned recovery_timeout_s = 600;
  /// MpiRuntime: a rank that fails this many times in a row after restoring the same version (its group committed
  /// nothing newer in between) stops the job with UnrecoverableFailure: such a failure follows the program (a bug,
  /// bad input, memory it runs out of), not a process or a node, and recovering again would loop forever. 0 = no
  /// limit. REPRISE_MAX_REPEATED_FAILURES.
  unsigned max_repeated_failures = 3;
  /// MpiRuntime: the last `spares` processes of the communicator given to it are spares: the application sees the
  /// others only; a spare holds no data, waits inside the runtime's set-up and takes a failed rank's place in a
  /// recovery (no MPI_Comm_spawn). `scripts/mpirun.sh -n N --spares k` starts N + k processes. REPRISE_SPARES=k.
  unsigned spares = 0;
  /// MpiRuntime: a recovery with fewer spares left than failed ranks spawns the replacements (MPI_Comm_spawn).
  /// Off: it stops the job with UnrecoverableFailure instead. REPRISE_SPAWN=1|0.
  bool spawn = true;

  /// `base` overridden by the REPRISE_* variables that are set. Throws ConfigError on bad values.
  static Config from_env(Config base);
  static Config from_env() { return from_env(Config{}); }
  /// Throws ConfigError naming the first invalid field.
  void validate() const;
};

/// Parses "65536", "64K", "64KiB", "8M", "1GiB" (binary units). Throws ConfigError mentioning `what`.
std::size_t parse_bytes(const std::string& text, const std::string& what);

}  // namespace reprise
