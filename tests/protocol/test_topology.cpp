#include <gtest/gtest.h>

#include <algorithm>

#include "protocol/topology.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

std::vector<int> per_rank(const Layout& L, int (Layout::*of)(int) const) {
  std::vector<int> v;
  for (int r = 0; r < L.size(); ++r) v.push_back((L.*of)(r));
  return v;
}

std::string error_of(const std::vector<long>& keys, const LayoutSpec& spec) {
  try {
    make_layout(keys, spec);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Layout, EmulatedNodesOfTwoGiveRingBuddies) {
  const Layout L = make_layout(emulated_node_keys(8, 2), {});
  EXPECT_EQ(L.nodes(), 4);
  EXPECT_EQ(L.groups(), 4);
  EXPECT_EQ(per_rank(L, &Layout::node_of), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(per_rank(L, &Layout::local_index), (std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(per_rank(L, &Layout::group_of), per_rank(L, &Layout::node_of));
  EXPECT_EQ(per_rank(L, &Layout::buddy_of), (std::vector<int>{2, 3, 4, 5, 6, 7, 0, 1}));
  EXPECT_EQ(L.wards_of(0), (std::vector<int>{6}));
  EXPECT_EQ(L.members_of_group(2), (std::vector<int>{4, 5}));
  EXPECT_EQ(L.ranks_per_node(), 2);  // regular: kept as its rule
  EXPECT_EQ(L.table_bytes(), 0u);
}

// Nodes of K consecutive ranks are a rule at any size (the last node may have fewer ranks): the same ranks, groups,
// buddies and wards as the tables the rule replaces, and no table of N.
TEST(Layout, RegularNodesAreARuleThatMatchesTheTables) {
  for (int n : {2, 3, 7, 8, 9, 10, 11}) {
    for (int k : {1, 2, 3, 4}) {
      if ((n + k - 1) / k < 2) continue;
      const Layout rule = make_regular_layout(n, k, {});
      std::vector<int> node_of;  // the same nodes as a table: the default buddies computed rank by rank
      for (int r = 0; r < n; ++r) node_of.push_back(r / k);
      const Layout table = Layout::table(node_of, GroupMap(node_of), {});
      ASSERT_EQ(table.ranks_per_node(), 0);
      ASSERT_TRUE(rule == table) << n << " ranks, nodes of " << k;
      ASSERT_TRUE(rule == make_layout(emulated_node_keys(n, k), {})) << n << " ranks, nodes of " << k;
      EXPECT_EQ(rule.table_bytes(), 0u);
      EXPECT_EQ(rule.nodes(), (n + k - 1) / k);
      for (int r = 0; r < n; ++r) {
        const int b = rule.buddy_of(r);
        EXPECT_NE(rule.node_of(b), rule.node_of(r)) << n << " " << k << " rank " << r;
        const auto wards = rule.wards_of(b);
        EXPECT_NE(std::find(wards.begin(), wards.end(), r), wards.end()) << n << " " << k << " rank " << r;
      }
      int wards = 0;
      for (int r = 0; r < n; ++r) wards += static_cast<int>(rule.wards_of(r).size());
      EXPECT_EQ(wards, n);
    }
  }
  const Layout big = make_regular_layout(100000, 4, {});
  EXPECT_EQ(big.buddy_of(99999), 3);
  EXPECT_EQ(big.wards_of(3), (std::vector<int>{99999}));
  EXPECT_EQ(big.members_of_group(10), (std::vector<int>{40, 41, 42, 43}));
  EXPECT_EQ(big.table_bytes(), 0u);
}

TEST(Layout, NodesAreNumberedByTheirLowestRankWhateverTheKeys) {
  const Layout L = make_layout({900, 17, 900, 17, 5}, {});
  EXPECT_EQ(per_rank(L, &Layout::node_of), (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(per_rank(L, &Layout::local_index), (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(L.ranks_of_node(1), (std::vector<int>{1, 3}));
  EXPECT_EQ(L.ranks_per_node(), 0);  // not consecutive blocks: a table
  // node 2 has one rank: both ranks of node 1 send to it; its rank 4 goes to node 0, local index 0
  EXPECT_EQ(per_rank(L, &Layout::buddy_of), (std::vector<int>{1, 4, 3, 4, 0}));
  EXPECT_EQ(L.wards_of(4), (std::vector<int>{1, 3}));
  for (int r = 0; r < L.size(); ++r) EXPECT_NE(L.node_of(L.buddy_of(r)), L.node_of(r));
}

TEST(Layout, ExplicitGroupsAreRenumbered) {
  LayoutSpec spec;
  spec.groups = "7,7,3,3,7,7,3,3";
  const Layout L = make_layout(emulated_node_keys(8, 2), spec);
  EXPECT_EQ(per_rank(L, &Layout::group_of), (std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(L.groups(), 2);
  EXPECT_EQ(L.members_of_group(1), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(L.ranks_per_node(), 2);  // the nodes stay a rule; the list is a table
  EXPECT_EQ(L.table_bytes(), 8 * sizeof(int));
}

TEST(Layout, BadSpecsSayWhatToChange) {
  LayoutSpec spec;
  spec.groups = "0,0,1";
  EXPECT_NE(error_of(emulated_node_keys(4, 2), spec).find("has 3 entries but the job has 4 ranks"), std::string::npos);
  spec.groups = "0,x,1,1";
  EXPECT_NE(error_of(emulated_node_keys(4, 2), spec).find("'x'"), std::string::npos);
  EXPECT_NE(error_of(emulated_node_keys(4, 4), {}).find("REPRISE_RANKS_PER_NODE"), std::string::npos)
      << "one node: no buddy elsewhere";
  LayoutSpec buddies;
  buddies.buddies = "1,0,3,2";  // partners on the same node
  EXPECT_NE(error_of(emulated_node_keys(4, 2), buddies).find("same node"), std::string::npos);
  buddies.buddies = "2,3,0,9";
  EXPECT_NE(error_of(emulated_node_keys(4, 2), buddies).find("'9'"), std::string::npos);
  buddies.buddies = "3,2,1,0";
  const Layout listed = make_layout(emulated_node_keys(4, 2), buddies);
  EXPECT_EQ(per_rank(listed, &Layout::buddy_of), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_FALSE(listed.rule_buddies());
  EXPECT_EQ(listed.wards_of(1), (std::vector<int>{2}));
  EXPECT_THROW(emulated_node_keys(4, 0), ConfigError);
}

// All ranks on one node: refused without a persistent level (saying how to get one), without buddies with one.
TEST(Layout, OneNodeRunsWithFilesOnlyWhenAllowed) {
  const std::string refused = error_of(emulated_node_keys(4, 4), {});
  EXPECT_NE(refused.find("REPRISE_DIR"), std::string::npos) << refused;
  LayoutSpec spec;
  spec.files_only_allowed = true;
  for (int n : {1, 4}) {
    const Layout L = make_layout(emulated_node_keys(n, 4), spec);
    EXPECT_EQ(per_rank(L, &Layout::buddy_of), std::vector<int>(static_cast<std::size_t>(n), -1));
    EXPECT_FALSE(L.has_buddies());
    EXPECT_EQ(L.groups(), 1);
    EXPECT_TRUE(L.wards_of(0).empty());
  }
  // Two nodes or more: buddies as always, whatever the spec allows.
  EXPECT_TRUE(make_layout(emulated_node_keys(4, 2), spec).has_buddies());
  spec.buddies = "1,0,3,2";  // explicit buddies on the one node: still refused
  EXPECT_NE(error_of(emulated_node_keys(4, 4), spec).find("same node"), std::string::npos);
}

}  // namespace
}  // namespace reprise::protocol
