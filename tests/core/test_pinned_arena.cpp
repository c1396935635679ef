#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/pinned_arena.hpp"

namespace reprise::core {
namespace {

TEST(PinnedArena, CarvesReleasesAndCoalesces) {
  auto backend = gpu::make_host_twin_backend();
  auto arena = PinnedArena::create(*backend);
  EXPECT_FALSE(arena->allocate(10).has_value()) << "no slab yet";
  arena->grow(64 * 1024);
  EXPECT_EQ(arena->capacity(), 64u * 1024);
  auto a = arena->allocate(10000);  // rounded to 12 KiB
  auto b = arena->allocate(20000);  // 20 KiB
  auto c = arena->allocate(30000);  // 32 KiB: the slab is now full
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(a->pinned());
  EXPECT_EQ(a->size(), 10000u);
  EXPECT_EQ(arena->free_bytes(), 0u);
  EXPECT_FALSE(arena->allocate(1).has_value()) << "full: the caller falls back to pageable memory";
  std::memset(b->data(), 7, b->size());
  {
    HostBytes drop = std::move(*b);  // released at scope exit
  }
  EXPECT_EQ(arena->free_bytes(), 20u * 1024);
  { HostBytes drop = std::move(*a); }
  EXPECT_EQ(arena->free_bytes(), 32u * 1024);
  auto d = arena->allocate(32 * 1024);  // fits only because the two holes coalesced
  EXPECT_TRUE(d.has_value());
  { HostBytes drop = std::move(*c); }
  { HostBytes drop = std::move(*d); }
  EXPECT_EQ(arena->free_bytes(), 64u * 1024);
  EXPECT_TRUE(arena->allocate(64 * 1024).has_value());
}

TEST(PinnedArena, OutlivesTheHandleWhileBuffersExist) {
  auto backend = gpu::make_host_twin_backend();
  std::unique_ptr<HostBytes> kept;
  {
    auto arena = PinnedArena::create(*backend);
    arena->grow(8192);
    auto b = arena->allocate(100);
    ASSERT_TRUE(b.has_value());
    kept = std::make_unique<HostBytes>(std::move(*b));
  }
  std::memset(kept->data(), 1, 100);  // still valid memory
  kept.reset();
}

}  // namespace
}  // namespace reprise::core
