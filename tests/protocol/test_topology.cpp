#include <gtest/gtest.h>

#include "protocol/topology.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

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
  EXPECT_EQ(L.node_of, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(L.local_index, (std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(L.group_of, L.node_of);
  EXPECT_EQ(L.buddy_of, (std::vector<int>{2, 3, 4, 5, 6, 7, 0, 1}));
  EXPECT_EQ(L.wards_of(0), (std::vector<int>{6}));
  EXPECT_EQ(L.members_of_group(2), (std::vector<int>{4, 5}));
}

TEST(Layout, NodesAreNumberedByTheirLowestRankWhateverTheKeys) {
  const Layout L = make_layout({900, 17, 900, 17, 5}, {});
  EXPECT_EQ(L.node_of, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(L.ranks_of_node(1), (std::vector<int>{1, 3}));
  // node 2 has one rank: both ranks of node 1 send to it; its rank 4 goes to node 0, local index 0
  EXPECT_EQ(L.buddy_of, (std::vector<int>{1, 4, 3, 4, 0}));
  for (int r = 0; r < L.size(); ++r) EXPECT_NE(L.node_of[L.buddy_of[r]], L.node_of[r]);
}

TEST(Layout, ExplicitGroupsAreRenumbered) {
  LayoutSpec spec;
  spec.groups = "7,7,3,3,7,7,3,3";
  const Layout L = make_layout(emulated_node_keys(8, 2), spec);
  EXPECT_EQ(L.group_of, (std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(L.groups(), 2);
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
  EXPECT_EQ(make_layout(emulated_node_keys(4, 2), buddies).buddy_of, (std::vector<int>{3, 2, 1, 0}));
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
    EXPECT_EQ(L.buddy_of, std::vector<int>(static_cast<std::size_t>(n), -1));
    EXPECT_FALSE(L.has_buddies());
    EXPECT_EQ(L.groups(), 1);
    EXPECT_TRUE(buddies_sharing_a_node(L, emulated_node_keys(n, 4)).empty());
  }
  // Two nodes or more: buddies as always, whatever the spec allows.
  EXPECT_TRUE(make_layout(emulated_node_keys(4, 2), spec).has_buddies());
  spec.buddies = "1,0,3,2";  // explicit buddies on the one node: still refused
  EXPECT_NE(error_of(emulated_node_keys(4, 4), spec).find("same node"), std::string::npos);
}

TEST(Layout, BuddiesSharingANodeAfterAReplacementStartedElsewhere) {
  const Layout L = make_layout(emulated_node_keys(8, 2), {});  // buddies 2 3 4 5 6 7 0 1
  std::vector<long> now = emulated_node_keys(8, 2);
  EXPECT_TRUE(buddies_sharing_a_node(L, now).empty());
  now[2] = 2;  // rank 2's replacement started on node 2, where its buddy rank 4 runs
  EXPECT_EQ(buddies_sharing_a_node(L, now), (std::vector<std::pair<int, int>>{{2, 4}}));
  now[2] = 0;  // on node 0, where its ward rank 0 runs: rank 0 and its buddy share a node
  EXPECT_EQ(buddies_sharing_a_node(L, now), (std::vector<std::pair<int, int>>{{0, 2}}));
  now[2] = 9;  // a spare node
  EXPECT_TRUE(buddies_sharing_a_node(L, now).empty());
  EXPECT_THROW(buddies_sharing_a_node(L, {0, 0, 1}), Error);
}

}  // namespace
}  // namespace reprise::protocol
