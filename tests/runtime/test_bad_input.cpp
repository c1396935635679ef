// Damaged and mismatched checkpoints: a clear error naming the file/region/version, protected data untouched,
// older intact versions still restorable.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "core/format.hpp"
#include "core/version_store.hpp"
#include "reprise/reprise.hpp"
#include "support/test_support.hpp"

namespace reprise {
namespace {

constexpr std::size_t kChunk = 4096;
constexpr std::size_t kBytes = 20 * kChunk + 17;

class BadInput : public ::testing::Test {
 protected:
  // Versions 1..6 in a directory, fulls at 1 and 4 (full_every = 3).
  void SetUp() override {
    Runtime rt(config());
    std::vector<unsigned char> data(kBytes);
    test::fill_random(data.data(), data.size(), 11);
    rt.protect("field", data.data(), data.size(), MemorySpace::Host);
    for (int s = 1; s <= 6; ++s) {
      for (std::size_t c = std::size_t(s); c < 21; c += 5) data[c * kChunk] = static_cast<unsigned char>(s);
      rt.checkpoint(std::uint64_t(s));
      expected_.push_back(data);
    }
    rt.wait();
  }
  Config config() const {
    Config c;
    c.dir = dir_.path();
    c.chunk_bytes = kChunk;
    c.full_every = 3;
    c.keep_chains = 5;
    return c;
  }
  std::string file(std::uint64_t v) const { return core::version_file_path(dir_.path(), 0, v); }

  // Restores into a sentinel-filled buffer; checks the buffer is untouched when it throws.
  template <class Fn>
  std::string expect_failure_leaves_data_untouched(Fn&& restore_call, std::size_t bytes = kBytes) {
    Runtime rt(config());
    std::vector<unsigned char> data(bytes, 0xAB);
    rt.protect("field", data.data(), data.size(), MemorySpace::Host);
    std::string message;
    try {
      restore_call(rt);
      ADD_FAILURE() << "restore did not fail";
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_EQ(data, std::vector<unsigned char>(bytes, 0xAB)) << "a failed restore wrote protected data";
    return message;
  }

  // Restores into a fresh runtime and returns the version and data.
  std::pair<std::uint64_t, std::vector<unsigned char>> restore_with(std::optional<std::uint64_t> v) {
    Runtime rt(config());
    std::vector<unsigned char> data(kBytes, 0);
    rt.protect("field", data.data(), data.size(), MemorySpace::Host);
    const std::uint64_t got = v ? rt.restore(*v) : rt.restore();
    return {got, data};
  }

  test::ScratchDir dir_;
  std::vector<std::vector<unsigned char>> expected_;
};

TEST_F(BadInput, SoundDirectoryRestoresEveryVersion) {
  for (std::uint64_t v = 1; v <= 6; ++v) EXPECT_EQ(restore_with(v).second, expected_[v - 1]);
}

TEST_F(BadInput, TruncatedFile) {
  test::truncate_file(file(6), std::filesystem::file_size(file(6)) - 10);
  const std::string msg = expect_failure_leaves_data_untouched([](Runtime& rt) { rt.restore(6); });
  EXPECT_NE(msg.find(file(6)), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  const auto [v, data] = restore_with(std::nullopt);  // falls back to the newest intact version
  EXPECT_EQ(v, 5u);
  EXPECT_EQ(data, expected_[4]);
}

TEST_F(BadInput, FlippedDataByteBreaksThatVersionAndThoseBuiltOnIt) {
  test::flip_byte(file(5), std::filesystem::file_size(file(5)) - 1);
  for (std::uint64_t v : {5, 6}) {
    const std::string msg = expect_failure_leaves_data_untouched([v](Runtime& rt) { rt.restore(v); });
    EXPECT_NE(msg.find(file(5)), std::string::npos) << msg;
    EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  }
  const auto [v, data] = restore_with(std::nullopt);
  EXPECT_EQ(v, 4u);
  EXPECT_EQ(data, expected_[3]);
}

TEST_F(BadInput, FlippedHeaderByte) {
  test::flip_byte(file(6), 20);
  const std::string msg = expect_failure_leaves_data_untouched([](Runtime& rt) { rt.restore(6); });
  EXPECT_NE(msg.find(file(6)), std::string::npos) << msg;
  EXPECT_NE(msg.find("header"), std::string::npos) << msg;
  EXPECT_EQ(restore_with(5).second, expected_[4]);
}

TEST_F(BadInput, FlippedManifestByte) {
  test::flip_byte(file(6), core::kHeaderBytes + 30);
  const std::string msg = expect_failure_leaves_data_untouched([](Runtime& rt) { rt.restore(6); });
  EXPECT_NE(msg.find("manifest"), std::string::npos) << msg;
}

TEST_F(BadInput, MissingVersionInAChain) {
  std::filesystem::remove(file(5));
  const std::string msg = expect_failure_leaves_data_untouched([](Runtime& rt) { rt.restore(6); });
  EXPECT_NE(msg.find("needs version 5"), std::string::npos) << msg;
  const auto [v, data] = restore_with(std::nullopt);
  EXPECT_EQ(v, 4u);
  EXPECT_EQ(data, expected_[3]);
}

TEST_F(BadInput, WrongRegionSizeOnRestore) {
  const std::string msg = expect_failure_leaves_data_untouched([](Runtime& rt) { rt.restore(6); }, kBytes + 8);
  EXPECT_NE(msg.find("'field'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(kBytes + 8) + " bytes now"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(kBytes)), std::string::npos) << msg;
}

TEST_F(BadInput, RegionMissingFromTheCheckpoint) {
  Runtime rt(config());
  std::vector<unsigned char> data(kBytes, 0xAB);
  int extra = 7;
  rt.protect("field", data.data(), data.size(), MemorySpace::Host);
  rt.protect("extra", &extra);
  try {
    rt.restore(6);
    FAIL();
  } catch (const RestoreError& e) {
    EXPECT_NE(std::string(e.what()).find("'extra'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(data, std::vector<unsigned char>(kBytes, 0xAB));
  EXPECT_EQ(extra, 7);
}

TEST_F(BadInput, UnknownFormatVersion) {
  auto bytes = test::read_file(file(6));
  const std::uint32_t future = core::kFormatVersion + 1;
  std::memcpy(bytes.data() + 8, &future, 4);
  const std::uint64_t sum = core::checksum64(bytes.data(), 56);  // a well-formed header of a newer format
  std::memcpy(bytes.data() + 56, &sum, 8);
  test::write_file(file(6), bytes);
  const std::string msg = expect_failure_leaves_data_untouched([](Runtime& rt) { rt.restore(6); });
  EXPECT_NE(msg.find("format version " + std::to_string(future)), std::string::npos) << msg;
  EXPECT_EQ(restore_with(std::nullopt).first, 5u);
}

TEST_F(BadInput, NothingRestorableKeepsTheFiles) {
  for (std::uint64_t v = 1; v <= 6; ++v) test::flip_byte(file(v), 3);
  const std::string msg = expect_failure_leaves_data_untouched([](Runtime& rt) { rt.restore(); });
  EXPECT_NE(msg.find("no restorable version"), std::string::npos) << msg;
  for (std::uint64_t v = 1; v <= 6; ++v) EXPECT_TRUE(std::filesystem::exists(file(v)));
}

}  // namespace
}  // namespace reprise
