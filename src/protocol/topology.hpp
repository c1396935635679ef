// Where ranks are, which ranks checkpoint together (groups) and who holds whose checkpoint (buddies).
// Pure logic over "node keys" gathered from MPI (src/mpi/layout), so every rule is unit-tested without MPI.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace reprise::protocol {

struct Layout {
  std::vector<int> node_of;      ///< rank -> node index; nodes are numbered in order of their lowest rank
  std::vector<int> local_index;  ///< rank -> index among the ranks of its node (by rank)
  std::vector<int> group_of;     ///< rank -> group index (default: the node)
  std::vector<int> buddy_of;     ///< rank -> rank on another node that holds its checkpoints in host memory

  int size() const { return static_cast<int>(node_of.size()); }
  /// False in a job whose ranks all share one node and that has a persistent level: no rank has a buddy
  /// (buddy_of is -1), checkpoints are kept in files only.
  bool has_buddies() const;
  int nodes() const;
  int groups() const;
  std::vector<int> ranks_of_node(int node) const;
  std::vector<int> members_of_group(int group) const;
  /// Ranks whose checkpoints `rank` holds.
  std::vector<int> wards_of(int rank) const;
};

struct LayoutSpec {
  /// REPRISE_GROUPS: empty (a group per node) or one group id per rank, e.g. "0,0,1,1,2,2,3,3".
  std::string groups;
  /// REPRISE_BUDDIES: empty (same local index on the next node, ring over nodes) or one buddy rank per rank.
  std::string buddies;
  /// A persistent level exists (REPRISE_DIR): a job whose ranks all share one node then runs without buddies
  /// (files only) instead of being refused.
  bool files_only_allowed = false;
};

/// `node_key[r]` says which node rank r is on (equal keys = same node). Throws ConfigError with what to change
/// when the spec does not fit the job (wrong length, bad ids) or no buddy on another node exists (all ranks on one
/// node: allowed without buddies when spec.files_only_allowed).
Layout make_layout(const std::vector<long>& node_key, const LayoutSpec& spec);

/// Pairs {rank, its buddy} that run on one node now, by `node_key` (per rank; equal keys = same node), in rank order.
/// A layout is the job's for good, but the replacement of a failed rank may start on another node than the rank
/// it replaces (after a node failure no slot is left there): a failure of a node that holds a rank and its buddy
/// would lose both copies of that rank's checkpoints.
std::vector<std::pair<int, int>> buddies_sharing_a_node(const Layout& layout, const std::vector<long>& node_key);

/// Node keys emulating nodes of `ranks_per_node` consecutive ranks (REPRISE_RANKS_PER_NODE), for one machine.
std::vector<long> emulated_node_keys(int world_size, int ranks_per_node);

}  // namespace reprise::protocol
