// The regions a group checkpoint's protocol state travels in (counters; log snapshot and orphan record), and the
// group barrier's channel check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "protocol/capture_regions.hpp"
#include "protocol/group_channels.hpp"
#include "protocol/process.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

std::vector<std::byte> payload(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed)) & 0xff);
  return v;
}

// Process 0 of four in groups {0,1} and {2,3}: it sends `n` messages of `bytes` to 2 (logged) and to 1 (not), and
// delivers `n` from 3 (recorded as orphans until 3's group commits).
Process sender(int n, std::size_t bytes) {
  Process p(0, {0, 0, 1, 1}, logging::LogOptions{4096, 0});
  for (int i = 0; i < n; ++i) {
    const auto data = payload(bytes, i);
    p.send(2, 7, data.data(), bytes);
    p.send(1, 7, data.data(), bytes);
    const Header h{static_cast<std::uint64_t>(i + 1), static_cast<std::uint64_t>(10 + i), 1};
    EXPECT_EQ(p.arrival(3, h), Process::Arrival::Deliver);
    p.deliver(3, h);
  }
  return p;
}

TEST(CounterRegion, CarriesPhaseChannelsAndViews) {
  Process p = sender(3, 100);
  p.apply_view(2, View{1, 0});  // 2's group committed having delivered 1 message from 0
  CounterRegion region(4);
  region.write(p);
  const auto [data, bytes] = region.locate();
  CounterRegion copy(4);
  std::memcpy(copy.locate(bytes).first, data, bytes);  // as a restore writes it back
  const Capture c = copy.read();
  EXPECT_EQ(c.phase, p.phase());
  for (int q = 0; q < 4; ++q) {
    EXPECT_EQ(c.sent(q), (std::vector<std::uint64_t>{0, 3, 3, 0})[static_cast<std::size_t>(q)]) << q;
    EXPECT_EQ(c.delivered(q), (std::vector<std::uint64_t>{0, 0, 0, 3})[static_cast<std::size_t>(q)]) << q;
  }
  EXPECT_EQ(c.view(2).delivered, 1u);
  // Only the peers with a count or a view are kept (sparse: 0 never appears).
  EXPECT_EQ(c.channels.size(), 3u);
  EXPECT_EQ(c.channels.count(0), 0u);
  copy.clear();
  EXPECT_TRUE(copy.read().channels.empty());
}

// The region follows the process's peers, not the job: the same three channels in a job of 4 and of 100,000 ranks
// take the same bytes; many peers grow it, and a restore takes the version's size.
TEST(CounterRegion, ItsSizeFollowsThePeersNotTheJob) {
  Process small = sender(3, 100);
  CounterRegion a(4);
  CounterRegion b(100000);
  a.write(small);
  b.write(small);
  EXPECT_EQ(a.bytes(), b.bytes());
  EXPECT_LE(b.bytes(), 64 * sizeof(std::uint64_t));
  std::vector<int> own_groups(300);
  std::iota(own_groups.begin(), own_groups.end(), 0);
  Process many(0, own_groups, {});
  for (int q = 1; q < 300; ++q) many.apply_view(q, View{1, 2});
  CounterRegion c(300);
  c.write(many);
  EXPECT_GE(c.bytes(), (2 + 5 * 299) * sizeof(std::uint64_t));
  const auto [data, bytes] = c.locate();
  CounterRegion restored(300);
  std::memcpy(restored.locate(bytes).first, data, bytes);
  EXPECT_EQ(restored.bytes(), bytes);
  EXPECT_EQ(restored.read().channels.size(), 299u);
}

TEST(CounterRegion, ADamagedRegionIsACorruptCheckpoint) {
  Process p = sender(3, 100);
  CounterRegion region(4);
  region.write(p);
  auto* words = static_cast<std::uint64_t*>(region.locate().first);
  words[1] = 1000;  // more channels than the region holds
  EXPECT_THROW(region.read(), CorruptCheckpointError);
  region.write(p);
  words = static_cast<std::uint64_t*>(region.locate().first);
  words[2] = 7;  // a peer outside the job of 4
  try {
    (void)region.read();
    FAIL();
  } catch (const CorruptCheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 7 in a job of 4 ranks"), std::string::npos) << e.what();
  }
}

// The region as of a plan, [0, upto) of it filled (the rest zeros: room a full version leaves out).
std::vector<std::byte> image_of(const LogRegion::Plan& p, std::size_t upto = SIZE_MAX) {
  std::vector<std::byte> v(p.bytes);
  p.fill(0, std::min(upto, p.bytes), v.data());
  return v;
}

// A replacement's view: the region's bytes arrive in a version, and it reads them into its own log (`log`, which
// the entries read reference).
Capture read_back(const std::vector<std::byte>& image, logging::MessageLog& log, std::size_t ranks = 4) {
  LogRegion restored;
  std::memcpy(restored.locate(image.size()).first, image.data(), image.size());
  Capture back;
  restored.read(back, log, ranks);
  return back;
}

void expect_entries_of(const Capture& read, const Capture& c, const std::string& where) {
  ASSERT_EQ(read.log.entries.size(), c.log.entries.size()) << where;
  for (std::size_t i = 0; i < c.log.entries.size(); ++i) {
    ASSERT_EQ(read.log.entries[i].dest, c.log.entries[i].dest) << where;
    ASSERT_EQ(read.log.entries[i].seq, c.log.entries[i].seq) << where;
    ASSERT_EQ(read.log.entries[i].phase, c.log.entries[i].phase) << where;
    ASSERT_EQ(read.log.entries[i].bytes, c.log.entries[i].bytes) << where;
    ASSERT_EQ(std::memcmp(read.log.entries[i].data(), c.log.entries[i].data(), c.log.entries[i].bytes), 0) << where;
  }
  EXPECT_EQ(read.orphan_record, c.orphan_record) << where;
}

TEST(LogRegion, RoundTripsTheLogSnapshotAndTheOrphanRecord) {
  Process p = sender(5, 300);
  const Capture mine = p.capture();
  LogRegion region;
  const auto image = image_of(region.plan(mine, 4));
  logging::MessageLog log;
  Capture back = read_back(image, log);
  ASSERT_EQ(back.log.entries.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    const auto& e = back.log.entries[i];
    EXPECT_EQ(e.dest, 2);
    EXPECT_EQ(e.seq, i + 1);
    EXPECT_EQ(e.tag, 7);
    ASSERT_EQ(e.bytes, 300u);
    EXPECT_EQ(std::memcmp(e.data(), payload(300, static_cast<int>(i)).data(), 300), 0);
  }
  ASSERT_EQ(back.orphan_record.size(), 1u) << "only the peer with orphans has an entry";
  ASSERT_EQ(back.orphan_record[3].size(), 5u);
  EXPECT_EQ(back.orphan_record[3][4], (std::pair<std::uint64_t, std::uint64_t>{5, 14}));
}

// A differential version carries only what changed: payloads keep their offsets while they are live, and new
// ones go behind them.
TEST(LogRegion, IsAppendStableSoThatOnlyNewPayloadsChange) {
  Process p = sender(3, 256);
  LogRegion region;
  const LogRegion::Plan first = region.plan(p.capture(), 4);
  const auto before = image_of(first);
  const auto more = payload(256, 99);
  p.send(2, 7, more.data(), more.size());
  const LogRegion::Plan second = region.plan(p.capture(), 4);
  const auto after = image_of(second);
  ASSERT_EQ(after.size(), before.size()) << "room enough: the region keeps its size";
  EXPECT_FALSE(second.all);
  // The three payloads (64-byte header, then 256 bytes each) are where they were; the new one behind them, where
  // the plan says bytes change.
  EXPECT_EQ(std::memcmp(after.data() + 64, before.data() + 64, 3 * 256), 0);
  EXPECT_EQ(std::memcmp(after.data() + 64 + 3 * 256, more.data(), 256), 0);
  EXPECT_EQ(second.changed.back().first, 64u + 3 * 256);
}

TEST(LogRegion, GrowsWhenTheLogOutgrowsIt) {
  Process p = sender(40, 1000);
  LogRegion region;
  const std::size_t first = region.bytes();
  const LogRegion::Plan plan = region.plan(p.capture(), 4);
  EXPECT_GT(plan.bytes, first);
  EXPECT_EQ(plan.bytes, region.bytes());
  EXPECT_TRUE(plan.all);
  EXPECT_EQ(plan.bytes % (64 * 1024), 0u) << "grows in 64 KiB steps";
}

// After a burst the log is released: the next layout from the start that needs under a quarter of the region
// shrinks it (to half as much again as it needs), and the region still reads back.
TEST(LogRegion, ShrinksWhenARewriteNeedsAQuarterOfIt) {
  Process p = sender(200, 1000);
  LogRegion region;
  (void)region.plan(p.capture(), 4);
  const std::size_t big = region.bytes();
  ASSERT_GE(big, 200u * 1024);
  Capture few = p.capture();
  few.log.entries.resize(2);  // the rest released
  (void)region.plan(few, 4);
  EXPECT_EQ(region.bytes(), big) << "appends that fit lay out nothing again: no shrink";
  region.rewrite_next();
  const LogRegion::Plan shrunk = region.plan(few, 4);
  EXPECT_LT(region.bytes(), big / 4);
  EXPECT_GE(region.bytes(), 2u * 1000);
  EXPECT_EQ(shrunk.bytes, region.bytes());
  logging::MessageLog log;
  Capture back = read_back(image_of(shrunk), log);
  ASSERT_EQ(back.log.entries.size(), 2u);
  EXPECT_EQ(std::memcmp(back.log.entries[1].data(), payload(1000, 1).data(), 1000), 0);
  // A layout from the start that needs more than a quarter keeps the size.
  region.rewrite_next();
  const std::size_t small = region.bytes();
  (void)region.plan(few, 4);
  EXPECT_EQ(region.bytes(), small);
}

// Before a full version (fit_next) the region is laid out from the start without the released entries' holes and
// sized to half as much again as it needs when that is a quarter smaller or more; the next plans append again.
TEST(LogRegion, AFullVersionFitsItToHalfAgainWhatItNeeds) {
  Process p = sender(200, 1000);
  LogRegion region;
  (void)region.plan(p.capture(), 4);
  const std::size_t first = region.bytes();
  Capture c = p.capture();
  c.log.entries.resize(150);  // a quarter released: half again what is left is not a quarter smaller
  (void)region.plan(c, 4);
  region.fit_next();
  LogRegion::Plan fit = region.plan(c, 4);
  EXPECT_TRUE(fit.all) << "laid out from the start";
  EXPECT_EQ(region.bytes(), first);
  c.log.entries.resize(100);  // half released
  region.fit_next();
  fit = region.plan(c, 4);
  EXPECT_TRUE(fit.all);
  EXPECT_LE(region.bytes(), first * 3 / 4) << "the released entries' holes and the room beyond half again are gone";
  EXPECT_GE(region.bytes(), 100u * 1024 * 3 / 2);
  logging::MessageLog log;
  Capture back = read_back(image_of(fit), log);
  ASSERT_EQ(back.log.entries.size(), 100u);
  EXPECT_EQ(std::memcmp(back.log.entries[99].data(), payload(1000, 99).data(), 1000), 0);
  // Appends fit in the room and change only what is new.
  const std::size_t fitted = region.bytes();
  c = p.capture();
  c.log.entries.resize(120);
  const LogRegion::Plan next = region.plan(c, 4);
  EXPECT_FALSE(next.all);
  EXPECT_EQ(region.bytes(), fitted);
}

TEST(LogRegion, ATruncatedOrDamagedRegionIsRefusedAndSaysWhy) {
  Process p = sender(2, 100);
  LogRegion region;
  const std::vector<std::byte> good = image_of(region.plan(p.capture(), 4));
  const auto read_of = [](const std::vector<std::byte>& bytes, std::size_t ranks) -> std::string {
    logging::MessageLog log;
    try {
      (void)read_back(bytes, log, ranks);
    } catch (const CorruptCheckpointError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(read_of(good, 4), "");
  EXPECT_NE(read_of(std::vector<std::byte>(good.begin(), good.begin() + 32), 4).find("truncated header"),
            std::string::npos);
  auto bad_magic = good;
  bad_magic[0] ^= std::byte{1};
  EXPECT_NE(read_of(bad_magic, 4).find("bad magic"), std::string::npos);
  auto flipped = good;
  std::uint64_t index = 0;
  std::memcpy(&index, good.data() + 8, 8);
  flipped[index + 3] ^= std::byte{0x40};  // a bit of the index
  EXPECT_NE(read_of(flipped, 4).find("checksum"), std::string::npos);
  EXPECT_NE(read_of(good, 8).find("an orphan record for 4 ranks in a job of 8"), std::string::npos);
  LogRegion never;  // no restore wrote it
  Capture c;
  logging::MessageLog log;
  EXPECT_THROW(never.read(c, log, 4), CorruptCheckpointError);
}

// What a chain of versions restores: a checkpoint plans the region on the application's thread, and its background
// thread has the plan fill the chunks the changed ranges touch (all chunks in use when `all`, zeros behind) into
// the version. Applied one after the other as a restore does, those chunks read back as the newest capture, through
// sends, releases, growth, an abandoned plan and a plan with no capture since the last one; most plans change only
// what is new, and a plan's fill runs on another thread, after later plans were made.
TEST(LogRegion, ThePlansFilledChunksRestoreEveryCapture) {
  constexpr std::size_t kChunk = 256;
  Process p = sender(2, 300);
  LogRegion region;
  std::vector<std::byte> image;  // the region as a restore of the chain so far gives it
  int compacted = 0, partial = 0, roomy = 0;
  std::size_t stored = 0, logged = 0;
  struct Made {
    LogRegion::Plan plan;
    Capture capture;
    int step;
  };
  // The version of a plan stored, as the runtime does: its chunks filled on the background thread, then applied.
  const auto store = [&](const Made& m) {
    const LogRegion::Plan& plan = m.plan;
    ASSERT_LE(plan.used, plan.bytes);
    std::vector<std::byte> filled(plan.bytes);
    std::vector<std::size_t> chunks;
    const bool all = plan.all || plan.bytes != image.size();  // (a new size makes a full version)
    if (all) {
      for (std::size_t ch = 0; ch * kChunk < plan.used; ++ch) chunks.push_back(ch);
    } else {
      for (const auto& [from, to] : plan.changed)
        for (std::size_t ch = from / kChunk; to > from && ch <= (to - 1) / kChunk; ++ch) chunks.push_back(ch);
    }
    std::thread([&] {
      for (std::size_t ch : chunks) {
        const std::size_t at = ch * kChunk;
        plan.fill(at, std::min(kChunk, plan.bytes - at), filled.data() + at);
      }
    }).join();
    if (all) image.assign(plan.bytes, std::byte{0});
    for (std::size_t ch : chunks) {
      const std::size_t at = ch * kChunk, n = std::min(kChunk, plan.bytes - at);
      std::memcpy(image.data() + at, filled.data() + at, n);
      stored += n;
    }
    (all ? compacted : partial) += 1;
    roomy += plan.used < plan.bytes ? 1 : 0;
    logging::MessageLog log;
    expect_entries_of(read_back(image, log), m.capture, "step " + std::to_string(m.step));
  };
  std::optional<Made> waiting;  // stored one step late: after the next plan was made
  for (int step = 0; step < 40; ++step) {
    for (int k = 0; k < 1 + step % 4; ++k) {
      const auto data = payload(100 + static_cast<std::size_t>(step * 37 + k * 11) % 900, step * 8 + k);
      p.send(2, 7, data.data(), data.size());
      logged += data.size();
    }
    if (step % 3 == 2) p.apply_view(2, View{static_cast<std::uint64_t>(step * 2), 0});  // 2's group committed
    if (step == 20) region.abandon(region.plan(p.capture(), 4));  // a checkpoint that did not happen
    Made m{step == 30 ? region.unchanged() : region.plan(p.capture(), 4), {}, step};
    if (step == 30) {
      EXPECT_TRUE(m.plan.changed.empty()) << "no capture since the last plan";
      m.capture = waiting->capture;
    } else {
      m.capture = p.capture();
    }
    if (step == 20) {
      EXPECT_TRUE(m.plan.all) << "the plan after an abandoned one lays everything out again";
    }
    if (waiting) store(*waiting);
    waiting = std::move(m);
    EXPECT_EQ(region.held_bytes(), 0u) << "the region has no memory of its own";
  }
  store(*waiting);
  EXPECT_GT(partial, 20) << "most plans change only what is new";
  EXPECT_GE(compacted, 2);
  EXPECT_GT(roomy, 20) << "most plans leave room behind what they use";
  EXPECT_LT(stored, 3 * logged) << "the versions carry what is new, not the whole log each time";
}

// A restore gives the region memory, for the restore to write and read() to read, until the plans no longer need it;
// a plan with no capture since then fills what was restored.
TEST(LogRegion, ARestoredRegionIsHeldUntilTheNextPlans) {
  Process p = sender(3, 500);
  LogRegion region;
  const std::vector<std::byte> image = image_of(region.plan(p.capture(), 4));
  LogRegion restored;
  std::memcpy(restored.locate(image.size()).first, image.data(), image.size());
  EXPECT_EQ(restored.held_bytes(), image.size());
  EXPECT_EQ(image_of(restored.unchanged()), image) << "no capture since the restore: the restored bytes";
  Capture c;
  logging::MessageLog log;
  restored.read(c, log, 4);
  const LogRegion::Plan next = restored.plan(c, 4);
  EXPECT_TRUE(next.all) << "the restored offsets are not this process's map";
  (void)restored.plan(c, 4);
  EXPECT_EQ(restored.held_bytes(), 0u);
  logging::MessageLog log2;
  expect_entries_of(read_back(image_of(next), log2), c, "after the restore");
}

TEST(GroupChannels, EmptyChannelsGiveTheGroupsMaximumPhase) {
  EXPECT_EQ(GroupMap({0, 0, 1, 1, 0}).members(4), (std::vector<int>{0, 1, 4}));  // a table
  EXPECT_EQ(GroupMap({0, 0, 1, 1, 0}).groups(), 2);
  EXPECT_EQ(GroupMap({0, 0, 0, 1, 1, 1, 2}).members(4), (std::vector<int>{3, 4, 5}));  // blocks of 3: no table
  EXPECT_EQ(GroupMap({0, 0, 0, 1, 1, 1, 2}).members(6), (std::vector<int>{6}));
  EXPECT_EQ(GroupMap({0, 0, 0, 1, 1, 1, 2}).groups(), 3);
  EXPECT_EQ(GroupMap({0, 0, 0, 1, 1, 1, 2}).table_bytes(), 0u);
  // Members 0 and 1: 0 sent 3 to 1, 1 delivered 3 from 0; 1 sent 2 to 0, 0 delivered 2.
  const std::vector<std::uint64_t> a{5, 0, 3, 0, 2}, b{9, 2, 0, 3, 0};
  EXPECT_EQ(check_group_channels({0, 1}, {a.data(), b.data()}, 40), 9u);
}

TEST(GroupChannels, AMessageStillInAGroupChannelIsAProtocolErrorNamingIt) {
  const std::vector<std::uint64_t> a{5, 0, 3, 0, 2}, b{9, 2, 0, 2, 0};  // 1 delivered only 2 of 0's 3
  try {
    check_group_channels({4, 6}, {a.data(), b.data()}, 40);
    FAIL() << "a message left in the channel passed the check";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint 40: the channel from rank 4 to rank 6 (same group) is not empty: "
                                         "3 sent, 2 delivered"),
              std::string::npos)
        << e.what();
  }
}

TEST(GroupChannels, AContributionIsThePhaseThenSentAndDeliveredPerMember) {
  Process p = sender(3, 10);
  EXPECT_EQ(barrier_contribution(p, {0, 1}), (std::vector<std::uint64_t>{p.phase(), 0, 3, 0, 0}));
}

}  // namespace
}  // namespace reprise::protocol
