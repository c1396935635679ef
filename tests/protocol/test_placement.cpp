// Where a rank runs (hwloc) and the GPU a replacement takes.
#include <gtest/gtest.h>

#include "gpu/backend.hpp"
#include "protocol/placement.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
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
  const std::string v = replacing_env({3, 6}, make_regular_layout(8, 2, {}));
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
  if (gpu::cuda_device_count() == 0)
    EXPECT_EQ(p.gpu, -1);
  else
    EXPECT_GE(p.gpu, 0);
}

}  // namespace
}  // namespace reprise::protocol

TEST(AssignSpares, TheFreedPlaceOnTheFailedRanksNodeFirst) {
  using reprise::protocol::assign_spares;
  using reprise::protocol::kUnknownNode;
  // No spare on the failed ranks' nodes: the spares in their order.
  EXPECT_EQ(assign_spares({0, 1}, {4, 4, 5}), (std::vector<int>{0, 1}));
  // Spare 2 runs on node 1, where failed rank #1 ran: it takes that place; #0 gets the lowest other.
  EXPECT_EQ(assign_spares({0, 1}, {4, 5, 1}), (std::vector<int>{0, 2}));
  // Two failed ranks of one node, one spare there: the first of them gets it.
  EXPECT_EQ(assign_spares({3, 3}, {7, 3}), (std::vector<int>{1, 0}));
  // A node nobody knows (the whole node was lost) matches no spare.
  EXPECT_EQ(assign_spares({kUnknownNode}, {kUnknownNode, 2}), (std::vector<int>{0}));
  EXPECT_EQ(assign_spares({}, {1}), (std::vector<int>{}));
  EXPECT_THROW(assign_spares({1, 2}, {1}), reprise::ConfigError);
}
