#include "protocol/topology.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

std::vector<int> parse_ids(const std::string& text, const char* variable, int expected, int max_value) {
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
  if (static_cast<int>(out.size()) != expected)
    throw ConfigError(std::string(variable) + " has " + std::to_string(out.size()) + " entries but the job has " +
                      std::to_string(expected) + " ranks: give one entry per rank, comma-separated");
  return out;
}

}  // namespace

int Layout::nodes() const {
  return node_of.empty() ? 0 : *std::max_element(node_of.begin(), node_of.end()) + 1;
}
int Layout::groups() const {
  return group_of.empty() ? 0 : *std::max_element(group_of.begin(), group_of.end()) + 1;
}

std::vector<int> Layout::ranks_of_node(int node) const {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r)
    if (node_of[r] == node) out.push_back(r);
  return out;
}

std::vector<int> Layout::members_of_group(int group) const {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r)
    if (group_of[r] == group) out.push_back(r);
  return out;
}

std::vector<int> Layout::wards_of(int rank) const {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r)
    if (buddy_of[r] == rank) out.push_back(r);
  return out;
}

bool Layout::has_buddies() const {
  return std::none_of(buddy_of.begin(), buddy_of.end(), [](int b) { return b < 0; });
}

std::vector<std::pair<int, int>> buddies_sharing_a_node(const Layout& layout, const std::vector<long>& node_key) {
  if (node_key.size() != layout.node_of.size())
    throw Error("buddies_sharing_a_node: " + std::to_string(node_key.size()) + " node keys for a layout of " +
                std::to_string(layout.size()) + " ranks");
  std::vector<std::pair<int, int>> out;
  for (int r = 0; r < layout.size(); ++r) {
    const int b = layout.buddy_of[static_cast<std::size_t>(r)];
    if (b < 0) continue;  // files only: no buddy
    if (node_key[static_cast<std::size_t>(r)] == node_key[static_cast<std::size_t>(b)]) out.emplace_back(r, b);
  }
  return out;
}

std::vector<long> emulated_node_keys(int world_size, int ranks_per_node) {
  if (ranks_per_node < 1) throw ConfigError("REPRISE_RANKS_PER_NODE must be >= 1");
  std::vector<long> keys(world_size);
  for (int r = 0; r < world_size; ++r) keys[r] = r / ranks_per_node;
  return keys;
}

Layout make_layout(const std::vector<long>& node_key, const LayoutSpec& spec) {
  const int n = static_cast<int>(node_key.size());
  Layout L;
  L.node_of.resize(n);
  L.local_index.resize(n);
  std::map<long, int> node_index;  // key -> node number, in order of the node's lowest rank
  std::vector<int> per_node;
  for (int r = 0; r < n; ++r) {
    auto [it, fresh] = node_index.emplace(node_key[r], static_cast<int>(per_node.size()));
    if (fresh) per_node.push_back(0);
    L.node_of[r] = it->second;
    L.local_index[r] = per_node[it->second]++;
  }
  const int nodes = static_cast<int>(per_node.size());

  // Groups: the node by default (ranks of a node fail together), or an explicit map renumbered densely.
  if (spec.groups.empty()) {
    L.group_of = L.node_of;
  } else {
    const std::vector<int> raw = parse_ids(spec.groups, "REPRISE_GROUPS", n, -1);
    std::map<int, int> dense;
    L.group_of.resize(n);
    for (int r = 0; r < n; ++r) L.group_of[r] = dense.emplace(raw[r], static_cast<int>(dense.size())).first->second;
  }

  // Buddies: same local index on the next node (ring); a smaller next node wraps the index around.
  if (spec.buddies.empty()) {
    if (nodes < 2 && spec.files_only_allowed) {  // checkpoints in files only
      L.buddy_of.assign(static_cast<std::size_t>(n), -1);
      return L;
    }
    if (nodes < 2)
      throw ConfigError("no buddy on another node: all " + std::to_string(n) +
                        " ranks are on one node, so a node failure would lose every checkpoint copy. Run on two or "
                        "more nodes, emulate nodes on one machine with REPRISE_RANKS_PER_NODE=k, or set REPRISE_DIR "
                        "to keep checkpoints in files only (a failure then needs a relaunch)");
    L.buddy_of.resize(n);
    std::vector<std::vector<int>> ranks(nodes);
    for (int r = 0; r < n; ++r) ranks[L.node_of[r]].push_back(r);
    for (int r = 0; r < n; ++r) {
      const auto& next = ranks[(L.node_of[r] + 1) % nodes];
      L.buddy_of[r] = next[L.local_index[r] % next.size()];
    }
  } else {
    L.buddy_of = parse_ids(spec.buddies, "REPRISE_BUDDIES", n, n - 1);
    for (int r = 0; r < n; ++r)
      if (L.node_of[L.buddy_of[r]] == L.node_of[r])
        throw ConfigError("REPRISE_BUDDIES: the buddy of rank " + std::to_string(r) + " is rank " +
                          std::to_string(L.buddy_of[r]) +
                          ", on the same node: a node failure would lose both copies. Pick a rank on another node");
  }
  return L;
}

}  // namespace reprise::protocol
