#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "logging/message_log.hpp"
#include "reprise/errors.hpp"

namespace reprise::logging {
namespace {

std::vector<std::byte> payload(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed)) & 0xff);
  return v;
}

bool holds(const Entry& e, const std::vector<std::byte>& p) {
  return e.bytes == p.size() && std::memcmp(e.data(), p.data(), p.size()) == 0;
}

TEST(MessageLog, AppendsAndFindsEntriesPerDestination) {
  MessageLog log({4096, 0});
  for (std::uint64_t s = 1; s <= 5; ++s) log.append_copy(3, s, s / 2, 7, payload(100, int(s)).data(), 100);
  log.append_copy(1, 1, 0, 7, payload(10, 9).data(), 10);
  EXPECT_EQ(log.live_entries(), 6u);
  EXPECT_EQ(log.live_payload_bytes(), 510u);
  const auto r = log.range(3, 1, 4);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]->seq, 2u);
  EXPECT_EQ(r[2]->seq, 4u);
  EXPECT_EQ(r[1]->phase, 1u);
  EXPECT_TRUE(holds(*r[1], payload(100, 3)));
  ASSERT_NE(log.find(1, 1), nullptr);
  EXPECT_EQ(log.find(1, 2), nullptr);
  EXPECT_THROW(log.append(3, 5, 0, 0, 8), UsageError);  // seqs per destination increase
}

TEST(MessageLog, SnapshotSharesSegmentsAndLaterAppendsNeverTouchItsBytes) {
  MessageLog log({4096, 0});
  log.append_copy(2, 1, 0, 0, payload(64, 1).data(), 64);
  log.append_copy(2, 2, 0, 0, payload(64, 2).data(), 64);
  const std::size_t before = log.held_bytes();
  Snapshot snap = log.snapshot();
  EXPECT_EQ(log.held_bytes(), before) << "a snapshot copies no payload";
  ASSERT_EQ(snap.entries.size(), 2u);
  EXPECT_EQ(snap.entries[0].segment, log.find(2, 1)->segment);
  log.append_copy(2, 3, 1, 0, payload(64, 3).data(), 64);
  EXPECT_EQ(log.find(2, 3)->segment, snap.entries[0].segment) << "the open segment keeps filling";
  EXPECT_GE(log.find(2, 3)->offset, snap.entries[1].offset + 64) << "behind the snapshot's bytes";
  EXPECT_EQ(log.held_bytes(), before);
  // Released from the live log, the entries stay readable through the snapshot.
  EXPECT_EQ(log.release_through(2, 2), 2u);
  EXPECT_TRUE(holds(snap.entries[0], payload(64, 1)));
  EXPECT_TRUE(holds(snap.entries[1], payload(64, 2)));
  EXPECT_EQ(log.held_bytes(), before) << "the snapshot and entry 3 still hold the segment";
  // Restore: the live log is the snapshot again (seq 3 was appended after it).
  log.restore(snap);
  EXPECT_EQ(log.live_entries(), 2u);
  EXPECT_EQ(log.find(2, 3), nullptr);
  EXPECT_TRUE(holds(*log.find(2, 1), payload(64, 1)));
}

TEST(MessageLog, SegmentsAreFreedWhenNothingReferencesThem) {
  MessageLog log({1024, 0});
  {
    Snapshot snap;
    for (std::uint64_t s = 1; s <= 40; ++s) log.append_copy(0, s, 0, 0, payload(100, int(s)).data(), 100);
    snap = log.snapshot();
    EXPECT_GE(log.held_bytes(), 40u * 100);
    log.release_through(0, 40);
    EXPECT_EQ(log.live_entries(), 0u);
    EXPECT_GE(log.held_bytes(), 40u * 100) << "the snapshot keeps them";
  }
  EXPECT_EQ(log.held_bytes(), 0u) << "snapshot dropped and entries released: every segment freed";
}

TEST(MessageLog, FreedSegmentsAreReused) {
  MessageLog log({1024, 0, 4096});
  log.append_copy(0, 1, 0, 0, payload(800, 1).data(), 800);
  const void* first = log.find(0, 1)->data();
  log.snapshot();  // (dropped at once: it holds nothing)
  log.release_through(0, 1);
  EXPECT_EQ(log.held_bytes(), 0u);
  EXPECT_EQ(log.pooled_bytes(), 1024u) << "the freed segment waits in the pool";
  log.append_copy(0, 2, 0, 0, payload(800, 2).data(), 800);
  EXPECT_EQ(log.find(0, 2)->data(), first) << "and is reused";
  EXPECT_EQ(log.pooled_bytes(), 0u);
  EXPECT_TRUE(holds(*log.find(0, 2), payload(800, 2)));
  // With no pool of its own, the log still keeps what it held at its peak (never more).
  MessageLog capped({1024, 0, 0});
  for (std::uint64_t s = 1; s <= 3; ++s) {
    capped.append_copy(0, s, 0, 0, payload(800, int(s)).data(), 800);
    capped.snapshot();  // 800 bytes: one segment per entry
  }
  EXPECT_EQ(capped.held_bytes(), 3072u);
  capped.release_through(0, 3);
  EXPECT_EQ(capped.pooled_bytes(), 3072u);
  for (std::uint64_t s = 4; s <= 6; ++s) {
    capped.append_copy(0, s, 0, 0, payload(800, int(s)).data(), 800);
    capped.snapshot();
  }
  EXPECT_EQ(capped.pooled_bytes(), 0u) << "all three reused";
  EXPECT_EQ(capped.held_bytes(), 3072u);
}

// Four entries of 800 bytes in 1 KiB segments, one segment each (a snapshot after each), the first three freed.
void log_four_free_three(MessageLog& log) {
  for (std::uint64_t s = 1; s <= 4; ++s) {
    log.append_copy(0, s, 0, 0, payload(800, int(s)).data(), 800);
    log.snapshot();
  }
  log.release_through(0, 3);
}

// A memory budget limits the pool for good: the segments over the limit go now, and the log's peak no longer
// raises the cap above it; the entries themselves are untouched.
TEST(MessageLog, APoolLimitReleasesFreedSegmentsForGood) {
  MessageLog log({1024, 0, 0});
  log_four_free_three(log);
  EXPECT_EQ(log.pooled_bytes(), 3072u);
  log.limit_pool(1500);
  EXPECT_EQ(log.pooled_bytes(), 1024u) << "the segments over the limit released";
  log.limit_pool(4096);
  EXPECT_EQ(log.pooled_bytes(), 1024u) << "a higher limit does not undo a lower one";
  for (std::uint64_t s = 5; s <= 8; ++s) {
    log.append_copy(0, s, 0, 0, payload(800, int(s)).data(), 800);
    log.snapshot();
  }
  EXPECT_EQ(log.held_bytes(), 5u * 1024);
  log.release_through(0, 8);
  EXPECT_EQ(log.held_bytes(), 0u);
  EXPECT_EQ(log.pooled_bytes(), 1024u) << "the cap stays at the limit although the log held 5 KiB";
  log.limit_pool(0);
  EXPECT_EQ(log.pooled_bytes(), 0u);
}

// Before new memory passes a budget the runtime frees kept segments from its own threads: whole segments, the
// ones freed longest ago first, at least the bytes asked for where the pool holds them; the cap stays, so
// segments freed later are kept again.
TEST(MessageLog, ShedReleasesWholeFreedSegmentsAndKeepsTheCap) {
  MessageLog log({1024, 0, 0});
  log_four_free_three(log);
  ASSERT_EQ(log.pooled_bytes(), 3072u);
  EXPECT_EQ(log.shed_pool(1500), 2048u) << "two whole segments for 1500 bytes";
  EXPECT_EQ(log.pooled_bytes(), 1024u);
  EXPECT_EQ(log.shed_pool(0), 0u);
  EXPECT_EQ(log.shed_pool(SIZE_MAX), 1024u) << "no more than the pool holds";
  EXPECT_EQ(log.pooled_bytes(), 0u);
  EXPECT_EQ(log.held_bytes(), 1024u) << "the live entry's segment is not the pool's";
  EXPECT_TRUE(holds(*log.find(0, 4), payload(800, 4)));
  log.release_through(0, 4);
  EXPECT_EQ(log.pooled_bytes(), 1024u) << "the cap stays: a segment freed later is kept again";
}

// The pool is shared by the application's thread (appends, releases) and the runtime's (shed, pooled_bytes): its
// counts stay whole segments, and every entry keeps its bytes (a data race here is the thread sanitizer's).
TEST(MessageLog, ShedFromAnotherThreadWhileTheLogAppendsAndReleases) {
  MessageLog log({1024, 0, 0});
  std::atomic<bool> stop{false};
  std::size_t shed = 0;
  std::thread runtime([&] {
    while (!stop.load()) {
      shed += log.shed_pool(1024);
      EXPECT_EQ(log.pooled_bytes() % 1024, 0u);
    }
  });
  for (std::uint64_t s = 1; s <= 2000; ++s) {
    log.append_copy(0, s, 0, 0, payload(800, int(s)).data(), 800);
    log.snapshot();
    ASSERT_TRUE(holds(*log.find(0, s), payload(800, int(s))));
    if (s % 4 == 0) log.release_through(0, s - 1);
  }
  stop = true;
  runtime.join();
  EXPECT_EQ(log.live_entries(), 1u);
  EXPECT_EQ(log.held_bytes(), 1024u);
  EXPECT_EQ(log.pooled_bytes() % 1024, 0u);
  EXPECT_EQ(shed % 1024, 0u);
}

TEST(MessageLog, LargePayloadGetsItsOwnSegment) {
  MessageLog log({1024, 0});
  log.append_copy(1, 1, 0, 0, payload(16, 1).data(), 16);
  const auto small_seg = log.find(1, 1)->segment;
  const auto big = payload(5000, 4);
  log.append_copy(1, 2, 0, 0, big.data(), big.size());
  log.append_copy(1, 3, 0, 0, payload(16, 3).data(), 16);
  EXPECT_NE(log.find(1, 2)->segment, small_seg);
  EXPECT_EQ(log.find(1, 3)->segment, small_seg) << "small entries keep filling the open segment";
  EXPECT_TRUE(holds(*log.find(1, 2), big));
  EXPECT_EQ(log.held_bytes(), 1024u + 5008u);
}

TEST(MessageLog, BoundIsReported) {
  MessageLog log({1024, 3000});
  std::uint64_t s = 0;
  while (!log.over_bound()) {
    ++s;
    log.append_copy(5, s, 0, 0, payload(500, int(s)).data(), 500);
  }
  EXPECT_EQ(log.held_bytes(), 3072u);
  log.release_through(5, s);
  EXPECT_FALSE(log.over_bound());
}

}  // namespace
}  // namespace reprise::logging
