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

}  // namespace
}  // namespace reprise::core
