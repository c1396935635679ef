// reprise-sim: a discrete-event simulation that runs the project's own protocol core (protocol::Process,
// protocol::Coordinator, protocol::plan_group_recovery: channel counters, sender-based log, orphan records, the
// restart exchange's rules, the release rule, the recovery plan) for N simulated ranks over a network model, with
// synthetic communication patterns, group checkpoints and injected failures. One run is two simulations of the same
// program: failure-free, then with the failures; every rank must end with the same application state (a hash over
// every message it delivered, in order), nothing may hang, survivors report the orphans they hold, and no replay
// overtakes an outstanding orphan of a lower phase (the release rule). It measures what the protocol costs each
// rank as the job grows (docs/SCALING.md): the simulator's own bookkeeping is O(N) in total, the state it measures
// is each simulated rank's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "protocol/grouping.hpp"

namespace reprise::sim {

enum class Pattern { Stencil2d, Stencil3d, Cg, Cholesky, Alltoall };
/// "stencil2d", ...; ConfigError naming the accepted values otherwise.
Pattern parse_pattern(const std::string& name);
const char* pattern_name(Pattern p);

struct Failure {
  int rank = 0;
  int step = 0;  ///< the rank dies when it starts this step (the first time)
};

struct Options {
  Pattern pattern = Pattern::Stencil2d;
  int ranks = 64;
  int ranks_per_node = 4;
  std::vector<int> group_of;  ///< rank -> group; empty: one group per node (ranks_per_node consecutive ranks)
  int steps = 20;
  int checkpoint_every = 5;  ///< group checkpoints at steps k, 2k, ... (0: none)
  std::vector<Failure> failures;
  // The model. Payloads are simulated as 8-byte values; these are the bytes the network and the shares count.
  std::uint64_t message_bytes = 32768;      ///< a halo face, a tile; allreduce messages are 8 bytes
  std::uint64_t state_bytes = 64ull << 20;  ///< protected bytes per rank (checkpoint and commit times)
  double compute_seconds = 1e-3;            ///< per step, +-10% (seeded)
  double latency_seconds = 2e-6;            ///< between nodes
  double bandwidth = 12.5e9;                ///< bytes/s of a node's link (shared by its ranks' sends)
  double intra_latency_seconds = 5e-7;      ///< within a node
  double intra_bandwidth = 100e9;           ///< bytes/s within a node
  double checkpoint_bandwidth = 20e9;       ///< bytes/s of a rank's app-visible checkpoint (device digest, pack)
  double detect_seconds = 0;                ///< from a death to the recovery's start (ULFM's detector)
  /// Hold a job floor (the runtime does with REPRISE_DIR or REPRISE_ROLLBACK=all): each group's first rank reports
  /// its commits to rank 0, the floor goes down a binomial tree, and committed views wait for it.
  bool job_floor = false;
  std::uint64_t seed = 1;
  /// For the simulator's own tests: a driver that breaks one rule, so that the check is seen to fail.
  enum class Sabotage { None, DropReplays, RepairDropsSurvivorTraffic, NoGating } sabotage = Sabotage::None;
};

struct Result {
  int ranks = 0, ranks_per_node = 0, groups = 0, max_group_ranks = 0;
  std::size_t peers_max = 0;                 ///< the most peers (other ranks exchanged with) of a rank
  std::size_t per_rank_state_bytes_max = 0;  ///< protocol::Process::state_bytes() + the views told, max
  std::size_t per_rank_log_entries_max = 0;  ///< live log entries of a rank, max
  double control_messages_per_rank_per_checkpoint_max = 0;
  std::size_t recovery_messages_per_rank_max = 0;         ///< over all failures, a rank's recovery control messages
  std::size_t recovery_messages_coordinator = 0;          ///< the restart coordinator's (reports, releases, notices)
  std::size_t recovery_messages_per_rank_max_others = 0;  ///< the same, every rank but the coordinator
  double logged_share = 0;                                ///< bytes logged / bytes sent (failure-free run)
  double rolled_back_share = 0;  ///< ranks rolled back per failure (per recovery when failures merge) / ranks
  std::size_t replayed_messages = 0, orphan_sends = 0, duplicate_sends = 0;
  int failures = 0;  ///< failures that struck (a rank reached its step)
  double makespan_seconds_model = 0, failure_free_makespan_seconds_model = 0;
  double recovery_seconds_model = 0;  ///< makespan with the failures - without (rollback, replays, gating)
  std::uint64_t events = 0;
  double wall_seconds = 0;
  std::size_t peak_rss_bytes = 0;
  std::vector<std::string> problems;  ///< empty: every rank ended as in the failure-free run, nothing hung
};

/// Runs the failure-free simulation, then the one with the failures, and compares them. Throws ConfigError for
/// options it cannot run (ranks, groups, failures outside the job, alltoall beyond 4096 ranks).
Result simulate(const Options& o);

/// Bytes each rank sends to each other over the whole run (the pattern's matrix, for `reprise groups`).
protocol::CommMatrix matrix(const Options& o);

/// The Result as one JSON object (with the options that shaped it).
std::string to_json(const Options& o, const Result& r);

}  // namespace reprise::sim
