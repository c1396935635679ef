// HostBytes and BufferPool: recycled version buffers (a fresh allocation costs a page fault per 4 KiB).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "core/bytes.hpp"

namespace reprise::core {
namespace {

constexpr std::size_t MiB = std::size_t(1) << 20;

TEST(BufferPool, PreparedBufferIsReusedAndBounded) {
  BufferPool pool(2);
  pool.prepare(1000);
  EXPECT_EQ(pool.held_bytes(), 1250u) << "a quarter of headroom";
  const std::byte* warm = nullptr;
  {
    HostBytes b = pool.take(1000);
    warm = b.data();
    EXPECT_EQ(b.size(), 1000u);
    EXPECT_EQ(pool.held_bytes(), 0u);
    pool.give(std::move(b));
  }
  pool.prepare(900);  // the returned buffer is touched that far already: nothing new
  EXPECT_EQ(pool.held_bytes(), 1250u);
  EXPECT_EQ(pool.take(900).data(), warm);  // (and freed: the temporary is not given back)
  pool.prepare(10 * MiB);
  pool.prepare(1024);  // 12.5 MiB touched is too much to hold 1 KiB: a small one is added
  EXPECT_EQ(pool.held_bytes(), 25 * MiB / 2 + 1280);
  pool.give(HostBytes(2 * MiB));  // bounded (2 kept): the least touched goes
  EXPECT_EQ(pool.held_bytes(), 25 * MiB / 2 + 2 * MiB);
  pool.give(HostBytes(4096));  // the least touched of all: not kept
  EXPECT_EQ(pool.held_bytes(), 25 * MiB / 2 + 2 * MiB);
}

// A memory budget limits the pool for good: buffers handed back beyond the limit are freed, and prepare() makes
// none that would not fit.
TEST(BufferPool, ALimitHoldsForGood) {
  BufferPool pool(8);
  pool.give(HostBytes(2 * MiB));
  pool.give(HostBytes(MiB));
  EXPECT_EQ(pool.held_bytes(), 3 * MiB);
  pool.limit(5 * MiB / 2);  // trims now: the least touched goes
  EXPECT_EQ(pool.held_bytes(), 2 * MiB);
  pool.give(HostBytes(MiB));  // would hold 3 MiB: freed
  EXPECT_EQ(pool.held_bytes(), 2 * MiB);
  pool.give(HostBytes(MiB / 4));  // fits beside the kept one
  EXPECT_EQ(pool.held_bytes(), 9 * MiB / 4);
  pool.prepare(4 * MiB);  // a warm buffer of 5 MiB would not fit: none made
  EXPECT_EQ(pool.held_bytes(), 9 * MiB / 4);
  pool.limit(8 * MiB);  // the lowest limit stays
  pool.give(HostBytes(MiB));
  EXPECT_EQ(pool.held_bytes(), 9 * MiB / 4);
  bool reused = false;
  EXPECT_EQ(pool.take(2 * MiB, &reused).size(), 2 * MiB);  // what is kept still serves
  EXPECT_TRUE(reused);
}

// Versions change size from one checkpoint to the next: a kept mapping that is too small grows (mremap: its
// touched pages stay, with their bytes) instead of being replaced by new memory.
TEST(BufferPool, AKeptMappingTooSmallGrowsInsteadOfNewMemory) {
  BufferPool pool(4);
  HostBytes a = pool.take(2 * MiB);
  ASSERT_TRUE(a.growable());
  std::memset(a.data(), 7, a.size());
  pool.give(std::move(a));
  bool reused = false;
  HostBytes b = pool.take(5 * MiB, &reused);
  EXPECT_TRUE(reused);
  EXPECT_GE(b.capacity(), 5 * MiB);
  EXPECT_EQ(b.size(), 5 * MiB);
  EXPECT_EQ(b.touched(), 5 * MiB);
  EXPECT_EQ(b.data()[0], std::byte{7});
  EXPECT_EQ(b.data()[2 * MiB - 1], std::byte{7}) << "the touched pages moved along";
  std::memset(b.data(), 1, b.size());  // all of it is usable
  HostBytes heap = pool.take(1000);    // small buffers are heap memory: they do not grow
  EXPECT_FALSE(heap.growable());
  EXPECT_THROW(heap.grow(2000), std::logic_error);
}

// Which kept buffer serves: the least touched one already touched far enough; else the most touched one, grown;
// never one touched more than twice the size plus 1 MiB.
TEST(BufferPool, TakesTheLeastTouchedThatSufficesElseTheMostTouched) {
  BufferPool pool(8);
  for (std::size_t mib : {1, 4, 8}) pool.give(HostBytes(mib * MiB));
  HostBytes three = pool.take(3 * MiB);
  EXPECT_EQ(three.touched(), 4 * MiB) << "the 4 MiB buffer: the least touched that holds 3 MiB";
  HostBytes ten = pool.take(10 * MiB);
  EXPECT_EQ(ten.touched(), 10 * MiB);
  EXPECT_EQ(pool.held_bytes(), 1 * MiB) << "the 8 MiB one grew to serve 10 MiB; the 1 MiB one is left";
  bool reused = true;
  pool.give(std::move(ten));
  HostBytes tiny = pool.take(100 * 1024, &reused);
  EXPECT_TRUE(reused);
  EXPECT_EQ(tiny.touched(), 1 * MiB) << "1 MiB is within the waste bound for 100 KiB; 10 MiB is not";
  bool passed_over = false;
  HostBytes other = pool.take(100 * 1024, &reused, &passed_over);
  EXPECT_FALSE(reused) << "only the 10 MiB one is left: too much for 100 KiB";
  EXPECT_TRUE(passed_over) << "new memory although a buffer was kept: said so";
  HostBytes big = pool.take(9 * MiB, &reused, &passed_over);
  EXPECT_TRUE(reused);
  EXPECT_FALSE(passed_over);
  HostBytes none = pool.take(1 * MiB, &reused, &passed_over);
  EXPECT_FALSE(reused);
  EXPECT_FALSE(passed_over) << "nothing kept: new memory is the only choice";
}

// prepare() grows and touches the buffer the next take() would grow, rather than adding a new one; so does
// reserve() with its reservation (regions protected one by one, e.g. Cholesky tiles: each protect() reserves the
// total so far, and only the new part is touched each time).
TEST(BufferPool, PrepareAndReserveGrowAKeptBuffer) {
  for (const bool reservation : {false, true}) {
    BufferPool pool(4);
    if (reservation)
      pool.reserve(2 * MiB);
    else
      pool.give(HostBytes(2 * MiB));
    EXPECT_EQ(pool.held_bytes(), reservation ? 5 * MiB / 2 : 2 * MiB);
    reservation ? pool.reserve(4 * MiB) : pool.prepare(4 * MiB);
    EXPECT_EQ(pool.held_bytes(), 5 * MiB) << "one buffer, grown to 4 MiB and a quarter, touched";
    bool reused = false;
    HostBytes b = pool.take(4 * MiB, &reused);
    EXPECT_TRUE(reused);
    EXPECT_EQ(pool.held_bytes(), 0u);
  }
}

// The hook a memory budget uses to give up memory kept for reuse before the rank holds more: told the size of a
// buffer that needs memory touched for the first time (a new one; a kept one that grows, out of the pool's count
// meanwhile), never for a kept buffer that serves as it is; it may trim the pool it is called from.
TEST(BufferPool, SaysHowMuchNewMemoryATakeOrPrepareTouches) {
  BufferPool pool(4);
  std::vector<std::size_t> told;
  bool room = true;
  std::vector<bool> head_start;
  pool.on_new_memory([&](std::size_t bytes, bool ahead) {
    told.push_back(bytes);
    head_start.push_back(ahead);
    pool.trim(0);
    return room;
  });
  HostBytes a = pool.take(2 * MiB);
  ASSERT_EQ(told, std::vector<std::size_t>{2 * MiB}) << "a new buffer";
  pool.give(std::move(a));
  HostBytes b = pool.take(2 * MiB);
  EXPECT_EQ(told.size(), 1u) << "a kept buffer touched that far: no new memory";
  pool.give(std::move(b));
  HostBytes c = pool.take(3 * MiB);
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[1], 3 * MiB) << "the kept 2 MiB buffer, grown to 3 MiB";
  EXPECT_EQ(c.touched(), 3 * MiB);
  pool.give(HostBytes(1 * MiB));
  pool.give(std::move(c));
  pool.prepare(4 * MiB);  // grows the 3 MiB one to 5 MiB (4 and a quarter): the hook trims the other one
  ASSERT_EQ(told.size(), 3u);
  EXPECT_EQ(told[2], 5 * MiB);
  EXPECT_EQ(pool.held_bytes(), 5 * MiB) << "the grown buffer, kept; the 1 MiB one trimmed by the hook";
  HostBytes d = pool.take(4 * MiB);
  EXPECT_EQ(told.size(), 3u) << "prepared: warm";
  // Without room (the hook says so), prepare() and reserve(), only a head start, make nothing; take() goes on.
  room = false;
  pool.prepare(2 * MiB);
  pool.reserve(2 * MiB);
  EXPECT_EQ(told.size(), 5u);
  EXPECT_EQ(pool.held_bytes(), 0u) << "nothing prepared nor reserved";
  HostBytes e = pool.take(2 * MiB);
  EXPECT_EQ(told.size(), 6u);
  EXPECT_EQ(head_start, (std::vector<bool>{false, false, true, true, true, false})) << "prepare and reserve: ahead";
  EXPECT_EQ(e.size(), 2 * MiB);
}

// Once what the hook allowed is counted where it lives (kept in the pool again, or returned by take() to its taker),
// the pool says so, once per `true`, just before (the buffer is in no count then, never in two): a memory budget
// counts the allowed bytes until then. Nothing is said after a `false`, nor where no new memory was touched.
TEST(BufferPool, SaysOnceWhatTheHookAllowedIsCountedAgain) {
  BufferPool pool(4);
  bool room = true;
  std::vector<std::size_t> counted, held_then;
  pool.on_new_memory([&](std::size_t, bool) { return room; },
                     [&](std::size_t bytes) {
                       counted.push_back(bytes);
                       held_then.push_back(pool.held_bytes());
                     });
  HostBytes a = pool.take(2 * MiB);  // new
  EXPECT_EQ(counted, (std::vector<std::size_t>{2 * MiB}));
  pool.give(std::move(a));
  HostBytes b = pool.take(2 * MiB);  // kept, warm: no new memory
  EXPECT_EQ(counted.size(), 1u);
  pool.give(std::move(b));
  pool.prepare(4 * MiB);  // grows the kept one to 5 MiB (with headroom), then keeps it
  ASSERT_EQ(counted.size(), 2u);
  EXPECT_EQ(counted[1], 5 * MiB);
  EXPECT_EQ(held_then[1], 0u) << "said before the grown buffer was kept again";
  EXPECT_EQ(pool.held_bytes(), 5 * MiB);
  pool.reserve(4 * MiB);  // the kept one serves it: nothing new
  EXPECT_EQ(counted.size(), 2u);
  pool.trim(0);
  pool.reserve(1 * MiB);  // a new reservation
  ASSERT_EQ(counted.size(), 3u);
  EXPECT_EQ(held_then[2], 0u);
  room = false;  // not allowed: nothing to say
  pool.trim(0);
  pool.prepare(2 * MiB);
  HostBytes c = pool.take(2 * MiB);  // made anyway (needed), not allowed: not said
  EXPECT_EQ(counted.size(), 3u);
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

// Pages of [p, p + bytes) resident in memory (mincore), p page-aligned.
std::size_t resident_pages(const std::byte* p, std::size_t bytes) {
  const std::size_t pages = (bytes + 4095) / 4096;
  std::vector<unsigned char> in(pages);
  EXPECT_EQ(::mincore(const_cast<std::byte*>(p), bytes, in.data()), 0);
  std::size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

// A buffer that served a larger version (or was prepared with headroom) gives back the whole pages past its
// size that were touched, under a memory budget: they leave memory (mincore) and touched() says so; the version's
// bytes stay; memory that is not its own (pinned, from elsewhere) is left alone.
TEST(HostBytes, ReleaseUnusedGivesBackThePagesPastItsSize) {
  HostBytes b(4 * MiB);  // a mapping
  std::memset(b.data(), 7, b.size());
  ASSERT_EQ(resident_pages(b.data(), 4 * MiB), 1024u);
  b.resize_within(MiB + 100);  // the next version is smaller
  EXPECT_EQ(b.touched(), 4 * MiB);
  EXPECT_EQ(b.release_unused(), 4 * MiB - MiB - 4096);
  EXPECT_EQ(b.touched(), MiB + 4096) << "to the end of the version's last page";
  EXPECT_EQ(resident_pages(b.data(), 4 * MiB), 257u);
  EXPECT_EQ(b.data()[MiB + 99], std::byte{7});
  EXPECT_EQ(b.release_unused(), 0u) << "nothing more";
  b.resize_within(2 * MiB);  // a larger one again: the pages read as zeros, touched again
  EXPECT_EQ(b.data()[2 * MiB - 1], std::byte{0});
  EXPECT_EQ(b.touched(), 2 * MiB);

  HostBytes small(512 * 1024);  // heap memory: its whole pages past the size go too
  std::memset(small.data(), 1, small.size());
  small.resize_within(1000);
  EXPECT_GE(small.release_unused(), 512u * 1024 - 2 * 4096);
  EXPECT_EQ(small.data()[999], std::byte{1});

  std::vector<std::byte> elsewhere(64 * 1024);
  HostBytes foreign(
      elsewhere.data(), elsewhere.size(), [](std::byte*) {}, false);
  foreign.resize_within(100);
  EXPECT_EQ(foreign.release_unused(), 0u) << "not its own memory";
  EXPECT_EQ(foreign.touched(), elsewhere.size());
}

}  // namespace
}  // namespace reprise::core
