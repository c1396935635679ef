// Where ranks are, which ranks checkpoint together (groups) and who holds whose checkpoint (buddies).
// Pure logic over "node keys" gathered from MPI (src/mpi/layout), so every rule is unit-tested without MPI.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "protocol/group_map.hpp"

namespace reprise::protocol {

/// The job's layout, kept as a rule where it is regular and as tables only where it is not (docs/SCALING.md):
/// nodes of K consecutive ranks (the last one may have fewer) are K alone, groups a GroupMap, the default buddies
/// (same local index on the next node) a rule over the nodes. Tables remain for nodes of other shapes and for
/// explicit REPRISE_GROUPS / REPRISE_BUDDIES lists, which are one entry per rank by nature. Copies share them.
class Layout {
 public:
  Layout() = default;
  /// Nodes of `per_node` consecutive ranks, groups `groups`, buddies by the default rule (`buddies`) or none
  /// (files only).
  static Layout regular(int ranks, int per_node, GroupMap groups, bool buddies);
  /// Any other shape: per rank its node (numbered in order of their lowest rank) and its index there, its
  /// buddy (-1: none; empty: the default rule).
  static Layout table(std::vector<int> node_of, GroupMap groups, std::vector<int> buddy_of);
  /// The same layout with an explicit buddy per rank (REPRISE_BUDDIES).
  Layout with_buddies(std::vector<int> buddy_of) const;

  int size() const { return ranks_; }
  int node_of(int rank) const;
  int local_index(int rank) const;
  int group_of(int rank) const { return groups_(rank); }
  int buddy_of(int rank) const;
  const GroupMap& group_map() const { return groups_; }
  /// K for nodes of K consecutive ranks; 0 when the nodes are a table.
  int ranks_per_node() const { return per_node_; }
  /// The buddies follow the default rule (no table).
  bool rule_buddies() const { return buddies_ == Buddies::Rule; }
  /// Bytes of the tables this layout holds (0 for a regular layout with its default groups and buddies).
  std::size_t table_bytes() const;

  /// False in a job whose ranks all share one node and that has a persistent level: no rank has a buddy
  /// (buddy_of is -1), checkpoints are kept in files only.
  bool has_buddies() const { return buddies_ != Buddies::None; }
  int nodes() const { return nodes_; }
  int groups() const { return groups_.groups(); }
  std::vector<int> ranks_of_node(int node) const;
  std::vector<int> members_of_group(int group) const { return groups_.members_of_group(group); }
  /// Ranks whose checkpoints `rank` holds.
  std::vector<int> wards_of(int rank) const;
  /// Rank by rank, the same nodes, local indices, groups and buddies.
  bool operator==(const Layout& o) const;

 private:
  enum class Buddies { None, Rule, Table };
  int ranks_ = 0;
  int per_node_ = 0;  ///< > 0: nodes of per_node_ consecutive ranks
  int nodes_ = 0;
  std::shared_ptr<const std::vector<int>> node_of_, local_index_;  ///< nodes of any other shape
  GroupMap groups_;
  Buddies buddies_ = Buddies::None;
  std::shared_ptr<const std::vector<int>> buddy_of_;  ///< Buddies::Table
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
/// node: allowed without buddies when spec.files_only_allowed). Nodes of K consecutive ranks give a regular layout.
Layout make_layout(const std::vector<long>& node_key, const LayoutSpec& spec);
/// The layout of `ranks` ranks on nodes of `per_node` consecutive ranks (the last one may have fewer), without a
/// table of N unless the spec lists groups or buddies: what a job whose nodes are regular builds at any size.
Layout make_regular_layout(int ranks, int per_node, const LayoutSpec& spec);

/// Node keys emulating nodes of `ranks_per_node` consecutive ranks (REPRISE_RANKS_PER_NODE), for one machine.
std::vector<long> emulated_node_keys(int world_size, int ranks_per_node);

/// The comma-separated ids of `text`, the value of setting `variable` (REPRISE_GROUPS, REPRISE_BUDDIES, the test
/// knobs that list ranks): each a number >= 0, at most `max_value` when that is >= 0. Throws ConfigError naming the
/// setting and the entry.
std::vector<int> parse_id_list(const std::string& text, const char* variable, int max_value = -1);

}  // namespace reprise::protocol
