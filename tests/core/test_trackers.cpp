#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/device_tracker.hpp"
#include "core/host_tracker.hpp"
#include "core/xxh3.hpp"
#include "kernels/chunk_kernels.hpp"
#include "support/test_support.hpp"

namespace reprise::core {
namespace {

constexpr std::size_t kChunk = 4096;

// The digest of the format is XXH3-64 whatever vector unit computes it: the one chosen on this CPU (AVX2 on
// x86-64 where present) against xxHash's own, built here for the baseline, over the lengths where XXH3 changes
// its algorithm (0, 16, 128, 240 bytes, stripes of 64, blocks of 1 KiB) and at unaligned addresses.
TEST(Xxh3, TheChosenUnitGivesXxhashsValues) {
  std::vector<unsigned char> data((1 << 20) + 3 * 1024 + 77);
  test::fill_random(data.data(), data.size(), 11);
  EXPECT_EQ(xxh3_64(nullptr, 0), 0x2D06800538D394C2ULL);  // XXH3-64 of nothing (xxHash's test vectors)
  std::vector<std::size_t> lengths = {data.size() - 40};
  for (std::size_t edge : {1, 4, 8, 16, 64, 128, 240, 256, 1024, 4096, 65536})
    lengths.insert(lengths.end(), {edge - 1, edge, edge + 1});
  for (std::size_t offset : {0, 1, 8, 33})
    for (std::size_t n : lengths)
      ASSERT_EQ(xxh3_64(data.data() + offset, n), XXH3_64bits(data.data() + offset, n))
          << n << " bytes at offset " << offset << " with " << xxh3_unit();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  EXPECT_STREQ(xxh3_unit(), __builtin_cpu_supports("avx2") ? "avx2" : "baseline");
#endif
}

TEST(HostTracker, ReportsExactlyTheChangedChunks) {
  std::vector<unsigned char> data(10 * kChunk + 100);  // partial last chunk
  test::fill_random(data.data(), data.size(), 7);
  WorkPool pool(2);
  HostTracker t(Region{"d", data.data(), data.size(), MemorySpace::Host, nullptr}, kChunk);
  EXPECT_EQ(t.scan(pool, false).size(), 11u);  // no reference yet: everything
  t.accept();
  EXPECT_TRUE(t.scan(pool, false).empty());
  data[3 * kChunk + 5] ^= 1;
  data[10 * kChunk + 99] ^= 1;
  EXPECT_EQ(t.scan(pool, false), (std::vector<std::uint32_t>{3, 10}));
  EXPECT_EQ(t.scan(pool, true).size(), 11u);
}

TEST(HostTracker, PacksChunksBackToBack) {
  std::vector<unsigned char> data(5 * kChunk + 10);
  test::fill_random(data.data(), data.size(), 8);
  WorkPool pool(2);
  HostTracker t(Region{"d", data.data(), data.size(), MemorySpace::Host, nullptr}, kChunk);
  std::vector<std::byte> out(kChunk + 10);
  t.pack(pool, {1, 5}, out.data());
  EXPECT_EQ(std::memcmp(out.data(), data.data() + kChunk, kChunk), 0);
  EXPECT_EQ(std::memcmp(out.data() + kChunk, data.data() + 5 * kChunk, 10), 0);
}

TEST(DeviceTracker, HostTwinAgreesWithTheSpecification) {
  auto backend = gpu::make_host_twin_backend();
  auto stream = backend->create_stream(false);
  std::vector<unsigned char> data(7 * kChunk + 33);
  test::fill_random(data.data(), data.size(), 9);
  DeviceTracker t(Region{"d", data.data(), data.size(), MemorySpace::Device, nullptr}, kChunk, *backend);
  EXPECT_EQ(t.scan(*stream, false).size(), 8u);
  for (std::uint32_t i = 0; i < 8; ++i)
    EXPECT_EQ(t.digests()[i],
              kernels::lanes64(data.data() + i * kChunk, kernels::chunk_length(data.size(), kChunk, i)));
  t.accept();
  data[2 * kChunk] ^= 0x80;
  data[7 * kChunk + 32] ^= 0x01;
  const auto dirty = t.scan(*stream, false);
  EXPECT_EQ(dirty, (std::vector<std::uint32_t>{2, 7}));
  std::vector<unsigned char> staging(2 * kChunk);
  t.pack(0, 2, staging.data(), *stream);
  backend->synchronize(*stream);  // pack is asynchronous (the host twin runs it only now)
  EXPECT_EQ(std::memcmp(staging.data(), data.data() + 2 * kChunk, kChunk), 0);
  EXPECT_EQ(std::memcmp(staging.data() + kChunk, data.data() + 7 * kChunk, 33), 0);
  // adopt() makes given digests the reference
  t.adopt(t.digests(), *stream);
  EXPECT_TRUE(t.scan(*stream, false).empty());
}

// A followed view swapped for a buffer with almost the same contents: the reference digests stay (they are of
// contents), so only the chunks that differ are dirty, and pack reads the new buffer.
TEST(Trackers, RetargetedKeepTheReferenceAndReadTheNewBuffer) {
  std::vector<unsigned char> a(6 * kChunk + 7);
  test::fill_random(a.data(), a.size(), 10);
  std::vector<unsigned char> b = a;
  b[4 * kChunk + 1] ^= 0x10;
  WorkPool pool(2);
  HostTracker h(Region{"h", a.data(), a.size(), MemorySpace::Host, nullptr}, kChunk);
  h.scan(pool, false);
  h.accept();
  h.retarget(b.data());
  EXPECT_EQ(h.region().data, b.data());
  EXPECT_EQ(h.scan(pool, false), (std::vector<std::uint32_t>{4}));
  std::vector<std::byte> out(kChunk);
  h.pack(pool, {4}, out.data());
  EXPECT_EQ(std::memcmp(out.data(), b.data() + 4 * kChunk, kChunk), 0);

  auto backend = gpu::make_host_twin_backend();
  auto stream = backend->create_stream(false);
  DeviceTracker d(Region{"d", a.data(), a.size(), MemorySpace::Device, nullptr}, kChunk, *backend);
  d.scan(*stream, false);
  d.accept();
  d.retarget(b.data());
  EXPECT_EQ(d.scan(*stream, false), (std::vector<std::uint32_t>{4}));
  std::vector<unsigned char> staging(kChunk);
  d.pack(0, 1, staging.data(), *stream);
  backend->synchronize(*stream);
  EXPECT_EQ(std::memcmp(staging.data(), b.data() + 4 * kChunk, kChunk), 0);
}

}  // namespace
}  // namespace reprise::core
