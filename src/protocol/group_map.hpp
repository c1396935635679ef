// rank -> group for the whole job, sized by the rule it follows rather than by the job (docs/SCALING.md).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace reprise::protocol {

/// rank -> group for the whole job. Groups of K consecutive ranks (nodes of K ranks, the default) are kept as K
/// alone; any other assignment as one table shared by the copies (every Process of an address space, the
/// simulator's included), so a copy costs O(1) in the job's size.
class GroupMap {
 public:
  GroupMap() = default;
  explicit GroupMap(const std::vector<int>& group_of);
  /// N ranks in groups of `per_group` consecutive ranks (the last one may be smaller).
  static GroupMap blocks(std::size_t ranks, int per_group);
  int operator()(int rank) const { return table_ ? (*table_)[static_cast<std::size_t>(rank)] : rank / per_group_; }
  std::size_t ranks() const { return ranks_; }
  /// The number of groups (group numbers run from 0 to groups() - 1).
  int groups() const;
  /// The ranks of the group of `rank`, ascending.
  std::vector<int> members(int rank) const;
  /// The ranks of group `group`, ascending (none for a group number that has no rank).
  std::vector<int> members_of_group(int group) const;
  /// K for groups of K consecutive ranks; 0 when the groups are a table.
  int per_group() const { return table_ ? 0 : per_group_; }
  /// Bytes of the table a rank holds (0 for consecutive blocks).
  std::size_t table_bytes() const { return table_ ? table_->size() * sizeof(int) : 0; }
  bool operator==(const GroupMap& o) const;

 private:
  std::size_t ranks_ = 0;
  int per_group_ = 1;
  std::shared_ptr<const std::vector<int>> table_;
};

}  // namespace reprise::protocol
