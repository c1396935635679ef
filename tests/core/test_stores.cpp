#include <gtest/gtest.h>

#include <filesystem>

#include "core/format.hpp"
#include "core/version_store.hpp"
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
  r.digests.assign((bytes + 4095) / 4096, 0);
  for (std::uint32_t i = 0; i < r.digests.size(); ++i) r.chunks.push_back(i);
  s.manifest.regions.push_back(r);
  s.manifest.layout_payload();
  s.payload = std::make_shared<HostBytes>(bytes);
  test::fill_random(s.payload->data(), bytes, v);
  s.sum = payload_checksum(s.payload->data(), bytes);
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

}  // namespace
}  // namespace reprise::core
