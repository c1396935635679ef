// REPRISE_KILL="RANK:STEP[:POINT],...": the listed ranks SIGKILL themselves at a step, at a point of the
// checkpoint/recovery cycle. Used by tests and demos to make failures real.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace reprise::protocol {

/// Recovery points: `recovery` as a recovery attempt begins (before the survivors agree on a plan), `transfer` in
/// its data phase (as this rank is about to send checkpoints to a replacement or its buddy), `exchange` right
/// before this rank's restart exchange (a survivor at once, a rolled-back rank once it restored). `stall` does not
/// kill: as a recovery begins, the rank stops responding (sleeps forever), like a process hung inside the MPI
/// library; the other survivors' recovery then cannot finish (tests the recovery timeout). `join`: every
/// replacement of the rank started by a recovery at or after the step dies as it joins the survivors (after it got
/// the recovery packet), like a replacement that cannot run where the MPI started it. `collective`: as the rank
/// enters the first collective of the step that the MPI interposition serves (a wrapped program's MPI_Allreduce, ...).
/// `stall_spawn`: as `stall`, but once the survivors agreed to spawn replacements: the rank stops as it would enter
/// MPI_Comm_spawn, so the others wait inside it (tests what the recovery timeout says of a spawn that never returns).
/// `stall_files`: does not kill either: the rank's writer of REPRISE_DIR (files written behind the commit) writes no
/// version from the step's on, like a disk that stopped responding (tests what a recovery does when the files lag).
/// `slow_files`: does not kill: from the step's version on, each version the writer puts in the rank's files takes
/// 0.2 s longer, like a file system far slower than the checkpoints (tests a writer that lags and skips).
enum class KillPoint {
  Compute,
  Checkpoint,
  Drain,
  Commit,
  Recovery,
  Transfer,
  Exchange,
  Stall,
  StallSpawn,
  Join,
  StallFiles,
  SlowFiles,
  Collective  // the last (parse_kill_spec names the points up to it)
};
const char* to_string(KillPoint point);

struct KillOrder {
  int rank;
  std::uint64_t step;
  KillPoint point;
};

/// Parses REPRISE_KILL. Throws ConfigError naming the bad entry and the accepted form.
std::vector<KillOrder> parse_kill_spec(const std::string& spec);

/// True when `rank` must die at (`step`, `point`). A recovery point's order fires in the first recovery at or
/// after its step (recoveries happen at whatever step a failure occurs).
bool kill_due(const std::vector<KillOrder>& orders, int rank, std::uint64_t step, KillPoint point);

/// Failure injection across replacements: per rank that failed, the step up to which orders already fired (the
/// ranks that never failed have no entry: 0). A failed rank's order fired at the first of its kill steps above its
/// previous floor, which may be ahead of every survivor (`max_step`): its replacement must not fire it again when
/// it re-executes that step. Returns the floors after the failure of `failed`.
using KillFloors = std::map<int, std::uint64_t>;
KillFloors kill_floors(const std::vector<KillOrder>& orders, KillFloors floors, const std::vector<int>& failed,
                       std::uint64_t max_step);
/// The floor of `rank` (0 when it never failed).
std::uint64_t kill_floor(const KillFloors& floors, int rank);

/// The orders that should have killed `rank` and did not, as its process reaches the job's end alive: those of its
/// killing points (not the stalls, the file writers' points or `join`) above `floor` (its kill_floor when the process
/// is a replacement, which its predecessors fired; none for a process of the job's start: every order). A test whose
/// kill never fires (a step the program never reaches, a point it never passes there) tests no failure: the runtime
/// says so (MpiCoordination::finish).
std::vector<KillOrder> unfired_orders(const std::vector<KillOrder>& orders, int rank,
                                      std::optional<std::uint64_t> floor);
/// "RANK:STEP:POINT", REPRISE_KILL's form.
std::string to_string(const KillOrder& order);

/// True when `rank` is one of the ranks that `list` names ("RANK,..."): the test knobs that name ranks only
/// (REPRISE_KILL_SPARE, REPRISE_FALSE_AGREEMENT). `name` is the variable the list came from. Throws ConfigError
/// naming the variable and the entry when an entry is not a number >= 0 (parse_id_list).
bool rank_listed(const char* name, const std::string& list, int rank);
/// rank_listed() of environment variable `name`; false when it is unset.
bool rank_listed_in_env(const char* name, int rank);

}  // namespace reprise::protocol
