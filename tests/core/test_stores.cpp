#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/format.hpp"
#include "core/restore.hpp"
#include "core/version_store.hpp"
#include "gpu/backend.hpp"
#include "reprise/errors.hpp"
#include "support/test_support.hpp"

namespace reprise::core {
namespace {

struct Sample {
  Manifest manifest;
  std::shared_ptr<HostBytes> payload;
  std::uint64_t sum;
};

Sample make_version(std::uint64_t v, std::size_t bytes) {
  Sample s;
  s.manifest.version = v;
  s.manifest.base_version = v;
  RegionRecord r;
  r.name = "data";
  r.bytes = bytes;
  r.chunk_bytes = 4096;
  s.payload = std::make_shared<HostBytes>(bytes);
  test::fill_random(s.payload->data(), bytes, v);
  for (std::uint32_t i = 0; i * std::size_t{4096} < bytes; ++i) {
    r.digests.push_back(chunk_digest(r.digest_kind, s.payload->data() + i * std::size_t{4096}, r.chunk_length(i)));
    r.chunks.push_back(i);
  }
  s.manifest.regions.push_back(r);
  s.manifest.layout_payload();
  s.sum = payload_checksum(s.manifest);
  return s;
}

class Stores : public ::testing::TestWithParam<bool> {
 protected:
  std::unique_ptr<VersionStore> make() {
    return GetParam() ? make_directory_store(dir_.path(), 1) : make_memory_store();
  }
  test::ScratchDir dir_;
};

TEST_P(Stores, PutListLoadRelease) {
  auto store = make();
  for (std::uint64_t v : {3, 1, 2}) {
    auto s = make_version(v, 10000 + v);
    store->put(s.manifest, s.payload, s.sum);
  }
  EXPECT_EQ(store->list(), (std::vector<std::uint64_t>{1, 2, 3}));
  const StoredVersion sv = store->load(2);
  EXPECT_EQ(sv.manifest.version, 2u);
  ASSERT_EQ(sv.payload->size(), 10002u);
  const auto expect = make_version(2, 10002);
  EXPECT_EQ(std::memcmp(sv.payload->data(), expect.payload->data(), 10002), 0);
  EXPECT_EQ(store->load_manifest(3).regions[0].bytes, 10003u);
  store->release(2);
  store->release(2);  // absent: no-op
  EXPECT_EQ(store->list(), (std::vector<std::uint64_t>{1, 3}));
  EXPECT_THROW(store->load(2), RestoreError);
}

INSTANTIATE_TEST_SUITE_P(MemoryAndDirectory, Stores, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Directory" : "Memory"; });

TEST(DirectoryStore, LeavesOnlyCompleteFilesAndNamesThemInErrors) {
  test::ScratchDir dir;
  auto store = make_directory_store(dir.path(), 0);
  auto s = make_version(7, 50000);
  store->put(s.manifest, s.payload, s.sum);
  const std::string path = version_file_path(dir.path(), 0, 7);
  std::size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path() + "/rank-0")) {
    ++files;
    EXPECT_EQ(e.path().string(), path);
  }
  EXPECT_EQ(files, 1u);
  test::flip_byte(path, std::filesystem::file_size(path) - 100);
  try {
    store->load(7);
    FAIL();
  } catch (const CorruptCheckpointError& e) {
    EXPECT_EQ(e.where(), path);
    EXPECT_NE(std::string(e.what()).find("payload checksum"), std::string::npos);
  }
  EXPECT_NO_THROW(store->load_manifest(7));  // the manifest itself is intact
  // REPRISE_VERIFY_RESTORE=0: no pass over the payload, the damaged byte comes back as it is.
  const StoredVersion unchecked = store->load(7, PayloadCheck::None);
  EXPECT_NE(std::memcmp(unchecked.payload->data(), s.payload->data(), 50000), 0);
  test::truncate_file(path, 1000);
  EXPECT_THROW(store->load_manifest(7), CorruptCheckpointError);
}

TEST(DirectoryStore, RemovesStaleTemporaryFiles) {
  test::ScratchDir dir;
  { auto store = make_directory_store(dir.path(), 2); }
  const std::string stale = dir.path() + "/rank-2/version-000000000001.reprise.tmp.999";
  test::write_file(stale, {'x'});
  auto store = make_directory_store(dir.path(), 2);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(store->list().empty());
}

TEST(DirectoryStore, UnwritableDirectoryIsAClearError) {
  if (::geteuid() == 0) {
    // root ignores permissions: use a path under a regular file instead
    test::ScratchDir dir;
    test::write_file(dir.path() + "/file", {'x'});
    EXPECT_THROW(make_directory_store(dir.path() + "/file/sub", 0), StoreError);
    return;
  }
  EXPECT_THROW(make_directory_store("/proc/reprise-cannot-write-here", 0), StoreError);
}

TEST(DirectoryStore, JobRecordKeepsTheRankCountAndNamesADamagedOne) {
  test::ScratchDir dir;
  EXPECT_EQ(read_job_ranks(dir.path()), std::nullopt);
  write_job_ranks(dir.path(), 12);
  EXPECT_EQ(read_job_ranks(dir.path()), 12);
  write_job_ranks(dir.path(), 4);  // replaced whole
  EXPECT_EQ(read_job_ranks(dir.path()), 4);
  // A flipped digit, a truncated record: told apart by the checksum line.
  const std::vector<char> raw = test::read_file(dir.path() + "/job.reprise");
  const std::string good(raw.begin(), raw.end());
  ASSERT_EQ(good.rfind("reprise job\nranks 4\nchecksum ", 0), 0u) << good;
  std::string flipped = good;
  flipped[18] = '5';  // ranks 5
  for (const std::string& bad : {flipped, good.substr(0, good.size() - 3)}) {
    test::write_file(dir.path() + "/job.reprise", std::vector<char>(bad.begin(), bad.end()));
    EXPECT_THROW(read_job_ranks(dir.path()), CorruptCheckpointError) << bad;
  }
  const std::string two_lines = "reprise job\nranks 3\n";
  test::write_file(dir.path() + "/job.reprise", std::vector<char>(two_lines.begin(), two_lines.end()));
  EXPECT_EQ(read_job_ranks(dir.path()), 3);  // a record written before the checksum line existed
  for (const std::string bad :
       {"reprise job\nranks 0\n", "reprise job\nranks four\n", "ranks 4\n", "reprise job\nranks 4\nmore\n", ""}) {
    test::write_file(dir.path() + "/job.reprise", std::vector<char>(bad.begin(), bad.end()));
    try {
      read_job_ranks(dir.path());
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const CorruptCheckpointError& e) {
      EXPECT_EQ(e.where(), dir.path() + "/job.reprise");
      EXPECT_NE(std::string(e.what()).find("not a Reprise job record"), std::string::npos) << e.what();
    }
  }
}

TEST(DirectoryStore, SetAsideMovesEveryVersionAndDeletesNothing) {
  test::ScratchDir dir;
  auto store = make_directory_store(dir.path(), 3);
  for (std::uint64_t v : {10, 20}) {
    auto s = make_version(v, 1000);
    store->put(s.manifest, s.payload, s.sum);
  }
  EXPECT_EQ(next_set_aside(dir.path(), 3), 1);
  EXPECT_EQ(set_aside(dir.path(), 3, 1), dir.path() + "/previous-1/rank-3");
  EXPECT_TRUE(store->list().empty());  // the rank's folder is there again, empty
  EXPECT_EQ(make_directory_store(dir.path() + "/previous-1", 3)->list(), (std::vector<std::uint64_t>{10, 20}));
  EXPECT_NO_THROW(make_directory_store(dir.path() + "/previous-1", 3)->load(20));
  EXPECT_EQ(next_set_aside(dir.path(), 3), 2);
  EXPECT_EQ(next_set_aside(dir.path(), 0), 1);  // per rank: another rank's set-aside does not count
  auto s = make_version(30, 1000);
  store->put(s.manifest, s.payload, s.sum);
  set_aside(dir.path(), 3, 2);
  EXPECT_EQ(make_directory_store(dir.path() + "/previous-2", 3)->list(), (std::vector<std::uint64_t>{30}));
  EXPECT_THROW(set_aside(dir.path(), 3, 1), StoreError);  // previous-1/rank-3 is taken: never overwritten
  EXPECT_EQ(make_directory_store(dir.path() + "/previous-1", 3)->list(), (std::vector<std::uint64_t>{10, 20}));
}

TEST(DirectoryStore, SetAsideNewerMovesOnlyLaterVersions) {
  test::ScratchDir dir;
  auto store = make_directory_store(dir.path(), 1);
  for (std::uint64_t v : {10, 20, 30, 40}) {
    auto s = make_version(v, 1000);
    store->put(s.manifest, s.payload, s.sum);
  }
  EXPECT_TRUE(set_aside_newer(dir.path(), 1, 1, 40).empty());
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/previous-1"));  // nothing to move: nothing made
  EXPECT_EQ(set_aside_newer(dir.path(), 1, 1, 20), (std::vector<std::uint64_t>{30, 40}));
  EXPECT_EQ(store->list(), (std::vector<std::uint64_t>{10, 20}));
  EXPECT_EQ(make_directory_store(dir.path() + "/previous-1", 1)->list(), (std::vector<std::uint64_t>{30, 40}));
  EXPECT_NO_THROW(make_directory_store(dir.path() + "/previous-1", 1)->load(40));
  auto s = make_version(30, 1000);
  store->put(s.manifest, s.payload, s.sum);
  EXPECT_THROW(set_aside_newer(dir.path(), 1, 1, 20), StoreError);  // previous-1 holds a 30 already
  EXPECT_EQ(store->list(), (std::vector<std::uint64_t>{10, 20, 30}));
}

// The files level of a write-behind store, held shut by the test: put() blocks until open() (or fails when told).
class GatedStore final : public VersionStore {
 public:
  explicit GatedStore(std::unique_ptr<VersionStore> inner) : inner_(std::move(inner)) {}
  void open() {
    const std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  void fail_next() {
    const std::lock_guard<std::mutex> lock(mutex_);
    fail_ = true;
    cv_.notify_all();  // (a writer may already wait in put())
  }
  std::string describe() const override { return "gated " + inner_->describe(); }
  std::string locate(std::uint64_t v) const override { return inner_->locate(v); }
  // Until the writer waits in put() (or went through it).
  void wait_entered() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return entered_ > 0; });
  }
  void put(const Manifest& m, std::shared_ptr<const HostBytes> p, std::uint64_t sum) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++entered_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_ || fail_; });
      if (fail_) throw StoreError("cannot write " + locate(m.version) + ": No space left on device (disk full?)");
    }
    inner_->put(m, std::move(p), sum);
  }
  std::vector<std::uint64_t> list() const override { return inner_->list(); }
  Manifest load_manifest(std::uint64_t v) const override { return inner_->load_manifest(v); }
  StoredVersion load(std::uint64_t v, PayloadCheck check) const override { return inner_->load(v, check); }
  void release(std::uint64_t v) override { inner_->release(v); }

 private:
  std::unique_ptr<VersionStore> inner_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false, fail_ = false;
  int entered_ = 0;
};

// A write-behind store over a GatedStore on a scratch directory: the tests of a writer that lags.
struct LaggingWriter {
  LaggingWriter(int rank, std::size_t max_pending) : rank(rank) {
    auto gated = std::make_unique<GatedStore>(make_directory_store(dir.path(), rank));
    gate = gated.get();
    store = make_write_behind_store(std::move(gated), max_pending);
  }
  void put(const Sample& s) { store->put(s.manifest, s.payload, s.sum); }
  std::vector<std::uint64_t> files() const { return make_directory_store(dir.path(), rank)->list(); }
  test::ScratchDir dir;
  int rank;
  GatedStore* gate = nullptr;
  std::unique_ptr<VersionStore> store;  // (destroyed first: it writes what is pending)
};

TEST(WriteBehindStore, PutReturnsBeforeTheFilesHoldTheVersion) {
  test::ScratchDir dir;
  auto gated = std::make_unique<GatedStore>(make_directory_store(dir.path(), 2));
  GatedStore& gate = *gated;
  auto store = make_write_behind_store(std::move(gated));
  const auto s = make_version(10, 5000);
  store->put(s.manifest, s.payload, s.sum);  // returns with the files shut
  EXPECT_EQ(store->list(), (std::vector<std::uint64_t>{10}));
  EXPECT_EQ(store->load(10).payload->size(), 5000u);  // from memory
  EXPECT_TRUE(make_directory_store(dir.path(), 2)->list().empty());
  EXPECT_EQ(store->written_through(), std::optional<std::int64_t>(-1));
  gate.open();
  store->flush();
  EXPECT_EQ(store->written_through(), std::optional<std::int64_t>(10));
  EXPECT_EQ(make_directory_store(dir.path(), 2)->list(), (std::vector<std::uint64_t>{10}));
  EXPECT_EQ(make_memory_store()->written_through(), std::nullopt);  // a store whose put is complete at return
}

TEST(WriteBehindStore, WaitsForTheDiskOnlyBeyondMaxPending) {
  test::ScratchDir dir;
  auto gated = std::make_unique<GatedStore>(make_directory_store(dir.path(), 0));
  GatedStore& gate = *gated;
  auto store = make_write_behind_store(std::move(gated), 1);
  const auto a = make_version(10, 1000), b = make_version(20, 1000), c = make_version(30, 1000);
  store->put(a.manifest, a.payload, a.sum);  // taken by the writer (blocked in the gate) or pending
  std::atomic<int> returned{0};
  std::thread t([&] {
    store->put(b.manifest, b.payload, b.sum);
    store->put(c.manifest, c.payload, c.sum);  // two pending at least: waits
    returned = 1;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(returned.load(), 0) << "put() returned with more than max_pending versions unwritten";
  gate.open();
  t.join();
  store->flush();
  EXPECT_EQ(make_directory_store(dir.path(), 0)->list(), (std::vector<std::uint64_t>{10, 20, 30}));
  EXPECT_EQ(store->written_through(), std::optional<std::int64_t>(30));
}

TEST(WriteBehindStore, ReleasesReachTheFilesAndAQueuedVersionIsNeverWritten) {
  test::ScratchDir dir;
  auto gated = std::make_unique<GatedStore>(make_directory_store(dir.path(), 1));
  GatedStore& gate = *gated;
  auto store = make_write_behind_store(std::move(gated), 4);
  for (std::uint64_t v : {10, 20, 30}) {
    const auto s = make_version(v, 1000);
    store->put(s.manifest, s.payload, s.sum);
  }
  store->release(30);  // still queued (10 is in the gate): dropped
  gate.open();
  store->flush();
  EXPECT_EQ(make_directory_store(dir.path(), 1)->list(), (std::vector<std::uint64_t>{10, 20}));
  EXPECT_EQ(store->written_through(), std::optional<std::int64_t>(20));
  store->release(10);  // gone from memory at once, its file in the background
  store->flush();
  EXPECT_EQ(make_directory_store(dir.path(), 1)->list(), (std::vector<std::uint64_t>{20}));
  store->release(20);  // the newest written, as when a rollback abandons it: nothing counts as written
  EXPECT_EQ(store->written_through(), std::optional<std::int64_t>(-1));
  store->flush();
  EXPECT_TRUE(store->list().empty());
  const auto again = make_version(20, 1000);  // the same number put again after its release: written again
  store->put(again.manifest, again.payload, again.sum);
  store->release(20);
  store->put(again.manifest, again.payload, again.sum);
  store->flush();
  EXPECT_EQ(make_directory_store(dir.path(), 1)->list(), (std::vector<std::uint64_t>{20}));
}

TEST(WriteBehindStore, AFailedWriteIsReportedByTheNextPutAndFlush) {
  test::ScratchDir dir;
  auto gated = std::make_unique<GatedStore>(make_directory_store(dir.path(), 1));
  GatedStore& gate = *gated;
  auto store = make_write_behind_store(std::move(gated));
  const auto a = make_version(10, 1000), b = make_version(20, 1000);
  store->put(a.manifest, a.payload, a.sum);
  gate.fail_next();
  try {
    store->flush();
    FAIL() << "flush() did not report the failed write";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("REPRISE_DIR"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("disk full"), std::string::npos) << e.what();
  }
  EXPECT_THROW(store->put(b.manifest, b.payload, b.sum), StoreError);
  EXPECT_EQ(store->load(10).payload->size(), 1000u);  // the memory level keeps it
}

TEST(WriteBehindStore, ARelaunchFindsWhatWasWritten) {
  test::ScratchDir dir;
  {
    auto store = make_write_behind_store(make_directory_store(dir.path(), 3));
    for (std::uint64_t v : {10, 20}) {
      const auto s = make_version(v, 3000 + v);
      store->put(s.manifest, s.payload, s.sum);
    }
  }  // the destructor writes what is pending
  auto again = make_write_behind_store(make_directory_store(dir.path(), 3));
  EXPECT_EQ(again->list(), (std::vector<std::uint64_t>{10, 20}));
  const auto expect = make_version(20, 3020);
  const StoredVersion sv = again->load(20);  // from the file
  ASSERT_EQ(sv.payload->size(), 3020u);
  EXPECT_EQ(std::memcmp(sv.payload->data(), expect.payload->data(), 3020), 0);
  EXPECT_EQ(again->load_manifest(10).version, 10u);
}

// A differential version on `base` (the writer's skips look only at the kind).
Sample make_differential(std::uint64_t v, std::uint64_t base, std::size_t bytes) {
  Sample s = make_version(v, bytes);
  s.manifest.kind = VersionKind::Differential;
  s.manifest.base_version = base;
  s.manifest.chain_index = 1;
  return s;
}

// A writer that lags, once the job gave a mark: the versions waiting in front of a newer full version are never
// written (the full one takes their place), except the pin (the first version at or after the mark), and what was
// skipped is reported; put() then returns without waiting for the disk.
TEST(WriteBehindStore, ALaggingWriterSkipsToANewerFullVersionButWritesThePin) {
  LaggingWriter w(4, 8);
  w.put(make_version(10, 1000));
  w.gate->wait_entered();  // the writer has 10 and waits in the gate
  w.put(make_differential(20, 10, 1000));
  w.put(make_differential(30, 20, 1000));
  w.put(make_version(40, 1000));
  EXPECT_EQ(w.store->files_progress()->skipped_total, 0u) << "skipped before the job gave a mark";
  w.store->set_pin_mark(35);  // the pin: 40 (the first at or after 35), never skipped
  w.put(make_differential(50, 40, 1000));
  w.put(make_version(60, 1000));
  w.put(make_differential(70, 60, 1000));
  w.gate->open();
  w.store->flush();
  // 20 and 30 made way for 40 (a full one, also the pin); 50 for 60 once the pin was written or being written;
  // 60 went into 70's file (built on it, right behind it), a full version then.
  const auto files = make_directory_store(w.dir.path(), 4);
  EXPECT_EQ(files->list(), (std::vector<std::uint64_t>{10, 40, 70}));
  const StoredVersion v70 = files->load(70);
  EXPECT_EQ(v70.manifest.kind, VersionKind::Full);
  const Sample expect70 = make_differential(70, 60, 1000);
  EXPECT_EQ(std::memcmp(v70.payload->data(), expect70.payload->data(), 1000), 0);
  FilesProgress p = *w.store->files_progress();
  EXPECT_EQ(p.written, 70);
  EXPECT_EQ(p.skipped_oldest, 20u);
  EXPECT_EQ(p.skipped_newest, 60u);
  EXPECT_EQ(p.skipped_total, 4u);
  EXPECT_EQ(p.pin, std::optional<std::uint64_t>(40));
  EXPECT_EQ(w.store->list(), (std::vector<std::uint64_t>{10, 20, 30, 40, 50, 60, 70}));  // all still in memory
  // Released (below the job floor), a skipped version leaves the span; the pin, the pin.
  w.store->release(20);
  w.store->release(30);
  w.store->release(40);
  p = *w.store->files_progress();
  EXPECT_EQ(p.skipped_oldest, 50u);
  EXPECT_EQ(p.skipped_newest, 60u);
  EXPECT_EQ(p.pin, std::nullopt);
  w.store->release(50);
  w.store->release(60);
  EXPECT_EQ(w.store->files_progress()->skipped_oldest, UINT64_MAX);
  EXPECT_EQ(w.store->files_progress()->skipped_newest, 0u);
}

// A region of four 4096-byte chunks whose chunk c holds `image[c]` everywhere; the version stores `stored`.
Sample chunk_version(std::uint64_t v, const std::vector<std::uint8_t>& image, std::vector<std::uint32_t> stored,
                     std::uint64_t base) {
  Sample s;
  s.manifest.version = v;
  s.manifest.base_version = base;
  s.manifest.kind = base == v ? VersionKind::Full : VersionKind::Differential;
  RegionRecord r;
  r.name = "data";
  r.bytes = 4 * 4096;
  r.chunk_bytes = 4096;
  std::vector<std::byte> all(r.bytes);
  for (std::size_t c = 0; c < 4; ++c) std::memset(all.data() + c * 4096, image[c], 4096);
  for (std::uint32_t c = 0; c < 4; ++c) r.digests.push_back(chunk_digest(r.digest_kind, all.data() + c * 4096, 4096));
  r.chunks = std::move(stored);
  s.payload = std::make_shared<HostBytes>(r.chunks.size() * 4096);
  for (std::size_t i = 0; i < r.chunks.size(); ++i)
    std::memcpy(s.payload->data() + i * 4096, all.data() + r.chunks[i] * 4096, 4096);
  s.manifest.regions.push_back(r);
  s.manifest.layout_payload();
  s.sum = payload_checksum(s.manifest);
  return s;
}

// What a writer that skips puts in one file: the run's chunks, each from the newest version that stored it.
TEST(MergeChainRun, TheNewestBytesOfEveryChunkTheRunStored) {
  const Sample f10 = chunk_version(10, {1, 2, 3, 4}, {0, 1, 2, 3}, 10);
  const Sample d20 = chunk_version(20, {1, 5, 3, 4}, {1}, 10);
  const Sample d30 = chunk_version(30, {1, 6, 7, 4}, {1, 2}, 20);
  const auto stored = [](const Sample& s) { return StoredVersion{s.manifest, s.payload, {}}; };
  // d20 + d30: a differential version on 10 with chunks 1 (d30's) and 2.
  const StoredVersion diff = merge_chain_run({stored(d20), stored(d30)});
  EXPECT_EQ(diff.manifest.version, 30u);
  EXPECT_EQ(diff.manifest.kind, VersionKind::Differential);
  EXPECT_EQ(diff.manifest.base_version, 10u);
  EXPECT_EQ(diff.manifest.regions[0].chunks, (std::vector<std::uint32_t>{1, 2}));
  EXPECT_EQ(diff.manifest.regions[0].digests, d30.manifest.regions[0].digests);
  ASSERT_EQ(diff.payload->size(), 2u * 4096);
  EXPECT_EQ(std::to_integer<int>(diff.payload->data()[0]), 6);
  EXPECT_EQ(std::to_integer<int>(diff.payload->data()[4096]), 7);
  // From the full version: a full version 30, every chunk as at 30, checked like any stored version.
  const StoredVersion full = merge_chain_run({stored(f10), stored(d20), stored(d30)});
  EXPECT_EQ(full.manifest.kind, VersionKind::Full);
  EXPECT_EQ(full.manifest.base_version, 30u);
  test::ScratchDir dir;
  auto files = make_directory_store(dir.path(), 0);
  files->put(full.manifest, full.payload, payload_checksum(full.manifest));
  const StoredVersion back = files->load(30);  // every chunk checked against its digest
  const std::vector<int> at30{1, 6, 7, 4};
  for (int c = 0; c < 4; ++c) EXPECT_EQ(std::to_integer<int>(back.payload->data()[c * 4096]), at30[c]) << c;
  EXPECT_THROW(merge_chain_run({stored(f10), stored(d30)}), std::invalid_argument);  // 30 is not built on 10
}

// Format 3: a full version may leave chunks out (the room of a runtime region); they read as zeros, their digest is
// 0, and a left-out chunk with another digest is refused. Restores zero them in host and (host twin) device regions
// whatever the region held; a differential version on it and a merged run keep them out.
TEST(FullVersion, ChunksItLeavesOutReadAsZeros) {
  const auto left_out = [](Sample s, std::initializer_list<std::uint32_t> out) {
    for (std::uint32_t c : out) s.manifest.regions[0].digests[c] = 0;
    s.sum = payload_checksum(s.manifest);
    return s;
  };
  const Sample f10 = left_out(chunk_version(10, {1, 2, 0, 0}, {0, 1}, 10), {2, 3});
  Sample d20 = left_out(chunk_version(20, {1, 5, 0, 9}, {1, 3}, 10), {2});
  d20.manifest.chain_index = 1;
  test::ScratchDir dir;
  auto files = make_directory_store(dir.path(), 0);
  files->put(f10.manifest, f10.payload, f10.sum);
  files->put(d20.manifest, d20.payload, d20.sum);
  for (const auto kind : {MemorySpace::Host, MemorySpace::Device}) {
    for (const std::uint64_t v : {10u, 20u}) {
      RestoreChain chain = load_chain(*files, v);  // every stored chunk checked against its digest
      std::vector<std::byte> data(4 * 4096, std::byte{0xab});
      std::vector<Region> regions{Region{"data", data.data(), data.size(), kind, nullptr}};
      for (StoredVersion& sv : chain.versions) sv.manifest.regions[0].space = kind;
      verify_chain(chain, regions);
      const auto backend = gpu::make_backend(DeviceBackendKind::HostTwin, "the test");
      apply_chain(chain, regions, kind == MemorySpace::Device ? backend.get() : nullptr, 4096);
      const std::vector<int> want = v == 10 ? std::vector<int>{1, 2, 0, 0} : std::vector<int>{1, 5, 0, 9};
      for (int c = 0; c < 4; ++c)
        for (const std::size_t at : {std::size_t{0}, std::size_t{4095}})
          EXPECT_EQ(std::to_integer<int>(data[c * 4096 + at]), want[c])
              << to_string(kind) << " version " << v << " chunk " << c;
    }
  }
  const auto stored = [](const Sample& s) { return StoredVersion{s.manifest, s.payload, {}}; };
  const StoredVersion merged = merge_chain_run({stored(f10), stored(d20)});
  EXPECT_EQ(merged.manifest.kind, VersionKind::Full);
  EXPECT_EQ(merged.manifest.regions[0].chunks, (std::vector<std::uint32_t>{0, 1, 3}));
  test::ScratchDir dir2;
  auto merged_files = make_directory_store(dir2.path(), 0);
  merged_files->put(merged.manifest, merged.payload, payload_checksum(merged.manifest));
  EXPECT_EQ(merged_files->load(20).manifest.regions[0].chunks, (std::vector<std::uint32_t>{0, 1, 3}));
  // A left-out chunk whose digest is not 0 is damage, not room.
  Manifest bad = f10.manifest;
  bad.regions[0].digests[3] = 12345;
  const auto bytes = encode_manifest(bad);
  try {
    decode_manifest(bytes.data(), bytes.size(), "v10");
    FAIL() << "a left-out chunk with a digest was accepted";
  } catch (const CorruptCheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("chunk 3 is left out of a full version"), std::string::npos) << e.what();
  }
}

// Differential versions waiting one behind the other go into one file: the files' chain is built on what was
// written (positions moved down), and restores to the same bytes.
TEST(WriteBehindStore, VersionsOfOneChainThatWaitGoIntoOneFile) {
  LaggingWriter w(6, 8);
  std::vector<Sample> v{chunk_version(10, {1, 2, 3, 4}, {0, 1, 2, 3}, 10), chunk_version(20, {1, 5, 3, 4}, {1}, 10),
                        chunk_version(30, {1, 5, 7, 4}, {2}, 20), chunk_version(40, {9, 5, 7, 4}, {0}, 30),
                        chunk_version(50, {9, 5, 7, 8}, {3}, 40)};
  for (std::uint32_t k = 0; k < v.size(); ++k) v[k].manifest.chain_index = k;
  w.store->set_pin_mark(1000);  // no pin among them
  w.put(v[0]);
  w.gate->wait_entered();
  w.put(v[1]);
  w.put(v[2]);
  w.put(v[3]);  // 20 and 30 go into 40's file
  w.gate->open();
  w.store->flush();
  w.put(v[4]);
  w.store->flush();
  const auto files = make_directory_store(w.dir.path(), 6);
  EXPECT_EQ(files->list(), (std::vector<std::uint64_t>{10, 40, 50}));
  const Manifest m40 = files->load_manifest(40), m50 = files->load_manifest(50);
  EXPECT_EQ(m40.base_version, 10u);
  EXPECT_EQ(m40.chain_index, 1u);
  EXPECT_EQ(m40.regions[0].chunks, (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_EQ(m50.base_version, 40u);
  EXPECT_EQ(m50.chain_index, 2u);  // (3 in memory: the files lack two positions)
  const RestoreChain chain = load_chain(*files, 50, PayloadCheck::Chunks);
  ASSERT_EQ(chain.versions.size(), 3u);
  // The bytes at 50: each chunk from the newest file of the chain that stored it.
  const std::vector<int> at50{9, 5, 7, 8};
  for (std::uint32_t c = 0; c < 4; ++c) {
    int byte = -1;
    for (const StoredVersion& sv : chain.versions) {
      const RegionRecord& r = sv.manifest.regions[0];
      for (std::size_t i = 0; i < r.chunks.size(); ++i)
        if (r.chunks[i] == c) byte = std::to_integer<int>(sv.payload->data()[r.payload_offset + i * 4096]);
    }
    EXPECT_EQ(byte, at50[c]) << "chunk " << c;
  }
  EXPECT_EQ(w.store->files_progress()->skipped_total, 2u);
}

// The pin is written even when a newer full version waits behind it, and a mark never goes back.
TEST(WriteBehindStore, ThePinIsNeverSkippedAndPutReturnsWhenOthersAre) {
  LaggingWriter w(5, 3);
  w.store->set_pin_mark(25);
  w.store->set_pin_mark(5);  // lower: changes nothing (else 10 would be the pin)
  w.put(make_version(10, 1000));
  w.gate->wait_entered();
  w.put(make_differential(20, 10, 1000));
  w.put(make_version(30, 1000));  // the pin: 20 makes way for it
  w.put(make_differential(40, 30, 1000));
  w.put(make_differential(50, 40, 1000));  // 3 waiting: the pin in front, nothing newer to make way for
  std::atomic<bool> returned{false};
  std::thread t([&] {
    w.put(make_version(60, 1000));  // 40 and 50 make way, behind the pin: w.put() returns with the disk still shut
    w.put(make_version(70, 1000));  // and 60
    returned = true;
  });
  for (int i = 0; i < 200 && !returned; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(returned.load()) << "w.put() waited for the disk although older versions could be skipped";
  w.gate->open();
  t.join();
  w.store->flush();
  EXPECT_EQ(w.files(), (std::vector<std::uint64_t>{10, 30, 70}));
  EXPECT_EQ(w.store->files_progress()->pin, std::optional<std::uint64_t>(30));
  EXPECT_EQ(w.store->files_progress()->skipped_total, 4u);  // 20, 40, 50, 60
}

// Over the memory budget (pause_skips) nothing is skipped: put() waits for the disk again, until the pause ends.
TEST(WriteBehindStore, APausedWriterSkipsNothingAndPutWaitsForTheDisk) {
  LaggingWriter w(7, 2);
  w.store->set_pin_mark(5);
  w.put(make_version(10, 1000));  // the pin, in the gate
  w.gate->wait_entered();
  w.store->pause_skips(true);
  w.put(make_version(20, 1000));
  w.put(make_version(30, 1000));  // 2 waiting: nothing skipped while paused
  EXPECT_EQ(w.store->files_progress()->skipped_total, 0u);
  std::atomic<bool> returned{false};
  std::thread t([&] {
    w.put(make_version(40, 1000));  // 3 waiting: waits
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(returned.load()) << "w.put() returned with more than max_pending versions unwritten while paused";
  w.store->pause_skips(false);  // 20 and 30 make way for 40: w.put() returns, the disk still shut
  for (int i = 0; i < 200 && !returned; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(returned.load());
  w.gate->open();
  t.join();
  w.store->flush();
  EXPECT_EQ(w.files(), (std::vector<std::uint64_t>{10, 40}));
}

// Failure injection (REPRISE_KILL's stall_files): from the held version on nothing reaches the files, the versions
// stay in memory, and flush() and the destructor do not wait for what is held.
TEST(WriteBehindStore, AHeldVersionAndThoseAfterItAreNeverWritten) {
  test::ScratchDir dir;
  {
    auto store = make_write_behind_store(make_directory_store(dir.path(), 3), 2, 20);
    for (std::uint64_t v : {10, 20, 30}) {
      const auto s = make_version(v, 3000 + v);
      store->put(s.manifest, s.payload, s.sum);
    }
    store->flush();
    EXPECT_EQ(store->written_through(), std::optional<std::int64_t>(10));
    EXPECT_EQ(store->list(), (std::vector<std::uint64_t>{10, 20, 30}));  // (20 and 30 in memory)
  }
  EXPECT_EQ(make_directory_store(dir.path(), 3)->list(), (std::vector<std::uint64_t>{10}));
}

}  // namespace
}  // namespace reprise::core
