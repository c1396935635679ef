// Which version a job rolls back to after failures, and where each failed rank's data come from. Pure logic over
// what the survivors report, so every rule is unit-tested without MPI.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "protocol/buddy_store.hpp"
#include "protocol/topology.hpp"

namespace reprise::protocol {

/// What the survivors know about one rank's versions.
struct RankHoldings {
  /// The rank's own store: a survivor's memory (or files), a failed rank's files when a persistent level exists.
  std::vector<VersionRecord> own;
  /// What its buddy holds for it in host memory (empty when the buddy failed too).
  std::vector<VersionRecord> at_buddy;
  /// The rank is a replacement whose recovery was interrupted before it had received its checkpoints and those
  /// of its wards: neither what it holds of its own nor what it holds for its wards proves anything is missing.
  bool replacing = false;
  /// The rank's own files were read (a persistent level; a failed rank or an interrupted replacement, its folder
  /// reachable from the survivor that read it): `own` then has what its files hold, which is every version
  /// anybody relies on. Files are written behind the commit, but no committed view (the release of logged
  /// messages) and no job floor passes a version every rank has in its files; files with nothing restorable
  /// mean that the rank's group can start over from the beginning.
  bool files_read = false;
};

/// What the survivors know, per rank: only the ranks somebody reported (a recovery exchanges the records of the
/// ranks that roll back); the others hold nothing known. Sized by the reported ranks, not by the job.
using Holdings = std::map<int, RankHoldings>;
/// `holdings`' entry of `rank`, or an empty one.
const RankHoldings& holdings_of(const Holdings& holdings, int rank);

/// Values per rank, kept for the ranks that have one other than T{} (a plan's rolled-back ranks): the others read
/// T{}. Sized by those ranks, not by the job.
template <class T>
class PerRank {
 public:
  T operator[](std::size_t rank) const {
    const auto it = of_.find(rank);
    return it == of_.end() ? T{} : it->second;
  }
  void set(std::size_t rank, T value) {
    if (value == T{})
      of_.erase(rank);
    else
      of_[rank] = value;
  }
  const std::map<std::size_t, T>& entries() const { return of_; }
  bool operator==(const PerRank& o) const { return of_ == o.of_; }

 private:
  std::map<std::size_t, T> of_;
};

/// Where a rank's version records were found, as survivors report them to each other.
enum class RecordSource : std::uint64_t { Own = 0, AtBuddy = 1, FilesRead = 2 };

/// Appends `records` of `owner`, found at `source`, to `out` as five words each (owner, version, base, full,
/// source). FilesRead appends one more record-less entry (version ~0) saying that the owner's files were read,
/// even when they hold nothing, and the records themselves as Own.
void append_records(std::vector<std::uint64_t>& out, int owner, const std::vector<VersionRecord>& records,
                    RecordSource source);
/// Every survivor's append_records, gathered: the holdings of the ranks reported, of a job of `ranks` ranks.
/// Entries of owners outside 0..ranks-1 are ignored; a record reported twice counts once.
Holdings holdings_from(const std::vector<std::uint64_t>& all, int ranks);

enum class DataSource { Own, Buddy };

struct RecoveryPlan {
  std::uint64_t version = 0;  ///< every rank restores this version
  std::vector<int> failed;    ///< ascending
  /// Per rank: where its chain for `version` is read. Buddy for a failed rank whose buddy holds it, and for a live
  /// rank that lacks it (a replacement whose earlier recovery was interrupted); Own for every other rank.
  PerRank<DataSource> source;
  std::vector<int> rolled_back;  ///< ranks that roll back (coordinated fallback: every rank)
  /// No version is left to restore (nothing was committed yet: a failed rank's buddy survived and holds nothing
  /// of it; or nothing of a rank is in its files): every rank starts the run over from its initial state;
  /// `version` and `source` mean nothing then.
  bool from_start = false;
  /// Group rollback (plan_group_recovery): only `rolled_back` (the ranks of the groups with a failed rank) roll
  /// back, each group to its own newest version; per rank: that version, and whether its group starts over (0 and
  /// false for the ranks that do not roll back).
  bool partial = false;
  PerRank<std::uint64_t> version_of;
  PerRank<char> starts_over;
};

/// `holdings[r]` for every rank r of `layout`. A rank's chain is restorable from its own store or from its buddy's
/// copy. When a rank has nothing restorable and a store that would hold its committed versions proves it has
/// none (its surviving buddy's copy, its own store when it is alive and not an interrupted replacement, or its
/// own files when they were read), its group has nothing to restore and the plan is `from_start`. Throws
/// UnrecoverableFailure naming the ranks whose data are lost (a rank and its buddy lost together without a persistent
/// level, a replacement whose buddy failed before it got its checkpoints back) or saying that no version is restorable
/// on every rank.
RecoveryPlan plan_recovery(const Layout& layout, const std::vector<int>& failed, const Holdings& holdings,
                           bool persistent_level);

/// The plan for a group rollback: each group with a failed rank is planned alone (as plan_recovery does for the
/// whole job): the newest version restorable on every member, or a fresh start when its group never committed.
/// The other groups do not roll back. Throws UnrecoverableFailure as plan_recovery does, for one of those groups.
/// `also`: groups that roll back too although none of their members failed (a member still re-executing after
/// an earlier recovery, or still in it: the limits it re-executes under hold only within that recovery); they are
/// planned like the others (a group that committed nothing since it started over starts over again).
RecoveryPlan plan_group_recovery(const Layout& layout, const std::vector<int>& failed, const Holdings& holdings,
                                 bool persistent_level, const std::set<int>& also = {});

/// The groups a group rollback rolls back: those of the failed ranks, and `also`. plan_group_recovery reads the
/// holdings of their members only (and whether their buddies are interrupted replacements), so the survivors
/// exchange the version records of these ranks alone.
std::set<int> rolled_back_groups(const Layout& layout, const std::vector<int>& failed, const std::set<int>& also);

/// Human-readable list "1, 3 and 5" (ranks, versions).
template <class Number>
std::string list_numbers(const std::vector<Number>& numbers) {
  std::string s;
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    if (i) s += i + 1 == numbers.size() ? " and " : ", ";
    s += std::to_string(numbers[i]);
  }
  return s;
}
inline std::string list_ranks(const std::vector<int>& ranks) {
  return list_numbers(ranks);
}

}  // namespace reprise::protocol
