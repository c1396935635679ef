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

namespace reprise::coord {

class JobFloor {
 public:
  explicit JobFloor(int groups = 0) { reset(groups); }

  /// Forget every report (after a repair every group reports again: the table may be a replacement's).
  void reset(int groups) {
    committed_.assign(static_cast<std::size_t>(groups < 0 ? 0 : groups), std::nullopt);
    sent_.reset();
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
      if (!g) return std::nullopt;
      floor = std::min(floor, *g);
    }
    if (sent_ && floor <= *sent_) return std::nullopt;
    sent_ = floor;
    return floor;
  }

 private:
  std::vector<std::optional<std::uint64_t>> committed_;
  std::optional<std::uint64_t> sent_;
};

}  // namespace reprise::coord
