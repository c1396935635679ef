// The job floor: the groups' reduction tree (FloorNode) and the tree that takes the floor to every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

#include "protocol/job_floor.hpp"

namespace reprise::protocol {
namespace {

// Every group's first rank, wired in-process: reports go up in any order (a message may overtake another), the
// root's floors are recorded.
struct Tree {
  struct Msg {
    int from, to;
    std::uint64_t seq;
    FloorSummary s;
  };
  explicit Tree(int groups) : nodes(static_cast<std::size_t>(groups)), received(nodes.size(), 0) {
    for (int g = 0; g < groups; ++g) nodes[static_cast<std::size_t>(g)].reset(g, groups);
  }
  void take(int g, const FloorNode::Out& o) {
    if (o.up) in_flight.push_back({g, nodes[static_cast<std::size_t>(g)].parent(), o.seq, *o.up});
    if (o.floor) {
      floors.push_back(*o.floor);
      marks.push_back(o.mark);
    }
  }
  void commit(int g, std::uint64_t v) { take(g, nodes[static_cast<std::size_t>(g)].own(v)); }
  void commit(int g, const FloorSummary& s) { take(g, nodes[static_cast<std::size_t>(g)].own(s)); }
  // Delivers one message in flight (the oldest, or a random one).
  void deliver(std::mt19937* rng = nullptr) {
    std::size_t i = rng ? std::uniform_int_distribution<std::size_t>(0, in_flight.size() - 1)(*rng) : 0;
    const Msg m = in_flight[i];
    in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
    ++received[static_cast<std::size_t>(m.to)];
    take(m.to, nodes[static_cast<std::size_t>(m.to)].report(m.from, m.seq, m.s));
  }
  void drain(std::mt19937* rng = nullptr) {
    while (!in_flight.empty()) deliver(rng);
  }
  std::vector<FloorNode> nodes;
  std::vector<std::size_t> received;
  std::deque<Msg> in_flight;
  std::vector<std::uint64_t> floors, marks;
};

// A group's report with files written in the background: its members' files through `files` (commit `committed`),
// the span of what they skipped, and their pins (+ 1).
FloorSummary with_files(std::uint64_t committed, std::uint64_t files, std::uint64_t skipped_oldest = UINT64_MAX,
                        std::uint64_t skipped_newest = 0, std::uint64_t pin_oldest = 0, std::uint64_t pin_newest = 0) {
  FloorSummary s{true, std::min(committed, files), -1, committed};
  s.skipped_oldest = skipped_oldest;
  s.skipped_newest = skipped_newest;
  s.pin_oldest = pin_oldest;
  s.pin_newest = pin_newest;
  return s;
}

TEST(FloorNode, TheTreeHasBoundedFanInAndLogDepth) {
  for (int groups : {1, 2, 8, 9, 10, 73, 1000, 25000}) {
    int depth = 0;
    for (int g = 1; g < groups; ++g) {
      const int p = floor_parent_group(g);
      ASSERT_GE(p, 0);
      ASSERT_LT(p, g);
      const auto siblings = floor_child_groups(p, groups);
      EXPECT_NE(std::find(siblings.begin(), siblings.end(), g), siblings.end()) << g << " of " << groups;
      int d = 0;
      for (int a = g; a > 0; a = floor_parent_group(a)) ++d;
      depth = std::max(depth, d);
    }
    for (int g = 0; g < groups; ++g)
      EXPECT_LE(floor_child_groups(g, groups).size(), static_cast<std::size_t>(kFloorFanIn));
    int log8 = 0;
    for (long span = 1; span < groups; span *= kFloorFanIn) ++log8;
    EXPECT_LE(depth, log8) << groups << " groups";
  }
  EXPECT_EQ(floor_parent_group(0), -1);
}

TEST(FloorNode, RisesOnlyWhenEveryGroupCommittedAndTheOldestMoved) {
  Tree t(3);  // groups 1 and 2 are group 0's children
  t.commit(0, 20);
  t.commit(2, 10);
  t.drain();
  EXPECT_TRUE(t.floors.empty());
  EXPECT_FALSE(t.nodes[0].summary().complete);
  EXPECT_EQ(t.nodes[0].summary().group, 1);  // the group that has committed nothing yet
  t.commit(1, 30);
  t.drain();
  EXPECT_EQ(t.floors, (std::vector<std::uint64_t>{10}));
  t.commit(0, 40);  // group 2 still at 10
  t.drain();
  EXPECT_EQ(t.floors.size(), 1u);
  t.commit(2, 50);
  t.drain();
  EXPECT_EQ(t.floors.back(), 30u);
  EXPECT_FALSE(t.nodes[2].own(50).up);  // reported again (the runtime does at every checkpoint): nothing new
  // A late report (an older sequence number) and one of a group that is not a child change nothing.
  EXPECT_FALSE(t.nodes[0].report(2, 1, FloorSummary{true, 5, 2}).floor);
  EXPECT_FALSE(t.nodes[0].report(7, 99, FloorSummary{true, 90, 7}).floor);
  EXPECT_EQ(t.nodes[0].summary().version, 30u);
  t.nodes[0].reset(0, 2);  // a repair: every group reports again
  EXPECT_FALSE(t.nodes[0].own(40).floor);
  EXPECT_EQ(t.nodes[0].report(1, 1, FloorSummary{true, 40, 1}).floor, 40u);
}

// Writers that lag skip versions (core's write-behind store): the floor never settles on a version inside the span
// some rank skipped; it rises to the pin once every rank wrote the same one and every group committed it, and the
// root then sends the next mark (its group's commit + 1), kept across a repair.
TEST(FloorNode, SkippedVersionsHoldTheFloorBackUntilEveryRankWroteThePin) {
  EXPECT_EQ(floor_candidate(with_files(30, 20)), 20u);
  EXPECT_EQ(floor_candidate(with_files(30, 20, 10, 15)), 20u);  // skipped below it only
  EXPECT_EQ(floor_candidate(with_files(30, 20, 25, 28)), 20u);  // above it only
  EXPECT_EQ(floor_candidate(with_files(30, 20, 15, 25)), std::nullopt);
  EXPECT_EQ(floor_candidate(with_files(30, 20, 15, 25, 19, 19)), 18u);           // every rank wrote 18
  EXPECT_EQ(floor_candidate(with_files(30, 20, 15, 25, 17, 19)), std::nullopt);  // pins differ
  EXPECT_EQ(floor_candidate(with_files(30, 20, 15, 25, 0, 19)), std::nullopt);   // some rank wrote none
  EXPECT_EQ(floor_candidate(with_files(17, 20, 15, 25, 19, 19)), std::nullopt);  // a group never committed 18

  Tree t(2);
  t.commit(0, with_files(30, 20));
  t.commit(1, with_files(30, 25, 15, 22));  // group 1 skipped 15..22: 20 may be missing there
  t.drain();
  EXPECT_TRUE(t.floors.empty());
  t.commit(1, with_files(40, 40, 15, 38, 36, 36));  // group 1 wrote the pin 35, group 0 not yet
  t.drain();
  EXPECT_TRUE(t.floors.empty());
  t.commit(0, with_files(40, 36, UINT64_MAX, 0, 36, 36));  // now both
  t.drain();
  EXPECT_EQ(t.floors, (std::vector<std::uint64_t>{35}));
  EXPECT_EQ(t.marks, (std::vector<std::uint64_t>{41}));  // group 0's commit + 1
  // Skips below the floor released, files everywhere through 50: the floor is 50 again, however the pins are.
  t.commit(1, with_files(50, 50, UINT64_MAX, 0, 0, 0));
  t.commit(0, with_files(50, 50, UINT64_MAX, 0, 42, 42));
  t.drain();
  EXPECT_EQ(t.floors.back(), 50u);
  EXPECT_EQ(t.marks.back(), 51u);
  t.nodes[0].reset(0, 2);  // a repair: the mark is never taken back
  t.commit(0, with_files(52, 52));
  t.commit(1, with_files(52, 52));
  t.drain();
  EXPECT_EQ(t.floors.back(), 52u);
  EXPECT_EQ(t.marks.back(), 53u);
}

// In any order of delivery, a floor never passes a group's newest commit, floors only rise, and once every report
// arrived the floor is the oldest group's commit. No first rank hears more than 2 * kFloorFanIn reports per
// checkpoint, whatever the number of groups.
TEST(FloorNode, AnyDeliveryOrderGivesTheOldestCommitWithBoundedReports) {
  std::mt19937 rng(7);
  for (int groups : {2, 9, 73, 700}) {
    Tree t(groups);
    std::vector<std::uint64_t> committed(static_cast<std::size_t>(groups), 0);
    const int rounds = 20;
    for (int round = 1; round <= rounds; ++round) {
      std::vector<int> order(static_cast<std::size_t>(groups));
      for (int g = 0; g < groups; ++g) order[static_cast<std::size_t>(g)] = g;
      std::shuffle(order.begin(), order.end(), rng);
      for (int g : order) {
        if (rng() % 5 == 0) continue;  // this group is slow this round
        committed[static_cast<std::size_t>(g)] += 1 + rng() % 3;
        t.commit(g, committed[static_cast<std::size_t>(g)]);
        for (int k = 0; k < 3 && !t.in_flight.empty(); ++k) t.deliver(&rng);
      }
      t.drain(&rng);
      const std::uint64_t oldest = *std::min_element(committed.begin(), committed.end());
      if (oldest > 0) {
        ASSERT_FALSE(t.floors.empty()) << groups << " groups, round " << round;
        EXPECT_EQ(t.floors.back(), oldest) << groups << " groups, round " << round;
      }
      EXPECT_TRUE(std::is_sorted(t.floors.begin(), t.floors.end()));
      EXPECT_EQ(std::adjacent_find(t.floors.begin(), t.floors.end()), t.floors.end());
    }
    EXPECT_LE(*std::max_element(t.received.begin(), t.received.end()),
              static_cast<std::size_t>(2 * kFloorFanIn * rounds))
        << groups << " groups";
  }
}

TEST(FloorNode, NamesTheGroupThatHoldsItBackOncePerFloor) {
  Tree t(3);
  for (int g = 0; g < 3; ++g) t.commit(g, 10);
  t.drain();
  EXPECT_EQ(t.floors, (std::vector<std::uint64_t>{10}));
  // Group 1 stops committing; the others go on: 4 commits of group 0 make it a lag.
  std::uint64_t v = 10;
  for (int i = 0; i < 3; ++i) {
    v += 10;
    t.commit(2, v);
    t.commit(0, v);
    t.drain();
    EXPECT_FALSE(t.nodes[0].lag());
  }
  v += 10;
  t.commit(2, v);
  t.commit(0, v);
  t.drain();
  const auto lag = t.nodes[0].lag();
  ASSERT_TRUE(lag);
  EXPECT_EQ(lag->group, 1);
  EXPECT_EQ(lag->committed, 10u);
  EXPECT_EQ(lag->rounds, 4u);
  t.commit(0, v + 10);
  t.drain();
  EXPECT_FALSE(t.nodes[0].lag());  // once per floor
  t.commit(1, v);                  // it commits again: the floor rises, and a new lag may be told
  t.drain();
  EXPECT_EQ(t.floors.back(), v);
  // ... once it is twice as long as the last one told (8 commits of group 0 since the floor rose, not 4).
  v += 10;  // (group 0 is there already)
  for (int i = 1; i <= 8; ++i) {
    v += 10;
    t.commit(2, v);
    t.commit(0, v);
    t.drain();
    if (i < 8) {
      EXPECT_FALSE(t.nodes[0].lag()) << i;
    }
  }
  const auto again = t.nodes[0].lag();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->rounds, 8u);
  // A group deep in the tree that never committed holds back the first floor, and is named.
  Tree d(20);  // group 19's parent is group 2
  for (int round = 1; round <= 4; ++round) {
    for (int g = 0; g < 19; ++g) d.commit(g, 10 * static_cast<std::uint64_t>(round));
    d.drain();
  }
  const auto never = d.nodes[0].lag();
  ASSERT_TRUE(never);
  EXPECT_EQ(never->group, 19);
  EXPECT_FALSE(never->committed);
  EXPECT_TRUE(d.floors.empty());
}

TEST(FloorNode, TheFloorReachesEveryRankOnceThroughATreeOfBoundedFanOut) {
  for (int n : {1, 2, 3, 7, 8, 9, 100, 1000, 100000}) {
    std::vector<int> parent(static_cast<std::size_t>(n), -1), depth(static_cast<std::size_t>(n), 0);
    int log8n = 0;
    for (long span = 1; span < n; span *= kFloorFanIn) ++log8n;
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
    EXPECT_LE(most_children, static_cast<std::size_t>(kFloorFanIn)) << n << " ranks";
    EXPECT_LE(*std::max_element(depth.begin(), depth.end()), log8n) << n << " ranks";
  }
}

// Groups of K consecutive ranks: the tree's first ranks computed directly (K * group) are those the pass over the
// map finds, for every rank.
TEST(GroupTreeRanks, ConsecutiveGroupsNeedNoPass) {
  for (std::size_t n : {1u, 7u, 20u, 100u, 1000u})
    for (int k : {1, 2, 3, 5}) {
      const GroupMap groups = GroupMap::blocks(n, k);
      for (int r = 0; r < static_cast<int>(n); ++r) {
        const GroupTreeRanks direct = group_tree_ranks(groups, r);
        const GroupTreeRanks scanned = group_tree_ranks(groups.ranks(), groups, r, groups.groups());
        ASSERT_EQ(direct.first, scanned.first) << n << " " << k << " " << r;
        ASSERT_EQ(direct.parent, scanned.parent) << n << " " << k << " " << r;
        ASSERT_EQ(direct.children, scanned.children) << n << " " << k << " " << r;
      }
    }
  const GroupTreeRanks t = group_tree_ranks(GroupMap::blocks(100000, 4), 4 * 3);
  EXPECT_TRUE(t.first);
  EXPECT_EQ(t.parent, 0);
  EXPECT_EQ(t.children, (std::vector<int>{4 * 25, 4 * 26, 4 * 27, 4 * 28, 4 * 29, 4 * 30, 4 * 31, 4 * 32}));
}

}  // namespace
}  // namespace reprise::protocol
