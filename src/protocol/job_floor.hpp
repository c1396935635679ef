// The job floor: the oldest of the groups' newest committed versions. A version every group committed is
// restorable on every rank only if no rank released it, and groups commit (and release) on their own: without a
// floor, a group that committed v+1 drops v while another group has committed only v, and no version is common to
// every rank (a coordinated rollback, REPRISE_ROLLBACK=all, then finds none; a relaunch from files starts over).
// The groups' first ranks compute it in a reduction tree over the group numbers (FloorNode: at most kFloorFanIn
// children each, so no rank hears from more than kFloorFanIn groups, whatever the job's size): each reports its
// subtree's oldest commit to its parent when it rises, and group 0's first rank (rank 0) sends the floor down a
// tree of the same shape over the ranks (floor_children) whenever it rises; ranks keep the floor's chain and everything
// newer (BuddyStore::set_job_floor). A stale floor is only older, so ranks keep more than needed, never less.
// With files written in the background (REPRISE_DIR), a group reports no more than its members' files hold, and
// writers that lag skip versions (core's write-behind store): the floor is then a version no rank skipped, either
// the oldest files' frontier when it lies outside every skipped range, or the job's pin, the first version at or
// after the mark that rank 0 sends down with each floor (its group's newest commit + 1), which no writer skips:
// once every rank wrote the same pin, it is the floor, and the next mark lets the writers skip up to the newest
// commits again. Pure logic, tested without MPI.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "protocol/group_map.hpp"

namespace reprise::protocol {

/// Children per group in the floor's reduction tree: group g's are k*g + 1 .. k*g + k; its parent (g - 1) / k.
inline constexpr int kFloorFanIn = 8;

inline int floor_parent_group(int group) {
  return group <= 0 ? -1 : (group - 1) / kFloorFanIn;
}

inline std::vector<int> floor_child_groups(int group, int groups) {
  std::vector<int> children;
  for (long c = long(kFloorFanIn) * group + 1; c <= long(kFloorFanIn) * group + kFloorFanIn && c < groups; ++c)
    children.push_back(static_cast<int>(c));
  return children;
}

/// A rank's place among the groups' first ranks (the tree above): whether it is its group's first rank, the first
/// rank of the parent group (-1 for group 0) and of each child group. One pass over `group_of(r)` (rank -> group,
/// for the `ranks` ranks: a table's or a protocol::GroupMap's), ending once all of them are found.
struct GroupTreeRanks {
  bool first = false;
  int parent = -1;
  std::vector<int> children;
};
template <class GroupOf>
GroupTreeRanks group_tree_ranks(std::size_t ranks, const GroupOf& group_of, int rank, int groups) {
  const int group = group_of(rank);
  const int parent = floor_parent_group(group);
  const std::vector<int> child_groups = floor_child_groups(group, groups);
  GroupTreeRanks t;
  t.children.assign(child_groups.size(), -1);
  int first = -1;
  std::size_t found = 0;  // child groups whose first rank is known
  for (std::size_t r = 0; r < ranks; ++r) {
    const int g = group_of(static_cast<int>(r));
    if (g == group && first < 0) first = static_cast<int>(r);
    if (g == parent && t.parent < 0) t.parent = static_cast<int>(r);
    if (g > group && !child_groups.empty() && g >= child_groups.front() && g <= child_groups.back()) {
      int& c = t.children[static_cast<std::size_t>(g - child_groups.front())];
      if (c < 0) {
        c = static_cast<int>(r);
        ++found;
      }
    }
    if (first >= 0 && (parent < 0 || t.parent >= 0) && found == child_groups.size()) break;
  }
  t.first = first == rank;
  return t;
}
/// The same over the job's groups: groups of K consecutive ranks give the first ranks directly (K * group), any
/// other map a pass over it.
inline GroupTreeRanks group_tree_ranks(const GroupMap& groups, int rank) {
  const int k = groups.per_group();
  if (k == 0) return group_tree_ranks(groups.ranks(), groups, rank, groups.groups());
  const int group = groups(rank);
  GroupTreeRanks t;
  t.first = rank == group * k;
  const int parent = floor_parent_group(group);
  t.parent = parent < 0 ? -1 : parent * k;
  for (int c : floor_child_groups(group, groups.groups())) t.children.push_back(c * k);
  return t;
}

/// What a subtree of groups tells its parent: the oldest of its groups' newest commits and a group that has it,
/// or (complete false) a group of the subtree that has committed nothing yet. With files written in the background,
/// `version` is the oldest of the groups' newest commits and of their members' files (every version up to it is
/// written there, or skipped), and the rest says what the writers skipped and which pin they wrote.
struct FloorSummary {
  bool complete = false;
  std::uint64_t version = 0;
  int group = -1;
  std::uint64_t committed = UINT64_MAX;  ///< the oldest of the groups' newest commits (UINT64_MAX: `version`)
  std::uint64_t skipped_oldest = UINT64_MAX, skipped_newest = 0;  ///< the span of every skipped version (none: MAX, 0)
  /// The pin every member wrote, + 1, as the oldest and the newest of the members' (0: some member has none). Equal
  /// and nonzero: every rank of the subtree has that version in its files.
  std::uint64_t pin_oldest = 0, pin_newest = 0;
  bool operator==(const FloorSummary& o) const {
    return complete == o.complete && version == o.version && group == o.group && committed == o.committed &&
           skipped_oldest == o.skipped_oldest && skipped_newest == o.skipped_newest && pin_oldest == o.pin_oldest &&
           pin_newest == o.pin_newest;
  }
};

/// The newest version every rank of a complete summary is known to hold, none when the skipped versions hide it:
/// `version` when no rank skipped it (outside the skipped span), else the pin when every rank wrote the same one and
/// every group committed it.
inline std::optional<std::uint64_t> floor_candidate(const FloorSummary& s) {
  std::optional<std::uint64_t> c;
  if (s.version < s.skipped_oldest || s.version > s.skipped_newest) c = s.version;
  if (s.pin_oldest != 0 && s.pin_oldest == s.pin_newest && s.pin_oldest - 1 <= s.committed)
    c = std::max(c.value_or(0), s.pin_oldest - 1);
  return c;
}

/// One group's place in the reduction tree, kept by its first rank: its own newest commit and each child
/// subtree's last summary. A report goes up when the subtree became complete or its floor rose, and at the group's
/// own commits when anything changed (so the group named, the oldest or one that has committed nothing, is at most
/// one of its commits old): in lockstep at most two reports per checkpoint.
class FloorNode {
 public:
  /// A group that holds the floor back while the job goes on: every rank keeps its versions from the floor on.
  struct Lag {
    int group = -1;
    std::optional<std::uint64_t> committed;  ///< its newest commit (none: it has committed nothing yet)
    unsigned rounds = 0;                     ///< commits of group 0 since the floor last rose
  };
  /// What a report makes this node do: tell its parent (`up`, with its sequence number), or at the root (group 0)
  /// send a floor that rose down to every rank.
  struct Out {
    std::optional<FloorSummary> up;
    std::uint64_t seq = 0;
    std::optional<std::uint64_t> floor;
    std::uint64_t mark = 0;  ///< with a floor: the writers' next mark (the first version at or after it is the pin)
  };

  FloorNode(int group = 0, int groups = 1) { reset(group, groups); }

  /// Forget every report (after a repair every group reports again: a parent may be a replacement).
  void reset(int group, int groups) {
    group_ = group;
    groups_ = groups;
    children_ = floor_child_groups(group, groups);
    slots_.assign(children_.size() + 1, Slot{});
    sent_.reset();
    floor_.reset();
    since_rise_ = 0;
    lag_told_ = false;
  }

  int group() const { return group_; }
  int parent() const { return floor_parent_group(group_); }
  const std::vector<int>& children() const { return children_; }
  /// What this node keeps (the first rank of a group holds it): bounded by the fan-in, not by the job's size.
  std::size_t state_bytes() const {
    return sizeof(*this) + children_.capacity() * sizeof(int) + slots_.capacity() * sizeof(Slot);
  }
  /// The subtree's summary now (at the root: the job's; complete once every group committed).
  FloorSummary summary() const { return summary_; }

  /// This group committed `version`. A version not newer than its last one changes nothing (the caller may report
  /// its newest commit at every checkpoint).
  Out own(std::uint64_t version) { return own(FloorSummary{true, version, group_, version}); }
  /// The same with files written in the background (`s.version`: the oldest of the commit and the members' files;
  /// `s.committed`: the group's commit; what the members skipped and their pins). Nothing new changes nothing.
  Out own(FloorSummary s) {
    s.complete = true;
    s.group = group_;
    if (slots_[0].heard && (s.version < slots_[0].s.version || s == slots_[0].s)) return {};
    return report(group_, 0, s);
  }

  /// Group `from` (this group, or a child) reports `s`, its `seq`-th report since the last reset. Reports of other
  /// groups, or older than the last one taken from `from` (a late message), or that would take a subtree back
  /// (a complete summary followed by an incomplete one, a lower version) change nothing.
  Out report(int from, std::uint64_t seq, const FloorSummary& s) {
    Slot* slot = nullptr;
    if (from == group_) {
      slot = &slots_[0];
    } else {
      const auto it = std::find(children_.begin(), children_.end(), from);
      if (it == children_.end()) return {};
      slot = &slots_[static_cast<std::size_t>(it - children_.begin()) + 1];
      if (slot->heard && seq <= slot->seq) return {};
      slot->seq = seq;
    }
    if (slot->heard && slot->s.complete && (!s.complete || s.version < slot->s.version)) return {};
    slot->heard = true;
    slot->s = s;
    if (from == group_) ++since_rise_;
    const FloorSummary was = summary_;
    summary_ = combine();
    Out out;
    if (group_ == 0) {
      const auto f = summary_.complete ? floor_candidate(summary_) : std::nullopt;
      if (f && (!floor_ || *f > *floor_)) {
        floor_ = f;
        out.floor = floor_;
        if (slots_[0].s.committed != UINT64_MAX) mark_ = std::max(mark_, slots_[0].s.committed + 1);
        out.mark = mark_;
        since_rise_ = 0;
        lag_told_ = false;
      }
      return out;
    }
    const bool rose = summary_.complete != was.complete || summary_.version != was.version;
    if (!sent_ || (!(*sent_ == summary_) && (rose || from == group_))) {
      sent_ = summary_;
      out.up = summary_;
      out.seq = ++seq_;
    }
    return out;
  }

  /// At the root, once per floor: the group holding it back, when group 0 committed `rounds` times since the floor
  /// last rose, and twice as many as at the last lag told (a floor that follows files written behind the commit lags
  /// at every rise: a few lines per job, not one per floor). For a warning: a group that stopped committing makes
  /// every rank keep everything newer.
  std::optional<Lag> lag(unsigned rounds = 4) {
    if (group_ != 0 || groups_ < 2 || lag_told_ || since_rise_ < std::max(rounds, next_lag_rounds_))
      return std::nullopt;
    lag_told_ = true;
    next_lag_rounds_ = 2 * since_rise_;
    Lag l;
    l.group = summary_.group;
    if (summary_.complete) l.committed = summary_.version;
    l.rounds = since_rise_;
    return l;
  }

 private:
  struct Slot {
    bool heard = false;
    std::uint64_t seq = 0;
    FloorSummary s;
  };

  FloorSummary combine() const {
    FloorSummary out{true, 0, -1};
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      const Slot& sl = slots_[i];
      if (!sl.heard) return FloorSummary{false, 0, i == 0 ? group_ : children_[i - 1]};
      if (!sl.s.complete) return sl.s;
      if (out.group < 0) {
        out = sl.s;
        continue;
      }
      if (sl.s.version < out.version) {
        out.version = sl.s.version;
        out.group = sl.s.group;
      }
      out.committed = std::min(out.committed, sl.s.committed);
      out.skipped_oldest = std::min(out.skipped_oldest, sl.s.skipped_oldest);
      out.skipped_newest = std::max(out.skipped_newest, sl.s.skipped_newest);
      out.pin_oldest = std::min(out.pin_oldest, sl.s.pin_oldest);
      out.pin_newest = std::max(out.pin_newest, sl.s.pin_newest);
    }
    return out;
  }

  int group_ = 0, groups_ = 1;
  std::vector<int> children_;
  std::vector<Slot> slots_;  // [0]: this group's own commit; [1 + i]: children_[i]'s subtree
  FloorSummary summary_;
  std::optional<FloorSummary> sent_;    // the last summary sent up
  std::uint64_t seq_ = 0;               // reports sent up (never reset: a parent drops older ones)
  std::optional<std::uint64_t> floor_;  // the root: the last floor sent down
  std::uint64_t mark_ = 0;              // the root: the last mark sent down (kept across resets: only ever raised)
  unsigned since_rise_ = 0;             // this group's commits since the floor last rose
  unsigned next_lag_rounds_ = 0;        // a lag is told from this many commits on (twice the last one told)
  bool lag_told_ = false;
};

/// Where the floor goes from rank 0: the same shape of tree over the ranks, so no rank sends it more than
/// kFloorFanIn times per rise, whatever the job's size (rank 0 once to each rank was N sends per rise; a binomial
/// tree, log2(N)). Rank r's children: k*r + 1 .. k*r + k below `ranks`; each rank forwards the floor to its children
/// when it arrives. Depth: ceil(log_k N) hops (6 at 100,000 ranks).
inline std::vector<int> floor_children(int rank, int ranks) {
  return floor_child_groups(rank, ranks);
}

}  // namespace reprise::protocol
