#include <gtest/gtest.h>

#include "coord/failure_injection.hpp"
#include "coord/topology.hpp"
#include "reprise/errors.hpp"

namespace reprise::coord {
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

TEST(FailureInjection, ParsesEntriesAndPoints) {
  const auto k = parse_kill_spec("3:40,5:100:drain,0:7:recovery");
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[0].rank, 3);
  EXPECT_EQ(k[0].step, 40u);
  EXPECT_EQ(k[0].point, KillPoint::Compute);
  EXPECT_EQ(k[1].point, KillPoint::Drain);
  EXPECT_EQ(k[2].point, KillPoint::Recovery);
  EXPECT_TRUE(kill_due(k, 5, 100, KillPoint::Drain));
  EXPECT_FALSE(kill_due(k, 5, 100, KillPoint::Compute));
  EXPECT_FALSE(kill_due(k, 3, 41, KillPoint::Compute));
  // A recovery order fires in the first recovery at or after its step, whatever step the failure hit.
  EXPECT_FALSE(kill_due(k, 0, 6, KillPoint::Recovery));
  EXPECT_TRUE(kill_due(k, 0, 7, KillPoint::Recovery));
  EXPECT_TRUE(kill_due(k, 0, 25, KillPoint::Recovery));
  EXPECT_TRUE(parse_kill_spec("").empty());
  // The points inside a recovery (its data phase, the restart exchange) behave the same way.
  const auto r = parse_kill_spec("2:12:transfer,4:30:exchange");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].point, KillPoint::Transfer);
  EXPECT_EQ(r[1].point, KillPoint::Exchange);
  EXPECT_TRUE(kill_due(r, 2, 25, KillPoint::Transfer));
  EXPECT_FALSE(kill_due(r, 2, 25, KillPoint::Exchange));
  EXPECT_FALSE(kill_due(r, 4, 29, KillPoint::Exchange));
  EXPECT_TRUE(kill_due(r, 4, 31, KillPoint::Exchange));
  EXPECT_STREQ(to_string(KillPoint::Transfer), "transfer");
  EXPECT_STREQ(to_string(KillPoint::Exchange), "exchange");
  const auto stall = parse_kill_spec("2:25:stall");
  ASSERT_EQ(stall.size(), 1u);
  EXPECT_EQ(stall[0].point, KillPoint::Stall);
  EXPECT_TRUE(kill_due(stall, 2, 26, KillPoint::Stall));
  EXPECT_FALSE(kill_due(stall, 2, 24, KillPoint::Stall));
  EXPECT_STREQ(to_string(KillPoint::Stall), "stall");
  const auto join = parse_kill_spec("1:0:join");  // every replacement of rank 1 dies as it joins
  ASSERT_EQ(join.size(), 1u);
  EXPECT_EQ(join[0].point, KillPoint::Join);
  EXPECT_TRUE(kill_due(join, 1, 25, KillPoint::Join));
  EXPECT_TRUE(kill_due(join, 1, 40, KillPoint::Join));
  EXPECT_FALSE(kill_due(join, 2, 25, KillPoint::Join));
  EXPECT_STREQ(to_string(KillPoint::Join), "join");
}

TEST(FailureInjection, RejectsMalformedEntries) {
  for (const char* bad : {"3", "x:4", "3:-1", "3:4:explode", "3:4:drain:extra", "-1:5"})
    EXPECT_THROW(parse_kill_spec(bad), ConfigError) << bad;
}

}  // namespace
}  // namespace reprise::coord

#include "coord/placement.hpp"
#include "gpu/backend.hpp"

namespace reprise::coord {
namespace {

TEST(Placement, PrefersGpusOnTheRanksNumaNode) {
  const std::vector<int> gpus = {0, 0, 1, 1};  // NUMA node of each CUDA device
  EXPECT_EQ(choose_gpu(gpus, 1, 0), 2);
  EXPECT_EQ(choose_gpu(gpus, 1, 1), 3);
  EXPECT_EQ(choose_gpu(gpus, 1, 2), 2);  // more ranks than near GPUs: they share
  EXPECT_EQ(choose_gpu(gpus, 0, 1), 1);
  EXPECT_EQ(choose_gpu(gpus, 5, 3), 3) << "no GPU on that node: all of them, round robin";
  EXPECT_EQ(choose_gpu(gpus, -1, 6), 2) << "unknown NUMA node: all of them";
  EXPECT_EQ(choose_gpu({}, 0, 0), -1);
  EXPECT_EQ(choose_gpu({-1, -1}, 0, 3), 1);
}

TEST(Placement, ReplacementsLearnTheLocalIndexOfTheRankTheyReplace) {
  // 8 ranks on 4 nodes of 2: local indices 0,1,0,1,...; ranks 3 and 6 failed, replaced in that order.
  const std::vector<int> local = {0, 1, 0, 1, 0, 1, 0, 1};
  const std::string v = replacing_env({3, 6}, local);
  EXPECT_EQ(v, "3:1,6:0");
  EXPECT_EQ(parse_replacing(v, 0).rank, 3);
  EXPECT_EQ(parse_replacing(v, 0).local_index, 1);
  EXPECT_EQ(parse_replacing(v, 1).rank, 6);
  EXPECT_EQ(parse_replacing(v, 1).local_index, 0);
  EXPECT_EQ(parse_replacing("5:3", 0).local_index, 3);
}

TEST(Placement, AMalformedReplacingValueSaysWhat) {
  for (const std::string bad : {"", "3", "3:", "a:1", "3:1,", "3;1", "3:1x", "-1:0", "3:-2"}) {
    try {
      parse_replacing(bad, 0);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("REPRISE_REPLACING='" + bad + "'"), std::string::npos) << e.what();
    }
  }
  try {
    parse_replacing("3:1,6:0", 2);
    ADD_FAILURE() << "no third entry";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no entry for replacement 2 (2 entries)"), std::string::npos) << e.what();
  }
}

TEST(Placement, LocatesThisProcess) {
  const Placement p = locate(0, gpu::cuda_pci_bus_ids());
  EXPECT_GE(p.numa_node, 0) << "hwloc finds at least one NUMA node";
  EXPECT_FALSE(p.cpuset.empty());
  if (gpu::cuda_device_count() == 0) EXPECT_EQ(p.gpu, -1);
  else EXPECT_GE(p.gpu, 0);
}

}  // namespace
}  // namespace reprise::coord
