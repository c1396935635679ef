#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/work_pool.hpp"

namespace reprise::core {
namespace {

TEST(WorkPool, RunsEveryItemOnceAcrossManyCalls) {
  WorkPool pool(3);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::atomic<int>> hits(round % 17 + 1);
    pool.parallel_for(hits.size(), [&](std::size_t i) { hits[i]++; });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(WorkPool, RethrowsTheFirstError) {
  WorkPool pool(2);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](std::size_t i) {
                                   if (i == 37) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  std::atomic<int> n{0};
  pool.parallel_for(10, [&](std::size_t) { n++; });  // still usable
  EXPECT_EQ(n.load(), 10);
}

}  // namespace
}  // namespace reprise::core
