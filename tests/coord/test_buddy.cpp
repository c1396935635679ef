// The buddy level without MPI: BuddyStore over an in-process shipper, chain bookkeeping, and the recovery plan.
// The same code runs over MPI in reprise-stencil's ULFM tests.
#include <gtest/gtest.h>

#include <cstring>

#include "coord/buddy_store.hpp"
#include "coord/job_floor.hpp"
#include "coord/recovery_plan.hpp"
#include "core/format.hpp"
#include "core/version_store.hpp"
#include "reprise/errors.hpp"
#include "support/test_support.hpp"

namespace reprise::coord {
namespace {

struct Sample {
  core::Manifest manifest;
  std::shared_ptr<core::HostBytes> payload;
  std::uint64_t sum = 0;
};

// A version of one 16 KiB region: full (base = itself) or differential on `base`.
Sample make_version(std::uint64_t v, std::uint64_t base) {
  Sample s;
  const std::size_t bytes = 16384;
  s.manifest.version = v;
  s.manifest.base_version = base;
  s.manifest.kind = base == v ? core::VersionKind::Full : core::VersionKind::Differential;
  core::RegionRecord r;
  r.name = "data";
  r.bytes = bytes;
  r.chunk_bytes = 4096;
  r.digests.assign(4, v);
  for (std::uint32_t i = 0; i < 4; ++i) r.chunks.push_back(i);
  s.manifest.regions.push_back(r);
  s.manifest.layout_payload();
  s.payload = std::make_shared<core::HostBytes>(bytes);
  test::fill_random(s.payload->data(), bytes, v);
  s.sum = core::payload_checksum(s.payload->data(), bytes);
  return s;
}

// The buddy's host memory, reached in-process. `up = false` plays a failed link.
class InProcessShipper : public Shipper {
 public:
  std::unique_ptr<core::VersionStore> buddy = core::make_memory_store();
  bool up = true;
  int shipped = 0, released = 0;
  bool ship(const core::Manifest& m, const core::HostBytes& payload, std::uint64_t sum) override {
    if (!up) return false;
    auto copy = std::make_shared<core::HostBytes>(payload.size());
    std::memcpy(copy->data(), payload.data(), payload.size());
    buddy->put(m, copy, sum);
    ++shipped;
    return true;
  }
  void release(std::uint64_t v) override {
    buddy->release(v);
    ++released;
  }
};

void put(BuddyStore& s, std::uint64_t v, std::uint64_t base) {
  Sample x = make_version(v, base);
  s.put(x.manifest, x.payload, x.sum);
}

TEST(BuddyStore, EveryVersionReachesTheBuddyWithTheSameBytes) {
  auto ship = std::make_shared<InProcessShipper>();
  BuddyStore store(core::make_memory_store(), ship);
  put(store, 10, 10);
  put(store, 20, 10);
  EXPECT_EQ(ship->buddy->list(), (std::vector<std::uint64_t>{10, 20}));
  const auto here = store.load(20), there = ship->buddy->load(20);
  ASSERT_EQ(here.payload->size(), there.payload->size());
  EXPECT_EQ(std::memcmp(here.payload->data(), there.payload->data(), here.payload->size()), 0);
  EXPECT_EQ(store.newest_acked_chain(), 20u);
}

TEST(PieceFrontier, PiecesGoInOrderOnceWhole) {
  core::PieceFrontier f(10, 4);  // pieces [0,4) [4,8) [8,10)
  EXPECT_EQ(f.pieces(), 3u);
  EXPECT_EQ(f.piece_bytes(2), 2u);
  EXPECT_EQ(f.piece_offset(2), 8u);
  EXPECT_EQ(f.add(4, 4), 0u);  // piece 1 whole, piece 0 not yet: nothing goes
  EXPECT_EQ(f.add(0, 3), 0u);
  EXPECT_EQ(f.add(3, 1), 2u);  // pieces 0 and 1
  EXPECT_EQ(f.add(8, 2), 3u);
  EXPECT_THROW(f.add(9, 1), Error);   // ready twice
  EXPECT_THROW(f.add(9, 5), Error);   // outside the payload
  core::PieceFrontier empty(0, 4);
  EXPECT_EQ(empty.pieces(), 0u);
  EXPECT_EQ(empty.add(0, 0), 0u);
}

// A shipper that streams: records what it was handed, in order, and whether the owner's store held the version
// by then.
class StreamingShipper : public InProcessShipper {
 public:
  std::vector<std::pair<std::size_t, std::size_t>> handed;
  std::vector<std::string> events;
  class S : public ShipStream {
   public:
    S(StreamingShipper& o, const core::Manifest& m, std::shared_ptr<const core::HostBytes> p)
        : o_(o), m_(m), p_(std::move(p)) {}
    void ready(std::size_t off, std::size_t n) override {
      o_.handed.emplace_back(off, n);
      o_.events.push_back("ready");
      bytes_ += n;
    }
    void finish(std::uint64_t sum) override {
      o_.events.push_back("finish");
      acked_ = o_.ship(m_, *p_, sum);
    }
    bool acknowledged() const override { return acked_; }
    std::size_t handed_on() const override { return bytes_; }
    bool streams() const override { return true; }

   private:
    StreamingShipper& o_;
    core::Manifest m_;
    std::shared_ptr<const core::HostBytes> p_;
    std::size_t bytes_ = 0;
    bool acked_ = false;
  };
  std::unique_ptr<ShipStream> stream(const core::Manifest& m, std::shared_ptr<const core::HostBytes> p) override {
    events.push_back("stream");
    return std::make_unique<S>(*this, m, std::move(p));
  }
};

TEST(BuddyStore, AStreamedVersionReachesTheBuddyPartByPartAndIsStoredAtFinish) {
  auto ship = std::make_shared<StreamingShipper>();
  BuddyStore store(core::make_memory_store(), ship);
  Sample x = make_version(10, 10);
  auto put = store.begin_put(x.manifest, x.payload);
  put->ready(8192, 8192);
  put->ready(0, 8192);
  EXPECT_TRUE(put->streams());
  EXPECT_EQ(put->handed_on(), 16384u);
  EXPECT_TRUE(store.list().empty());  // not stored before finish()
  EXPECT_FALSE(store.newest_acked_chain());
  put->finish(x.sum);
  EXPECT_EQ(ship->events, (std::vector<std::string>{"stream", "ready", "ready", "finish"}));
  EXPECT_EQ(ship->handed, (std::vector<std::pair<std::size_t, std::size_t>>{{8192, 8192}, {0, 8192}}));
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10}));
  EXPECT_EQ(ship->buddy->list(), (std::vector<std::uint64_t>{10}));
  EXPECT_EQ(store.newest_acked_chain(), 10u);
  // put() is a stream with every byte ready at once.
  Sample y = make_version(20, 10);
  store.put(y.manifest, y.payload, y.sum);
  EXPECT_EQ(ship->handed.back(), (std::pair<std::size_t, std::size_t>{0, 16384}));
  EXPECT_EQ(store.newest_acked_chain(), 20u);
  // A store that does not stream keeps the version until finish() (the default begin_put).
  auto plain = core::make_memory_store();
  auto p = plain->begin_put(x.manifest, x.payload);
  p->ready(0, 16384);
  EXPECT_TRUE(plain->list().empty());
  p->finish(x.sum);
  EXPECT_EQ(plain->list(), (std::vector<std::uint64_t>{10}));
  EXPECT_EQ(p->handed_on(), 0u);
  EXPECT_FALSE(p->streams());  // the drain does not report its parts to it
}

TEST(BuddyStore, VersionsNotAcknowledgedStayLocalAndDoNotCount) {
  auto ship = std::make_shared<InProcessShipper>();
  BuddyStore store(core::make_memory_store(), ship);
  put(store, 10, 10);
  ship->up = false;
  put(store, 20, 10);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10, 20}));
  EXPECT_EQ(ship->buddy->list(), (std::vector<std::uint64_t>{10}));
  EXPECT_EQ(store.newest_acked_chain(), 10u);
  // A differential whose base never reached the buddy is not a complete chain there.
  ship->up = true;
  put(store, 30, 20);
  EXPECT_EQ(store.newest_acked_chain(), 10u);
}

TEST(BuddyStore, ReleasesTheCommittedChainNeedsWaitForANewerCommit) {
  auto ship = std::make_shared<InProcessShipper>();
  BuddyStore store(core::make_memory_store(), ship);
  put(store, 10, 10);
  put(store, 20, 10);
  store.set_committed(20);
  put(store, 30, 30);
  store.release(10);  // the runtime drops an old chain: 20 still needs it
  store.release(20);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10, 20, 30}));
  EXPECT_EQ(ship->buddy->list(), (std::vector<std::uint64_t>{10, 20, 30}));
  store.set_committed(30);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{30}));
  EXPECT_EQ(ship->buddy->list(), (std::vector<std::uint64_t>{30}));
  store.set_committed(20);  // an older commit completing late changes nothing
  EXPECT_EQ(store.committed(), 30u);
}

TEST(BuddyStore, NothingIsReleasedBeforeACommitAndNewerVersionsWaitForTheirs) {
  // REPRISE_KEEP_CHAINS=1 with full versions only: the runtime asks to drop 10 as soon as 20 is stored. Before
  // any commit, and while 20 is not committed, 10 may still be the group's commit (another member's 20 may
  // never reach its buddy): it stays, here and at the buddy.
  auto ship = std::make_shared<InProcessShipper>();
  BuddyStore store(core::make_memory_store(), ship);
  put(store, 10, 10);
  put(store, 20, 20);
  store.release(10);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10, 20}));
  store.set_committed(10);
  put(store, 30, 30);
  store.release(20);  // newer than the commit: it may be the next one
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10, 20, 30}));
  EXPECT_EQ(ship->buddy->list(), (std::vector<std::uint64_t>{10, 20, 30}));
  store.set_committed(20);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{20, 30}));
  EXPECT_EQ(ship->buddy->list(), (std::vector<std::uint64_t>{20, 30}));
  EXPECT_EQ(store.newest_acked_chain(), 30u);
}

TEST(BuddyStore, TheJobFloorHoldsOlderCommitsOnTheSidesItIsHeldFor) {
  // Files held for a relaunch (group rollback with REPRISE_DIR): the local side keeps the floor's chain, the
  // buddy's memory follows the group's commits alone.
  auto ship = std::make_shared<InProcessShipper>();
  BuddyStore store(core::make_memory_store(), ship);
  store.hold_for_job(true, false);
  for (std::uint64_t v : {10, 20, 30}) {
    put(store, v, v);
    store.set_committed(v);
    if (v > 10) store.release(v - 10);
  }
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10, 20, 30}));  // no floor known yet: every group's may be 10
  EXPECT_EQ(ship->buddy->list(), (std::vector<std::uint64_t>{30}));
  store.set_job_floor(20);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{20, 30}));
  store.set_job_floor(10);  // a late, older floor changes nothing
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{20, 30}));
  store.set_job_floor(40);  // newer than anything here: the group's commit decides
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{30}));

  // Coordinated rollback: both sides; a differential floor keeps its whole chain.
  auto ship2 = std::make_shared<InProcessShipper>();
  BuddyStore both(core::make_memory_store(), ship2);
  both.hold_for_job(true, true);
  put(both, 10, 10);
  put(both, 20, 10);
  put(both, 30, 30);
  both.set_committed(30);
  both.release(10);
  both.release(20);
  both.set_job_floor(20);
  EXPECT_EQ(both.list(), (std::vector<std::uint64_t>{10, 20, 30}));
  EXPECT_EQ(ship2->buddy->list(), (std::vector<std::uint64_t>{10, 20, 30}));
  both.set_job_floor(30);
  EXPECT_EQ(both.list(), (std::vector<std::uint64_t>{30}));
  EXPECT_EQ(ship2->buddy->list(), (std::vector<std::uint64_t>{30}));
  // A run that starts over starts without a floor: nothing goes before the next one.
  both.drop_everything();
  put(both, 10, 10);
  put(both, 20, 20);
  both.set_committed(20);
  both.release(10);
  EXPECT_EQ(both.list(), (std::vector<std::uint64_t>{10, 20}));
}

TEST(BuddyStore, ARecoveryDropsTheAbandonedTimelineAndIgnoresItsLateReleases) {
  auto ship = std::make_shared<InProcessShipper>();
  BuddyStore store(core::make_memory_store(), ship);
  put(store, 10, 10);
  put(store, 20, 10);
  put(store, 30, 30);
  store.release(10);  // deferred: nothing committed
  store.reset_after_recovery(20);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10, 20}));
  store.release(30);  // the runtime drops the abandoned 30 late: it is gone already, nothing is remembered
  put(store, 30, 30);  // the re-execution's 30
  store.release(20);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10, 20, 30}));
  store.set_committed(30);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{30}));  // the deferred 10 and 20 went; the new 30 stays
}

TEST(JobFloor, RisesOnlyWhenEveryGroupReportedAndTheOldestMoved) {
  JobFloor f(3);
  EXPECT_FALSE(f.report(0, 20));
  EXPECT_FALSE(f.report(2, 10));
  EXPECT_EQ(f.report(1, 30), 10u);  // every group reported: the oldest commit
  EXPECT_FALSE(f.report(0, 40));    // group 2 still at 10
  EXPECT_FALSE(f.report(2, 5));     // late and older: ignored
  EXPECT_EQ(f.report(2, 50), 30u);
  EXPECT_FALSE(f.report(7, 90));    // not a group of this layout
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
  EXPECT_FALSE(f.lag());  // once per floor
  EXPECT_EQ(f.report(1, v), v);  // it commits again: the floor rises, and a new lag may be told
  // A group that never reported holds back the first floor.
  JobFloor g(2);
  for (std::uint64_t w = 10; w <= 40; w += 10) g.report(0, w);
  const auto never = g.lag();
  ASSERT_TRUE(never);
  EXPECT_EQ(never->group, 1);
  EXPECT_FALSE(never->committed);
}

TEST(BuddyStore, RecoveryLeavesTheChainOfTheAgreedVersion) {
  auto ship = std::make_shared<InProcessShipper>();
  BuddyStore store(core::make_memory_store(), ship);
  put(store, 10, 10);
  put(store, 20, 10);
  put(store, 30, 20);
  store.release(5);
  store.reset_after_recovery(20);
  EXPECT_EQ(store.committed(), 20u);
  EXPECT_EQ(store.newest_acked_chain(), 20u);
}

TEST(Chains, CompleteVersionsAndChainOf) {
  const std::vector<VersionRecord> r{{10, 10, true}, {20, 10, false}, {40, 30, false}, {50, 50, true}};
  EXPECT_EQ(complete_versions(r), (std::vector<std::uint64_t>{10, 20, 50}));
  EXPECT_EQ(chain_of(r, 20), (std::vector<std::uint64_t>{10, 20}));
  EXPECT_THROW(chain_of(r, 40), RestoreError);
}

// 8 ranks, 2 per node: buddies 0->2, 1->3, ..., 6->0, 7->1.
Layout eight() {
  return make_layout(emulated_node_keys(8, 2), {});
}

std::vector<RankHoldings> holdings_all(const std::vector<VersionRecord>& records) {
  std::vector<RankHoldings> h(8);
  for (auto& x : h) x.own = x.at_buddy = records;
  return h;
}

std::string unrecoverable(const std::vector<int>& failed, const std::vector<RankHoldings>& h, bool files) {
  try {
    plan_recovery(eight(), failed, h, files);
  } catch (const UnrecoverableFailure& e) {
    return e.what();
  }
  return "";
}

TEST(RecoveryPlan, FailedRankComesFromItsBuddyAtTheNewestCommonVersion) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[3].own = {};  // rank 3 failed: nothing of its own
  h[5].own = {{10, 10, true}};  // a survivor that never stored 20
  const RecoveryPlan p = plan_recovery(eight(), {3}, h, false);
  EXPECT_EQ(p.version, 10u);
  EXPECT_EQ(p.failed, (std::vector<int>{3}));
  EXPECT_EQ(p.source[3], DataSource::Buddy);
  EXPECT_EQ(p.source[5], DataSource::Own);
  EXPECT_EQ(p.rolled_back.size(), 8u);
}

TEST(RecoveryPlan, OwnerAndBuddyLostWithoutFilesIsUnrecoverableAndNamesThem) {
  auto h = holdings_all({{10, 10, true}});
  h[0].own = {};
  h[0].at_buddy = {};  // rank 0's buddy, rank 2, failed too
  h[2].own = {};
  const std::string e = unrecoverable({0, 2}, h, false);
  EXPECT_NE(e.find("ranks 0 and 2"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 and its buddy rank 2 were lost together"), std::string::npos) << e;
  EXPECT_NE(e.find("REPRISE_DIR"), std::string::npos) << e;
}

TEST(RecoveryPlan, OwnerAndBuddyLostWithFilesComesFromTheFiles) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[0].at_buddy = {};      // buddy 2 failed
  h[0].own = {{10, 10, true}, {20, 10, false}};  // rank 0's files, read by a survivor
  h[2].own = {};
  const RecoveryPlan p = plan_recovery(eight(), {0, 2}, h, true);
  EXPECT_EQ(p.version, 20u);
  EXPECT_EQ(p.source[0], DataSource::Own);
  EXPECT_EQ(p.source[2], DataSource::Buddy);
}

TEST(RecoveryPlan, IncompleteChainsAreNotRestorable) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}, {30, 20, false}});
  h[4].own = {};
  h[4].at_buddy = {{10, 10, true}, {30, 20, false}};  // 20 never reached rank 4's buddy
  EXPECT_EQ(plan_recovery(eight(), {4}, h, false).version, 10u);
}

TEST(RecoveryPlan, NoCommonVersionIsUnrecoverable) {
  auto h = holdings_all({{10, 10, true}});
  h[1].own = {{20, 20, true}};
  const std::string e = unrecoverable({6}, h, false);
  EXPECT_NE(e.find("unrecoverable failure of rank 6: no version is restorable on every rank (rank 0: 10..10; rank 1: "
                   "20..20; rank 2: 10..10"),
            std::string::npos)
      << e;
  // A relaunch (no failed rank) says what it is itself.
  const std::string relaunch = unrecoverable({}, h, true);
  EXPECT_EQ(relaunch.rfind("no version is restorable on every rank (rank 0: 10..10; rank 1: 20..20", 0), 0u) << relaunch;
}

TEST(RecoveryPlan, FailureBeforeAnyCheckpointReachedTheBuddyStartsOver) {
  // Rank 5's buddy (7) survived and holds nothing of it: rank 5's group never committed, so every rank starts
  // over from its initial state, even though the other ranks hold version 10 locally.
  auto h = holdings_all({{10, 10, true}});
  h[5].own = {};
  h[5].at_buddy = {};
  const RecoveryPlan p = plan_recovery(eight(), {5}, h, false);
  EXPECT_TRUE(p.from_start);
  EXPECT_EQ(p.rolled_back.size(), 8u);
  // An incomplete chain at the buddy counts as nothing.
  h[5].at_buddy = {{20, 10, false}};
  EXPECT_TRUE(plan_recovery(eight(), {5}, h, false).from_start);
  // With a version at the buddy, the normal plan.
  h[5].at_buddy = {{10, 10, true}};
  const RecoveryPlan q = plan_recovery(eight(), {5}, h, false);
  EXPECT_FALSE(q.from_start);
  EXPECT_EQ(q.version, 10u);
  EXPECT_EQ(q.source[5], DataSource::Buddy);
}

TEST(RecoveryPlan, OwnerAndBuddyLostTogetherStartsOverOnlyWhenAnotherFailedRankNeverCommitted) {
  // 0 and its buddy 2 are lost with their data; 5 never committed. Starting over loses nothing committed, so the
  // plan starts over rather than failing the job.
  auto h = holdings_all({{10, 10, true}});
  for (int r : {0, 2, 5}) h[static_cast<std::size_t>(r)].own = {};
  h[0].at_buddy = {};  // its buddy 2 failed
  h[5].at_buddy = {};
  EXPECT_TRUE(plan_recovery(eight(), {0, 2, 5}, h, false).from_start);
  h[5].at_buddy = {{10, 10, true}};
  const std::string e = unrecoverable({0, 2, 5}, h, false);
  EXPECT_NE(e.find("rank 0 and its buddy rank 2 were lost together"), std::string::npos) << e;
}

// Group rollback: each group with a failed rank is planned alone; the others do not roll back.
TEST(GroupRecoveryPlan, OnlyTheFailedGroupRollsBackToItsOwnNewestVersion) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[5].own = {};                                      // rank 5 (group 2 = ranks 4, 5) failed
  h[5].at_buddy = {{10, 10, true}, {20, 10, false}};  // its buddy (7) holds 10 and 20
  h[1].own = {{10, 10, true}};                        // group 0 never took 20: it does not matter here
  const RecoveryPlan p = plan_group_recovery(eight(), {5}, h, false);
  EXPECT_TRUE(p.partial);
  EXPECT_EQ(p.rolled_back, (std::vector<int>{4, 5}));
  EXPECT_EQ(p.version_of[4], 20u);
  EXPECT_EQ(p.version_of[5], 20u);
  EXPECT_EQ(p.source[5], DataSource::Buddy);
  EXPECT_EQ(p.source[4], DataSource::Own);
  EXPECT_FALSE(p.starts_over[5]);
  // The same holdings with every rank rolling back: group 0 limits the common version to 10.
  EXPECT_EQ(plan_recovery(eight(), {5}, h, false).version, 10u);
}

TEST(GroupRecoveryPlan, GroupsArePlannedAloneAndOnlyANeverCommittedGroupStartsOver) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[2].own = {};
  h[2].at_buddy = {{10, 10, true}};  // group 1: 20 never reached rank 2's buddy -> version 10
  h[6].own = {};
  h[6].at_buddy = {};                // group 3: nothing of rank 6 at its surviving buddy -> starts over
  const RecoveryPlan p = plan_group_recovery(eight(), {6, 2}, h, false);
  EXPECT_EQ(p.failed, (std::vector<int>{2, 6}));
  EXPECT_EQ(p.rolled_back, (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(p.version_of[2], 10u);
  EXPECT_EQ(p.version_of[3], 10u);
  EXPECT_FALSE(p.starts_over[3]);
  EXPECT_TRUE(p.starts_over[6]);
  EXPECT_TRUE(p.starts_over[7]);
  EXPECT_FALSE(p.from_start);  // the job as a whole does not start over
}

TEST(GroupRecoveryPlan, AGroupStillReexecutingRollsBackAgain) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[7].own = {};
  h[7].at_buddy = {{10, 10, true}, {20, 10, false}};
  h[2].own = {{10, 10, true}};  // group 1 (ranks 2, 3) rolled back earlier, to 10, and re-executes
  h[3].own = {{10, 10, true}};
  const RecoveryPlan p = plan_group_recovery(eight(), {7}, h, false, {1});
  EXPECT_EQ(p.rolled_back, (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(p.version_of[2], 10u);  // its own newest version again
  EXPECT_EQ(p.version_of[6], 20u);
  EXPECT_FALSE(p.starts_over[2]);
  // A re-executing group that committed nothing since it started over starts over again (nothing is lost).
  h[2].own = h[2].at_buddy = {};
  h[3].own = {{10, 10, true}};  // drained here, not yet at rank 2: never committed
  h[3].at_buddy = {};
  const RecoveryPlan q = plan_group_recovery(eight(), {7}, h, false, {1});
  EXPECT_TRUE(q.starts_over[2]);
  EXPECT_TRUE(q.starts_over[3]);
  EXPECT_FALSE(q.starts_over[6]);
}

// A failure during the data phase of a recovery: the replacement of rank 2 (group 1) had not got its chain back
// from its buddy (rank 4) when rank 7 failed. Group 1 rolls back again (it was still recovering); rank 2's chain
// comes from its buddy again, the other member's from its own store.
TEST(GroupRecoveryPlan, AnInterruptedReplacementGetsItsChainFromItsBuddyAgain) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[2].own = {{10, 10, true}};  // only part of its chain arrived
  h[2].replacing = true;
  h[7].own = {};
  const RecoveryPlan p = plan_group_recovery(eight(), {7}, h, false, {1});
  EXPECT_EQ(p.rolled_back, (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(p.version_of[2], 20u);
  EXPECT_EQ(p.source[2], DataSource::Buddy);  // alive, but it lacks 20
  EXPECT_EQ(p.source[3], DataSource::Own);
  EXPECT_EQ(p.source[7], DataSource::Buddy);
  EXPECT_FALSE(p.starts_over[2]);
  // The same with every rank rolling back.
  const RecoveryPlan q = plan_recovery(eight(), {7}, h, false);
  EXPECT_EQ(q.version, 20u);
  EXPECT_EQ(q.source[2], DataSource::Buddy);
  EXPECT_EQ(q.source[0], DataSource::Own);
}

TEST(GroupRecoveryPlan, AReplacementWhoseBuddyFailedBeforeItGotItsChainIsUnrecoverable) {
  auto h = holdings_all({{10, 10, true}});
  h[2].own = {};  // the replacement of rank 2 had received nothing yet ...
  h[2].replacing = true;
  h[2].at_buddy = {};  // ... when its buddy, rank 4, failed
  h[4].own = {};
  try {
    (void)plan_group_recovery(eight(), {4}, h, false, {1});
    FAIL() << "expected UnrecoverableFailure";
  } catch (const UnrecoverableFailure& e) {
    EXPECT_NE(std::string(e.what()).find("replacement rank 2 had not got its checkpoints back when its buddy rank 4 "
                                         "failed"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("REPRISE_DIR"), std::string::npos) << e.what();
  }
  // With a persistent level, rank 2's files (reported as its own records) bring it back.
  h[2].own = {{10, 10, true}};
  const RecoveryPlan p = plan_group_recovery(eight(), {4}, h, true, {1});
  EXPECT_EQ(p.version_of[2], 10u);
  EXPECT_EQ(p.source[2], DataSource::Own);
}

TEST(GroupRecoveryPlan, AFailedRankWhoseBuddyIsAnInterruptedReplacementIsLost) {
  // Rank 0 failed; its buddy (rank 2) is a replacement that had not received rank 0's versions again: its empty
  // copy proves nothing, so rank 0's data are lost (not "never committed").
  auto h = holdings_all({{10, 10, true}});
  h[2].replacing = true;
  h[0].own = {};
  h[0].at_buddy = {};
  try {
    (void)plan_group_recovery(eight(), {0}, h, false, {1});
    FAIL() << "expected UnrecoverableFailure";
  } catch (const UnrecoverableFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 failed before its buddy rank 2, a replacement, got its checkpoints"),
              std::string::npos)
        << e.what();
  }
  // The same with a buddy that is not recovering: rank 0's group never committed and starts over.
  h[2].replacing = false;
  EXPECT_TRUE(plan_group_recovery(eight(), {0}, h, false, {1}).starts_over[0]);
}

TEST(GroupRecoveryPlan, OwnerAndBuddyLostTogetherIsStillUnrecoverable) {
  auto h = holdings_all({{10, 10, true}});
  h[0].own = {};
  h[0].at_buddy = {};  // rank 0's buddy, rank 2, failed too
  h[2].own = {};
  try {
    (void)plan_group_recovery(eight(), {0, 2}, h, false);
    FAIL() << "expected UnrecoverableFailure";
  } catch (const UnrecoverableFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 and its buddy rank 2 were lost together"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace reprise::coord
