#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/device_tracker.hpp"
#include "core/host_tracker.hpp"
#include "kernels/chunk_kernels.hpp"
#include "support/test_support.hpp"

namespace reprise::core {
namespace {

constexpr std::size_t kChunk = 4096;

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
