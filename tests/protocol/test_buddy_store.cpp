// The buddy level without MPI: BuddyStore over an in-process shipper, and chain bookkeeping. The same code runs
// over MPI in reprise-stencil's ULFM tests.
#include <gtest/gtest.h>

#include <cstring>

#include "core/format.hpp"
#include "core/version_store.hpp"
#include "protocol/buddy_store.hpp"
#include "reprise/errors.hpp"
#include "support/test_support.hpp"

namespace reprise::protocol {
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
  s.payload = std::make_shared<core::HostBytes>(bytes);
  test::fill_random(s.payload->data(), bytes, v);
  for (std::uint32_t i = 0; i < 4; ++i) {
    r.digests.push_back(core::chunk_digest(r.digest_kind, s.payload->data() + i * std::size_t{4096}, 4096));
    r.chunks.push_back(i);
  }
  s.manifest.regions.push_back(r);
  s.manifest.layout_payload();
  s.sum = core::payload_checksum(s.manifest);
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
  EXPECT_THROW(f.add(9, 1), Error);  // ready twice
  EXPECT_THROW(f.add(9, 5), Error);  // outside the payload
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

// PutStream::on_stored runs once, inside finish(), just before the local store holds the version (the runtime moves
// the version's bytes from versions_in_flight to own_versions there): after the buddy's acknowledgement, also when
// the ship fails, and in the default begin_put before its put().
TEST(BuddyStore, SaysOnceJustBeforeTheLocalStoreHoldsTheVersion) {
  for (const bool up : {true, false}) {
    auto ship = std::make_shared<InProcessShipper>();
    ship->up = up;
    BuddyStore store(core::make_memory_store(), ship);
    Sample x = make_version(10, 10);
    auto put = store.begin_put(x.manifest, x.payload);
    put->ready(0, 16384);
    std::vector<std::size_t> held_then;  // the local store's memory when on_stored ran
    put->on_stored([&] { held_then.push_back(store.memory_bytes()); });
    EXPECT_TRUE(held_then.empty());
    put->finish(x.sum);
    ASSERT_EQ(held_then.size(), 1u) << "up " << up;
    EXPECT_EQ(held_then[0], 0u) << "up " << up;
    EXPECT_GE(store.memory_bytes(), 16384u);
    EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10}));
    EXPECT_EQ(ship->shipped, up ? 1 : 0);
  }
  auto plain = core::make_memory_store();
  Sample x = make_version(10, 10);
  auto p = plain->begin_put(x.manifest, x.payload);
  std::vector<std::size_t> held_then;
  p->on_stored([&] { held_then.push_back(plain->memory_bytes()); });
  p->finish(x.sum);
  EXPECT_EQ(held_then, (std::vector<std::size_t>{0}));
  EXPECT_GE(plain->memory_bytes(), 16384u);
}

// One node with a persistent level: no buddy. A version counts once it is in the files; a new store over the same
// directory (a relaunch) finds it; nothing is said about a buddy.
TEST(BuddyStore, FilesOnlyCountsAVersionOnceItIsInFiles) {
  test::ScratchDir dir;
  {
    BuddyStore store(core::make_directory_store(dir.path(), 0), std::make_shared<FilesOnly>());
    EXPECT_EQ(store.describe().find("buddy"), std::string::npos) << store.describe();
    EXPECT_FALSE(store.newest_acked_chain());
    put(store, 10, 10);
    put(store, 20, 10);
    EXPECT_EQ(store.newest_acked_chain(), 20u);
    store.set_committed(20);
    store.release(10);  // the committed chain's base: kept until a newer commit
    EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10, 20}));
  }
  auto again = core::make_directory_store(dir.path(), 0);
  EXPECT_EQ(again->list(), (std::vector<std::uint64_t>{10, 20}));
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
  store.release(30);   // the runtime drops the abandoned 30 late: it is gone already, nothing is remembered
  put(store, 30, 30);  // the re-execution's 30
  store.release(20);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{10, 20, 30}));
  store.set_committed(30);
  EXPECT_EQ(store.list(), (std::vector<std::uint64_t>{30}));  // the deferred 10 and 20 went; the new 30 stays
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

}  // namespace
}  // namespace reprise::protocol
