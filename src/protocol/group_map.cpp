#include "protocol/group_map.hpp"

#include <algorithm>
#include <string>

#include "reprise/errors.hpp"

namespace reprise::protocol {

GroupMap::GroupMap(const std::vector<int>& group_of) : ranks_(group_of.size()) {
  int k = 0;
  while (static_cast<std::size_t>(k) < group_of.size() && group_of[static_cast<std::size_t>(k)] == 0) ++k;
  bool blocks = k > 0;
  for (std::size_t r = 0; blocks && r < group_of.size(); ++r) blocks = group_of[r] == static_cast<int>(r) / k;
  if (blocks)
    per_group_ = k;
  else
    table_ = std::make_shared<const std::vector<int>>(group_of);
}

int GroupMap::groups() const {
  if (table_) return table_->empty() ? 0 : *std::max_element(table_->begin(), table_->end()) + 1;
  return static_cast<int>((ranks_ + static_cast<std::size_t>(per_group_) - 1) / static_cast<std::size_t>(per_group_));
}

std::vector<int> GroupMap::members(int rank) const {
  return members_of_group((*this)(rank));
}

std::vector<int> GroupMap::members_of_group(int group) const {
  std::vector<int> out;
  const int n = static_cast<int>(ranks_);
  if (!table_) {
    for (int r = std::max(0, group * per_group_); r < std::min(n, (group + 1) * per_group_); ++r) out.push_back(r);
    return out;
  }
  for (int r = 0; r < n; ++r)
    if ((*table_)[static_cast<std::size_t>(r)] == group) out.push_back(r);
  return out;
}

GroupMap GroupMap::blocks(std::size_t ranks, int per_group) {
  if (per_group < 1) throw UsageError("protocol: groups of " + std::to_string(per_group) + " ranks");
  GroupMap g;
  g.ranks_ = ranks;
  g.per_group_ = per_group;
  return g;
}

bool GroupMap::operator==(const GroupMap& o) const {
  if (ranks_ != o.ranks_) return false;
  for (std::size_t r = 0; r < ranks_; ++r)
    if ((*this)(static_cast<int>(r)) != o(static_cast<int>(r))) return false;
  return true;
}

}  // namespace reprise::protocol
