#include "protocol/topology.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

std::vector<int> parse_ids(const std::string& text, const char* variable, int expected, int max_value) {
  std::vector<int> out = parse_id_list(text, variable, max_value);
  if (static_cast<int>(out.size()) != expected)
    throw ConfigError(std::string(variable) + " has " + std::to_string(out.size()) + " entries but the job has " +
                      std::to_string(expected) + " ranks: give one entry per rank, comma-separated");
  return out;
}

// REPRISE_GROUPS renumbered densely in order of first appearance; a group per node without it.
GroupMap groups_of(const LayoutSpec& spec, int n, const GroupMap& nodes) {
  if (spec.groups.empty()) return nodes;
  const std::vector<int> raw = parse_ids(spec.groups, "REPRISE_GROUPS", n, -1);
  std::map<int, int> dense;
  std::vector<int> group_of(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    group_of[static_cast<std::size_t>(r)] =
        dense.emplace(raw[static_cast<std::size_t>(r)], static_cast<int>(dense.size())).first->second;
  return GroupMap(group_of);
}

// Buddies are on other nodes: the default rule needs two nodes (or a persistent level: none, files only).
bool wants_buddies(const LayoutSpec& spec, int n, int nodes) {
  if (!spec.buddies.empty() || nodes >= 2) return true;
  if (spec.files_only_allowed) return false;  // checkpoints in files only
  throw ConfigError("no buddy on another node: all " + std::to_string(n) +
                    " ranks are on one node, so a node failure would lose every checkpoint copy. Run on two or "
                    "more nodes, emulate nodes on one machine with REPRISE_RANKS_PER_NODE=k, or set REPRISE_DIR "
                    "to keep checkpoints in files only (a failure then needs a relaunch)");
}

Layout with_spec_buddies(const Layout& L, const LayoutSpec& spec) {
  if (spec.buddies.empty()) return L;
  const int n = L.size();
  std::vector<int> buddy_of = parse_ids(spec.buddies, "REPRISE_BUDDIES", n, n - 1);
  for (int r = 0; r < n; ++r)
    if (L.node_of(buddy_of[static_cast<std::size_t>(r)]) == L.node_of(r))
      throw ConfigError("REPRISE_BUDDIES: the buddy of rank " + std::to_string(r) + " is rank " +
                        std::to_string(buddy_of[static_cast<std::size_t>(r)]) +
                        ", on the same node: a node failure would lose both copies. Pick a rank on another node");
  return L.with_buddies(std::move(buddy_of));
}

}  // namespace

Layout Layout::regular(int ranks, int per_node, GroupMap groups, bool buddies) {
  if (ranks < 1 || per_node < 1)
    throw UsageError("protocol: a layout of " + std::to_string(ranks) + " ranks on nodes of " +
                     std::to_string(per_node));
  Layout L;
  L.ranks_ = ranks;
  L.per_node_ = per_node;
  L.nodes_ = (ranks + per_node - 1) / per_node;
  L.groups_ = std::move(groups);
  L.buddies_ = buddies ? Buddies::Rule : Buddies::None;
  return L;
}

Layout Layout::table(std::vector<int> node_of, GroupMap groups, std::vector<int> buddy_of) {
  Layout L;
  L.ranks_ = static_cast<int>(node_of.size());
  std::vector<int> local(node_of.size()), count;
  for (std::size_t r = 0; r < node_of.size(); ++r) {
    const auto node = static_cast<std::size_t>(node_of[r]);
    if (node >= count.size()) count.resize(node + 1, 0);
    local[r] = count[node]++;
  }
  L.nodes_ = static_cast<int>(count.size());
  L.node_of_ = std::make_shared<const std::vector<int>>(std::move(node_of));
  L.local_index_ = std::make_shared<const std::vector<int>>(std::move(local));
  L.groups_ = std::move(groups);
  if (buddy_of.empty()) {  // the default rule, over nodes of any shape: kept as a table (one pass over the ranks)
    std::vector<std::vector<int>> ranks(static_cast<std::size_t>(L.nodes_));
    for (int r = 0; r < L.ranks_; ++r) ranks[static_cast<std::size_t>(L.node_of(r))].push_back(r);
    buddy_of.resize(static_cast<std::size_t>(L.ranks_));
    for (int r = 0; r < L.ranks_; ++r) {
      const auto& next = ranks[static_cast<std::size_t>((L.node_of(r) + 1) % L.nodes_)];
      buddy_of[static_cast<std::size_t>(r)] = next[static_cast<std::size_t>(L.local_index(r)) % next.size()];
    }
  }
  const bool none = std::all_of(buddy_of.begin(), buddy_of.end(), [](int b) { return b < 0; });
  L.buddies_ = none ? Buddies::None : Buddies::Table;
  if (!none) L.buddy_of_ = std::make_shared<const std::vector<int>>(std::move(buddy_of));
  return L;
}

Layout Layout::with_buddies(std::vector<int> buddy_of) const {
  if (static_cast<int>(buddy_of.size()) != ranks_)
    throw UsageError("protocol: " + std::to_string(buddy_of.size()) + " buddies for a layout of " +
                     std::to_string(ranks_) + " ranks");
  Layout L = *this;
  L.buddies_ = Buddies::Table;
  L.buddy_of_ = std::make_shared<const std::vector<int>>(std::move(buddy_of));
  return L;
}

int Layout::node_of(int rank) const {
  return per_node_ > 0 ? rank / per_node_ : node_of_->at(static_cast<std::size_t>(rank));
}

int Layout::local_index(int rank) const {
  return per_node_ > 0 ? rank % per_node_ : local_index_->at(static_cast<std::size_t>(rank));
}

// The default rule: the same local index on the next node (a ring over the nodes); a smaller next node wraps the
// index around.
int Layout::buddy_of(int rank) const {
  switch (buddies_) {
    case Buddies::None:
      return -1;
    case Buddies::Table:
      return buddy_of_->at(static_cast<std::size_t>(rank));
    case Buddies::Rule:
      break;
  }
  const int next = (node_of(rank) + 1) % nodes_;
  const int next_size = std::min(per_node_, ranks_ - next * per_node_);
  return next * per_node_ + local_index(rank) % next_size;
}

std::size_t Layout::table_bytes() const {
  std::size_t b = groups_.table_bytes();
  for (const auto* t : {&node_of_, &local_index_, &buddy_of_})
    if (*t) b += (*t)->size() * sizeof(int);
  return b;
}

std::vector<int> Layout::ranks_of_node(int node) const {
  std::vector<int> out;
  if (per_node_ > 0) {
    for (int r = std::max(0, node * per_node_); r < std::min(ranks_, (node + 1) * per_node_); ++r) out.push_back(r);
    return out;
  }
  for (int r = 0; r < ranks_; ++r)
    if ((*node_of_)[static_cast<std::size_t>(r)] == node) out.push_back(r);
  return out;
}

std::vector<int> Layout::wards_of(int rank) const {
  std::vector<int> out;
  if (buddies_ == Buddies::Rule) {  // the ranks of the previous node whose local index wraps onto this rank's
    for (int r : ranks_of_node((node_of(rank) + nodes_ - 1) % nodes_))
      if (buddy_of(r) == rank) out.push_back(r);
    return out;
  }
  if (buddies_ == Buddies::Table)
    for (int r = 0; r < ranks_; ++r)
      if ((*buddy_of_)[static_cast<std::size_t>(r)] == rank) out.push_back(r);
  return out;
}

bool Layout::operator==(const Layout& o) const {
  if (ranks_ != o.ranks_ || nodes_ != o.nodes_ || !(groups_ == o.groups_)) return false;
  for (int r = 0; r < ranks_; ++r)
    if (node_of(r) != o.node_of(r) || local_index(r) != o.local_index(r) || buddy_of(r) != o.buddy_of(r)) return false;
  return true;
}

std::vector<long> emulated_node_keys(int world_size, int ranks_per_node) {
  if (ranks_per_node < 1) throw ConfigError("REPRISE_RANKS_PER_NODE must be >= 1");
  std::vector<long> keys(world_size);
  for (int r = 0; r < world_size; ++r) keys[r] = r / ranks_per_node;
  return keys;
}

Layout make_regular_layout(int ranks, int per_node, const LayoutSpec& spec) {
  if (per_node < 1) throw ConfigError("REPRISE_RANKS_PER_NODE must be >= 1");
  const GroupMap nodes = GroupMap::blocks(static_cast<std::size_t>(ranks), per_node);
  const int node_count = (ranks + per_node - 1) / per_node;
  const bool buddies = wants_buddies(spec, ranks, node_count);
  return with_spec_buddies(
      Layout::regular(ranks, per_node, groups_of(spec, ranks, nodes), buddies && spec.buddies.empty()), spec);
}

Layout make_layout(const std::vector<long>& node_key, const LayoutSpec& spec) {
  const int n = static_cast<int>(node_key.size());
  std::map<long, int> node_index;  // key -> node number, in order of the node's lowest rank
  std::vector<int> node_of(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    node_of[static_cast<std::size_t>(r)] =
        node_index.emplace(node_key[static_cast<std::size_t>(r)], static_cast<int>(node_index.size())).first->second;
  // Nodes of K consecutive ranks (the last one may have fewer): the rule, no table.
  int k = 0;
  while (k < n && node_of[static_cast<std::size_t>(k)] == 0) ++k;
  bool regular = k > 0;
  for (int r = 0; regular && r < n; ++r) regular = node_of[static_cast<std::size_t>(r)] == r / k;
  if (regular) return make_regular_layout(n, k, spec);
  const int nodes = static_cast<int>(node_index.size());
  const bool buddies = wants_buddies(spec, n, nodes);
  const GroupMap groups = groups_of(spec, n, GroupMap(node_of));
  std::vector<int> none;
  if (!buddies) none.assign(static_cast<std::size_t>(n), -1);
  return with_spec_buddies(Layout::table(std::move(node_of), groups, std::move(none)), spec);
}

std::vector<int> parse_id_list(const std::string& text, const char* variable, int max_value) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t pos = 0;
    int v = -1;
    try {
      v = std::stoi(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != item.size() || v < 0 || (max_value >= 0 && v > max_value))
      throw ConfigError(std::string(variable) + ": '" + item + "' is not a valid id" +
                        (max_value >= 0 ? " (0.." + std::to_string(max_value) + ")" : " (a number >= 0)"));
    out.push_back(v);
  }
  return out;
}

}  // namespace reprise::protocol
