// The chunk kernels' host twins against a literal transcription of the Lanes64 specification, their known
// properties, pinned golden values, and the device data path through the host-twin backend.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend_round_trip.hpp"
#include "gpu/backend.hpp"
#include "kernels/chunk_kernels.hpp"

namespace reprise::kernels {
namespace {

// The specification in chunk_kernels.hpp, word for word: slow and obviously right.
std::uint64_t lanes64_reference(const unsigned char* data, std::size_t len) {
  const std::uint64_t P1 = 0x9E3779B185EBCA87ULL, P2 = 0xC2B2AE3D27D4EB4FULL, P3 = 0x165667B19E3779F9ULL,
                      P4 = 0x85EBCA77C2B2AE63ULL, P5 = 0x27D4EB2F165667C5ULL;
  auto rotl = [](std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  auto round = [&](std::uint64_t a, std::uint64_t w) { return rotl(a + w * P2, 31) * P1; };
  std::vector<std::uint64_t> acc(256);
  for (unsigned l = 0; l < 256; ++l) acc[l] = (l + 1) * P5;
  const std::size_t units = (len + 15) / 16;
  for (unsigned l = 0; l < 256; ++l)
    for (std::size_t u = l; u < units; u += 256) {
      std::uint64_t w[2] = {0, 0};
      for (int b = 0; b < 16; ++b)
        if (u * 16 + b < len) w[b / 8] |= std::uint64_t(data[u * 16 + b]) << (8 * (b % 8));
      acc[l] = round(acc[l], w[0]);
      acc[l] = round(acc[l], w[1]);
    }
  std::uint64_t h = len * P5;
  for (unsigned g = 0; g < 32; ++g) {
    std::uint64_t hg = 0;
    for (unsigned l = 8 * g; l < 8 * g + 8; ++l) hg = (hg ^ round(0, acc[l])) * P1 + P4;
    h = (h ^ round(0, hg)) * P1 + P4;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

TEST(Lanes64, HostTwinMatchesTheSpecification) {
  const auto data = random_bytes(200000, 1);
  std::mt19937_64 rng(2);
  std::vector<std::size_t> lengths = {0, 1, 15, 16, 17, 255, 4095, 4096, 4097, 65536, 65537, 200000};
  for (int k = 0; k < 40; ++k) lengths.push_back(rng() % 200000);
  for (std::size_t len : lengths)
    for (std::size_t offset : {0, 3}) {
      if (offset + len > data.size()) continue;
      ASSERT_EQ(lanes64(data.data() + offset, len), lanes64_reference(data.data() + offset, len))
          << "length " << len << " offset " << offset;
    }
}

TEST(Lanes64, GoldenValuesPinTheAlgorithm) {
  std::vector<unsigned char> v(70000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>(i * 31 + 7);
  const std::pair<std::size_t, std::uint64_t> golden[] = {
      {0, 0x7d3ca4e39e870bcbULL},     {1, 0x1470144deaeb4be8ULL},    {15, 0x4d6886bd8718ba04ULL},
      {16, 0x00f60856afd8c6edULL},    {17, 0xb495c6c703f5fd5dULL},   {4096, 0x91b6b1749f9ea568ULL},
      {65536, 0xf4b11ddc3b2c679fULL}, {70000, 0x6930255fbfbe4bd7ULL}};
  for (auto [len, digest] : golden) EXPECT_EQ(lanes64(v.data(), len), digest) << "length " << len;
}

TEST(Lanes64, EveryByteAndTheLengthMatter) {
  auto data = random_bytes(4096 + 7, 3);
  std::mt19937_64 rng(5);
  const std::uint64_t base = lanes64(data.data(), data.size());
  for (std::size_t i = 0; i < data.size(); ++i) {
    const auto flip = static_cast<unsigned char>(1 + rng() % 255);  // a random non-zero change at every position
    data[i] ^= flip;
    ASSERT_NE(lanes64(data.data(), data.size()), base) << "flip " << int(flip) << " at byte " << i;
    data[i] ^= flip;
  }
  ASSERT_EQ(lanes64(data.data(), data.size()), base) << "deterministic";
  const std::vector<unsigned char> zeros(64, 0);
  EXPECT_NE(lanes64(zeros.data(), 17), lanes64(zeros.data(), 32)) << "zero padding must not collide";
  EXPECT_NE(lanes64(zeros.data(), 0), lanes64(zeros.data(), 16));
  for (std::size_t len = 1; len < 64; ++len) EXPECT_NE(lanes64(zeros.data(), len), lanes64(zeros.data(), len - 1));
}

TEST(Lanes64, DigestChunksHandlesThePartialLastChunk) {
  const std::size_t chunk = 4096, bytes = 3 * chunk + 100;
  auto region = random_bytes(bytes, 6);
  std::vector<std::uint64_t> digests(4, 0), again(4, 1);
  digest_chunks_host(region.data(), bytes, chunk, digests.data());
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(digests[i], lanes64(region.data() + i * chunk, chunk_length(bytes, chunk, i))) << "chunk " << i;
  EXPECT_EQ(chunk_length(bytes, chunk, 3), 100u);
  std::vector<unsigned char> padded(chunk, 0);
  std::memcpy(padded.data(), region.data() + 3 * chunk, 100);
  EXPECT_NE(digests[3], lanes64(padded.data(), chunk)) << "the last chunk is digested at its own length";
  digest_chunks_host(region.data(), bytes, chunk, again.data());
  EXPECT_EQ(digests, again) << "deterministic";
  region[3 * chunk + 99] ^= 0x80;  // the last byte of the region
  digest_chunks_host(region.data(), bytes, chunk, again.data());
  EXPECT_EQ(std::vector<std::uint64_t>(again.begin(), again.begin() + 3),
            std::vector<std::uint64_t>(digests.begin(), digests.begin() + 3));
  EXPECT_NE(again[3], digests[3]);
}

TEST(ChunkTwins, CompareCompactPackUnpack) {
  const std::uint64_t cur[] = {1, 2, 3, 4, 5, 6}, prev[] = {1, 9, 3, 9, 5, 9};
  std::uint32_t idx[6];
  EXPECT_EQ(compare_compact_host(cur, prev, 6, false, idx), 3u);
  EXPECT_EQ(std::vector<std::uint32_t>(idx, idx + 3), (std::vector<std::uint32_t>{1, 3, 5}));
  EXPECT_EQ(compare_compact_host(cur, cur, 6, false, idx), 0u);
  EXPECT_EQ(compare_compact_host(cur, nullptr, 6, true, idx), 6u);

  const std::size_t chunk = 256, bytes = 5 * chunk + 10;
  const auto region = random_bytes(bytes, 4);
  const std::uint32_t chunks[] = {0, 2, 5};
  std::vector<unsigned char> staging(3 * chunk);
  pack_host(region.data(), bytes, chunk, chunks, 3, staging.data());
  std::vector<unsigned char> out(bytes, 0xEE);
  unpack_host(out.data(), bytes, chunk, chunks, 3, staging.data());
  for (std::size_t i = 0; i < bytes; ++i) {
    const std::size_t c = i / chunk;
    const bool moved = c == 0 || c == 2 || c == 5;
    ASSERT_EQ(out[i], moved ? region[i] : 0xEE) << "byte " << i;
  }
}

TEST(ChunkTwins, CompareCompactEdgeCases) {
  std::uint32_t idx[4] = {7, 7, 7, 7};
  EXPECT_EQ(compare_compact_host(nullptr, nullptr, 0, false, idx), 0u);
  EXPECT_EQ(compare_compact_host(nullptr, nullptr, 0, true, idx), 0u);
  EXPECT_EQ(idx[0], 7u) << "nothing written for n = 0";
  const std::uint64_t cur[] = {1, 2, 3}, prev[] = {0, 0, 0};
  EXPECT_EQ(compare_compact_host(cur, prev, 3, false, idx), 3u);
  EXPECT_EQ(std::vector<std::uint32_t>(idx, idx + 4), (std::vector<std::uint32_t>{0, 1, 2, 7}));
}

TEST(HostTwinBackend, RoundTripThroughTheBackend) {
  auto be = gpu::make_host_twin_backend();
  std::uint64_t seed = 11;
  for (std::size_t chunk : {256ul, 4096ul})
    for (std::size_t misalign : {0ul, 5ul}) {
      const std::size_t bytes = 9 * chunk + chunk / 3;  // partial last chunk
      const std::size_t n = chunk_count(bytes, chunk);
      testing::expect_round_trip(*be, bytes, chunk, misalign, testing::every(n, 3, true), false, seed++);
      testing::expect_round_trip(*be, bytes, chunk, misalign, testing::every(n, 0, false), false, seed++);
      testing::expect_round_trip(*be, bytes, chunk, misalign, testing::every(n, 1, false), false, seed++);
      testing::expect_round_trip(*be, bytes, chunk, misalign, testing::every(n, 0, false), true, seed++);
    }
  testing::expect_round_trip(*be, 100, 4096, 3, {true}, false, seed++);  // one partial chunk
}

// The host twin's streams run work only when the host waits for it, so a host-twin test sees a missing wait.
TEST(HostTwinBackend, StreamWorkRunsWhenTheHostWaitsForIt) {
  auto be = gpu::make_host_twin_backend();
  auto stream = be->create_stream(false);
  gpu::Buffer dev = be->alloc_device(64), host = be->alloc_pinned(64);
  std::memset(dev.data(), 1, 64);
  std::memset(host.data(), 0, 64);
  be->copy_to_host(host.data(), dev.data(), 32, *stream);
  auto first = be->record(*stream);
  be->copy_to_host(host.as<char>() + 32, dev.as<char>() + 32, 32, *stream);
  EXPECT_EQ(host.as<char>()[0], 0) << "a copy ran before anyone waited for it";
  std::memset(dev.data(), 2, 64);  // changed before the copies ran: they read the new bytes
  be->wait(*first);
  EXPECT_EQ(host.as<char>()[0], 2);
  EXPECT_EQ(host.as<char>()[32], 0) << "waiting for an event ran work recorded after it";
  be->synchronize(*stream);
  EXPECT_EQ(host.as<char>()[32], 2);
  be->wait(*first);  // an event stays complete

  std::uint32_t count = 99;
  std::uint32_t indices[2];
  const std::uint64_t cur[2] = {1, 2}, prev[2] = {1, 3};
  be->compare_compact(cur, prev, 2, false, indices, &count, *stream);
  EXPECT_EQ(count, 99u);
  be->synchronize(*stream);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(indices[0], 1u);
}

// A query never blocks; on the twin each query of an incomplete event lets the device run one item and answers
// "not yet", so a polling loop terminates and code that polls sees the not-ready answer at least once.
TEST(HostTwinBackend, QueryAdvancesTheDeviceOneItemAtATime) {
  auto be = gpu::make_host_twin_backend();
  auto stream = be->create_stream(false);
  std::vector<char> a(8, 0), b(8, 0), src(8, 3);
  auto nothing = be->record(*stream);
  EXPECT_TRUE(be->query(*nothing)) << "an event with no work before it is complete";
  be->copy_to_host(a.data(), src.data(), 8, *stream);
  be->copy_to_host(b.data(), src.data(), 8, *stream);
  auto both = be->record(*stream);
  EXPECT_FALSE(be->query(*both));
  EXPECT_EQ(a[0], 3) << "the query ran the first copy";
  EXPECT_EQ(b[0], 0) << "and only the first";
  EXPECT_FALSE(be->query(*both));
  EXPECT_EQ(b[0], 3);
  EXPECT_TRUE(be->query(*both));
  EXPECT_TRUE(be->query(*both)) << "an event stays complete";
}

TEST(HostTwinBackend, FreeingMemoryOrDestroyingAStreamCompletesItsWork) {
  auto be = gpu::make_host_twin_backend();
  auto stream = be->create_stream(false), other = be->create_stream(true);
  std::vector<char> out(16, 0), out2(16, 0);
  {
    gpu::Buffer dev = be->alloc_device(16);
    std::memset(dev.data(), 7, 16);
    be->copy_to_host(out.data(), dev.data(), 16, *stream);
    be->copy_to_host(out2.data(), dev.data(), 16, *other);
  }  // freed here: like cudaFree, after the device's work (both streams), before the memory goes
  EXPECT_EQ(out[15], 7);
  EXPECT_EQ(out2[15], 7);
  std::vector<char> src(16, 5);
  be->copy_device(out.data(), src.data(), 16, *stream);
  auto event = be->record(*stream);
  stream.reset();
  EXPECT_EQ(out[0], 5) << "a destroyed stream's work completes";
  be->wait(*event);  // an event outlives its stream
}

}  // namespace
}  // namespace reprise::kernels
