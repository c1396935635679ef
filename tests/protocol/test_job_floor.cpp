// The job floor: rank 0's table of each group's newest commit.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "protocol/job_floor.hpp"

namespace reprise::protocol {
namespace {

TEST(JobFloor, RisesOnlyWhenEveryGroupReportedAndTheOldestMoved) {
  JobFloor f(3);
  EXPECT_FALSE(f.report(0, 20));
  EXPECT_FALSE(f.report(2, 10));
  EXPECT_EQ(f.report(1, 30), 10u);  // every group reported: the oldest commit
  EXPECT_FALSE(f.report(0, 40));    // group 2 still at 10
  EXPECT_FALSE(f.report(2, 5));     // late and older: ignored
  EXPECT_EQ(f.report(2, 50), 30u);
  EXPECT_FALSE(f.report(7, 90));  // not a group of this layout
  EXPECT_FALSE(f.report(-1, 90));
  f.reset(2);  // a repair: every group reports again
  EXPECT_FALSE(f.report(0, 40));
  EXPECT_EQ(f.report(1, 40), 40u);
}

TEST(JobFloor, NamesTheGroupThatHoldsItBackOncePerFloor) {
  JobFloor f(3);
  f.report(0, 10);
  f.report(1, 10);
  EXPECT_EQ(f.report(2, 10), 10u);
  // Group 1 stops committing; the others go on: 4 rounds of the 2 others (8 reports) make it a lag.
  std::uint64_t v = 10;
  for (int i = 0; i < 3; ++i) {
    v += 10;
    EXPECT_FALSE(f.report(0, v));
    EXPECT_FALSE(f.report(2, v));
    EXPECT_FALSE(f.lag());
  }
  v += 10;
  f.report(0, v);
  f.report(2, v);
  const auto lag = f.lag();
  ASSERT_TRUE(lag);
  EXPECT_EQ(lag->group, 1);
  EXPECT_EQ(lag->committed, 10u);
  EXPECT_EQ(lag->others, 8u);
  f.report(0, v + 10);
  EXPECT_FALSE(f.lag());         // once per floor
  EXPECT_EQ(f.report(1, v), v);  // it commits again: the floor rises, and a new lag may be told
  // A group that never reported holds back the first floor.
  JobFloor g(2);
  for (std::uint64_t w = 10; w <= 40; w += 10) g.report(0, w);
  const auto never = g.lag();
  ASSERT_TRUE(never);
  EXPECT_EQ(never->group, 1);
  EXPECT_FALSE(never->committed);
}

TEST(JobFloor, TheFloorReachesEveryRankOnceThroughATreeOfLogDepth) {
  for (int n : {1, 2, 3, 7, 8, 9, 100, 1000, 100000}) {
    std::vector<int> parent(static_cast<std::size_t>(n), -1), depth(static_cast<std::size_t>(n), 0);
    int log2n = 0;
    while ((1 << log2n) < n) ++log2n;
    std::size_t most_children = 0;
    for (int r = 0; r < n; ++r) {  // a child's number is above its parent's: depths are known in rank order
      const auto children = floor_children(r, n);
      most_children = std::max(most_children, children.size());
      for (int c : children) {
        ASSERT_GT(c, r);
        ASSERT_LT(c, n);
        ASSERT_EQ(parent[static_cast<std::size_t>(c)], -1) << "rank " << c << " of " << n << " has two parents";
        parent[static_cast<std::size_t>(c)] = r;
        depth[static_cast<std::size_t>(c)] = depth[static_cast<std::size_t>(r)] + 1;
      }
    }
    for (int r = 1; r < n; ++r) EXPECT_NE(parent[static_cast<std::size_t>(r)], -1) << "rank " << r << " of " << n;
    EXPECT_LE(most_children, static_cast<std::size_t>(log2n)) << n << " ranks";
    EXPECT_LE(*std::max_element(depth.begin(), depth.end()), log2n) << n << " ranks";
  }
}

}  // namespace
}  // namespace reprise::protocol
