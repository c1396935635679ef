#include <gtest/gtest.h>

#include <cstring>

#include "core/bytes.hpp"
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

namespace reprise::core {
namespace {

TEST(BufferPool, PreparedBufferIsReusedAndBounded) {
  BufferPool pool(2);
  pool.prepare(1000);
  EXPECT_GE(pool.held_bytes(), 1000u);
  const std::byte* warm = nullptr;
  {
    HostBytes b = pool.take(1000);
    warm = b.data();
    EXPECT_EQ(b.size(), 1000u);
    EXPECT_EQ(pool.held_bytes(), 0u);
    pool.give(std::move(b));
  }
  pool.prepare(900);  // the returned buffer already fits: nothing new
  EXPECT_EQ(pool.take(900).data(), warm);
  pool.prepare(10u << 20);
  pool.prepare(1u << 10);  // a 10 MiB buffer is too big to serve 1 KiB: a small one is added
  pool.prepare(30u << 20);  // bounded: the oldest goes
  EXPECT_LE(pool.held_bytes(), (30u << 20) + (30u << 20) / 4 + (10u << 20) + (10u << 20) / 4);
}

// The first version's buffer, reserved when regions are protected: one reservation at a time (regions protected
// one by one must not leave a buffer per region behind), taken by the first take() it fits.
TEST(BufferPool, OneReservationAtATimeServesTheFirstTake) {
  BufferPool pool(4);
  pool.reserve(1000);
  const std::size_t first = pool.held_bytes();
  EXPECT_GE(first, 1000u);
  pool.reserve(1100);  // fits the first (a quarter of headroom): nothing new
  EXPECT_EQ(pool.held_bytes(), first);
  pool.reserve(1u << 20);  // replaces it
  EXPECT_EQ(pool.held_bytes(), (1u << 20) + (1u << 18));
  bool reused = false;
  HostBytes b = pool.take(1u << 20, &reused);
  EXPECT_TRUE(reused);
  EXPECT_EQ(b.size(), 1u << 20);
  EXPECT_EQ(pool.held_bytes(), 0u);
  HostBytes c = pool.take(100, &reused);
  EXPECT_FALSE(reused) << "nothing kept: newly allocated";
  pool.give(std::move(b));
  pool.reserve(1u << 20);  // a returned buffer fits: no reservation
  EXPECT_EQ(pool.held_bytes(), (1u << 20) + (1u << 18));
}

// A shared buffer from take_pooled goes back to the pool when its last holder drops it, and is simply freed when
// the pool is gone first.
TEST(BufferPool, PooledBufferReturnsWhenTheLastHolderDropsIt) {
  auto pool = std::make_shared<BufferPool>(4);
  bool reused = true;
  std::shared_ptr<HostBytes> a = take_pooled(pool, 4096, &reused);
  EXPECT_FALSE(reused);
  const std::byte* where = a->data();
  std::shared_ptr<const HostBytes> holder = a;  // e.g. a store keeping the version
  a.reset();
  EXPECT_EQ(pool->held_bytes(), 0u) << "still held";
  holder.reset();
  EXPECT_EQ(pool->held_bytes(), 4096u);
  std::shared_ptr<HostBytes> b = take_pooled(pool, 4000, &reused);
  EXPECT_TRUE(reused);
  EXPECT_EQ(b->data(), where);
  EXPECT_EQ(b->size(), 4000u);
  pool.reset();
  b.reset();  // the pool is gone: freed (ASan would report a leak or a use after free)
}

}  // namespace
}  // namespace reprise::core
