// The job floor: the oldest of the groups' newest committed versions. A version every group committed is
// restorable on every rank only if no rank released it, and groups commit (and release) on their own: without a
// floor, a group that committed v+1 drops v while another group has committed only v, and no version is common to
// every rank (a coordinated rollback, REPRISE_ROLLBACK=all, then finds none; a relaunch from files starts over).
// Each group's first rank reports its group's commits to rank 0, which keeps this table and sends the floor to
// every rank whenever it rises; ranks keep the floor's chain and everything newer (BuddyStore::set_job_floor).
// A stale floor is only older, so ranks keep more than needed, never less. Pure logic, tested without MPI.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace reprise::protocol {

class JobFloor {
 public:
  /// A group that holds the floor back while the others commit: every rank keeps its versions from the floor on.
  struct Lag {
    int group = -1;
    std::optional<std::uint64_t> committed;  ///< its newest commit (none: it has reported none)
    unsigned others = 0;                     ///< reports of the other groups since the floor last rose
  };

  explicit JobFloor(int groups = 0) { reset(groups); }

  /// Forget every report (after a repair every group reports again: the table may be a replacement's).
  void reset(int groups) {
    committed_.assign(static_cast<std::size_t>(groups < 0 ? 0 : groups), std::nullopt);
    sent_.reset();
    since_rise_ = 0;
    lag_told_ = false;
  }

  /// Once per floor: the group holding it back, when the other groups reported `rounds` commits each (on average)
  /// since it last rose. For a warning: a group that stopped committing makes every rank keep everything newer.
  std::optional<Lag> lag(unsigned rounds = 4) {
    if (lag_told_ || committed_.size() < 2 || since_rise_ < rounds * (committed_.size() - 1)) return std::nullopt;
    lag_told_ = true;
    Lag l;
    l.others = since_rise_;
    for (std::size_t g = 0; g < committed_.size(); ++g) {  // a group that never reported, else the oldest commit
      if (!committed_[g]) {
        l.group = static_cast<int>(g);
        l.committed.reset();
        break;
      }
      if (l.group < 0 || *committed_[g] < *l.committed) {
        l.group = static_cast<int>(g);
        l.committed = committed_[g];
      }
    }
    return l;
  }

  /// Group `group` committed `version`. Returns the new floor when it rose (every group has reported and the
  /// oldest of their versions is newer than the last floor returned); std::nullopt otherwise. Reports of an
  /// unknown group, or older than the group's last one (a late message), change nothing.
  std::optional<std::uint64_t> report(int group, std::uint64_t version) {
    if (group < 0 || static_cast<std::size_t>(group) >= committed_.size()) return std::nullopt;
    auto& c = committed_[static_cast<std::size_t>(group)];
    if (c && version <= *c) return std::nullopt;
    c = version;
    std::uint64_t floor = UINT64_MAX;
    for (const auto& g : committed_) {
      if (!g) {
        ++since_rise_;
        return std::nullopt;
      }
      floor = std::min(floor, *g);
    }
    if (sent_ && floor <= *sent_) {
      ++since_rise_;
      return std::nullopt;
    }
    sent_ = floor;
    since_rise_ = 0;
    lag_told_ = false;
    return floor;
  }

 private:
  std::vector<std::optional<std::uint64_t>> committed_;
  std::optional<std::uint64_t> sent_;
  unsigned since_rise_ = 0;  // reports since the floor last rose (or since the start)
  bool lag_told_ = false;
};

/// Where the floor goes from rank 0: a binomial tree, so no rank sends it more than log2(N) times (rank 0 once to
/// each rank was N sends per rise). Rank r's children: r + 2^k for every 2^k above r's highest bit (every 2^k for
/// rank 0) with r + 2^k < `ranks`; each rank forwards the floor to its children when it arrives. Depth: ceil(log2
/// N) hops.
inline std::vector<int> floor_children(int rank, int ranks) {
  std::vector<int> children;
  int bit = 1;
  while (bit <= rank) bit <<= 1;
  for (; rank + bit < ranks && bit > 0; bit <<= 1) children.push_back(rank + bit);
  return children;
}

}  // namespace reprise::protocol
