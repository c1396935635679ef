// Groups from the communication pattern on known patterns (METIS's recursive bisection over whole nodes).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "protocol/grouping.hpp"
#include "reprise/errors.hpp"
#include "support/test_support.hpp"

namespace reprise::protocol {
namespace {

// A non-periodic 2D 5-point stencil on a px x py grid of ranks (row-major), `bytes` per halo each way.
CommMatrix stencil2d(int px, int py, std::uint64_t bytes) {
  CommMatrix m;
  m.ranks = px * py;
  for (int x = 0; x < px; ++x)
    for (int y = 0; y < py; ++y) {
      const int r = x * py + y;
      if (x > 0) m.entries.push_back({r, r - py, bytes});
      if (x + 1 < px) m.entries.push_back({r, r + py, bytes});
      if (y > 0) m.entries.push_back({r, r - 1, bytes});
      if (y + 1 < py) m.entries.push_back({r, r + 1, bytes});
    }
  return m;
}

// 16 x 16 ranks, 4 per node (a node: 4 consecutive ranks of a row), groups of at most 16 ranks: the least logged
// share is 4 x 4 blocks of ranks (4 nodes one above the other), L = 192 / 960 = 0.2; R = 16 / 256.
TEST(Grouping, Stencil16x16In4x4Blocks) {
  const CommMatrix m = stencil2d(16, 16, 8192);
  const auto levels = bisection_levels(m, 4);
  ASSERT_EQ(levels.size(), 7u);  // 1, 2, 4, 8, 16, 32, 64 groups
  EXPECT_EQ(levels.front().groups, 1);
  EXPECT_DOUBLE_EQ(levels.front().logged_share, 0.0);
  EXPECT_DOUBLE_EQ(levels.front().rolled_back_share, 1.0);
  EXPECT_EQ(levels.back().groups, 64);  // one per node
  const Grouping& g = choose(levels, 16, 0.5);
  EXPECT_EQ(g.groups, 16);
  EXPECT_EQ(g.max_group_ranks, 16);
  EXPECT_NEAR(g.logged_share, 0.2, 1e-12);
  EXPECT_NEAR(g.rolled_back_share, 16.0 / 256.0, 1e-12);
  for (int bx = 0; bx < 4; ++bx)
    for (int by = 0; by < 4; ++by) {
      std::set<int> ids;
      for (int x = 0; x < 4; ++x)
        for (int y = 0; y < 4; ++y)
          ids.insert(
              g.group_of.at(static_cast<std::size_t>(((bx * 4) + x) * 16) + static_cast<std::size_t>((by * 4) + y)));
      EXPECT_EQ(ids.size(), 1u) << "block " << bx << "," << by << " is split";
    }
  // The logged share only grows as groups get smaller; the rolled-back share only shrinks.
  for (std::size_t i = 1; i < levels.size(); ++i) {
    EXPECT_GE(levels[i].logged_share, levels[i - 1].logged_share);
    EXPECT_LE(levels[i].rolled_back_share, levels[i - 1].rolled_back_share);
  }
}

TEST(Grouping, EvaluateCountsBytesBetweenGroupsAndNodeFailures) {
  CommMatrix m;
  m.ranks = 4;
  m.entries = {{0, 1, 30}, {1, 2, 10}, {2, 3, 60}};
  const Grouping g = evaluate(m, {0, 0, 1, 1}, 1);
  EXPECT_DOUBLE_EQ(g.logged_share, 0.1);
  EXPECT_DOUBLE_EQ(g.rolled_back_share, 0.5);
  EXPECT_EQ(groups_value(g.group_of), "0,0,1,1");
  // Nodes of 3 ranks (the last one smaller): node 0's failure rolls back group 0 (3 ranks), node 1's group 1.
  const Grouping h = evaluate(m, {0, 0, 0, 1}, 3);
  EXPECT_DOUBLE_EQ(h.rolled_back_share, (3.0 + 1.0) / 2 / 4);
}

TEST(Grouping, AlphaTradesLoggedAgainstRolledBack) {
  const auto levels = bisection_levels(stencil2d(8, 8, 100), 2);
  EXPECT_EQ(choose(levels, std::nullopt, 1.0).groups, 1);   // only logging counts: one group
  EXPECT_EQ(choose(levels, std::nullopt, 0.0).groups, 32);  // only rollback counts: a group per node
  EXPECT_THROW(choose(levels, 1, 0.5), ConfigError);        // a node has 2 ranks: never split
  EXPECT_THROW(choose(levels, std::nullopt, 1.5), ConfigError);
}

TEST(Grouping, ReadsRowFilesAndNamesBadLines) {
  test::ScratchDir dir;
  for (int r = 0; r < 2; ++r) {
    std::ofstream out(dir.path() + "/row-" + std::to_string(r) + ".matrix");
    write_matrix_header(out, 2);
    out << r << " " << 1 - r << " " << 100 * (r + 1) << "\n";
  }
  const CommMatrix m = read_matrix_path(dir.path());
  EXPECT_EQ(m.ranks, 2);
  ASSERT_EQ(m.entries.size(), 2u);
  EXPECT_EQ(m.entries[1].bytes, 200u);
  auto error_of = [](const std::string& text) {
    std::istringstream in(text);
    CommMatrix x;
    try {
      read_matrix(in, "m.txt", x);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("hello\n").find("m.txt:1: not a communication matrix"), std::string::npos);
  EXPECT_NE(error_of("reprise comm matrix\nranks 2\n0 5 10\n").find("m.txt:3: ranks must be in 0..1"),
            std::string::npos);
  EXPECT_NE(error_of("reprise comm matrix\nranks 2\n0 1\n").find("m.txt:3: expected"), std::string::npos);
  EXPECT_THROW(read_matrix_path(dir.path() + "/none"), ConfigError);
}

}  // namespace
}  // namespace reprise::protocol
