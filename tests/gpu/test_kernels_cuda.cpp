// The CUDA chunk kernels against their host twins on fresh random data (seed printed), with partial chunks,
// misaligned regions and poisoned outputs, and the CUDA backend end to end. Label gpu; skips without a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend_round_trip.hpp"
#include "gpu/backend.hpp"
#include "kernels/chunk_kernels.hpp"
#include "reprise/errors.hpp"

namespace reprise::kernels {
namespace {

using testing::download;
using testing::fill;

constexpr unsigned char kPoison = 0xA5;
constexpr std::uint64_t kPoison64 = 0xA5A5A5A5A5A5A5A5ULL;
constexpr std::uint32_t kPoison32 = 0xA5A5A5A5u;

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA device: the CUDA kernels are compiled but cannot run on this machine";
    be_ = gpu::make_cuda_backend();
    stream_ = be_->create_stream(false);
    seed_ = (std::uint64_t(std::random_device{}()) << 32) | std::random_device{}();
    rng_.seed(seed_);
    std::printf("seed %llu on %s\n", static_cast<unsigned long long>(seed_), be_->device_description().c_str());
    RecordProperty("seed", std::to_string(seed_));
  }
  gpu::Buffer upload(const void* host, std::size_t bytes, std::size_t misalign = 0) {
    gpu::Buffer d = be_->alloc_device(bytes + misalign);
    be_->copy_to_device(d.as<unsigned char>() + misalign, host, bytes, *stream_);
    be_->synchronize(*stream_);
    return d;
  }
  template <class T>
  std::vector<T> get(const void* dev, std::size_t count) {
    return download<T>(*be_, *stream_, dev, count);
  }
  void poison(gpu::Buffer& b) { fill(*be_, *stream_, b.data(), b.size(), kPoison); }
  std::size_t random_misalign() { return 1 + rng_() % 15; }

  std::unique_ptr<gpu::Backend> be_;
  std::unique_ptr<gpu::Stream> stream_;
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TEST_F(CudaKernels, DigestMatchesHostTwin) {
  // 1000 is not a multiple of the 16-byte unit: every other chunk start is misaligned in an aligned region.
  for (std::size_t chunk : {256ul, 1000ul, 4096ul, 65536ul, 1ul << 20})
    for (std::size_t misalign : {0ul, random_misalign(), 8ul, 15ul}) {
      const std::size_t sizes[] = {chunk * (1 + rng_() % 40) + 1 + rng_() % (chunk - 1),  // partial last chunk
                                   chunk * (1 + rng_() % 8),                              // whole chunks only
                                   chunk / 2 + 3,                                         // one partial chunk
                                   1};
      for (std::size_t bytes : sizes) {
        SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " misalign " << misalign << " bytes " << bytes);
        const auto host = testing::random_bytes(bytes, rng_);
        gpu::Buffer dev = upload(host.data(), bytes, misalign);
        const std::size_t n = chunk_count(bytes, chunk);
        gpu::Buffer digests = be_->alloc_device((n + 1) * 8);
        poison(digests);
        be_->digest(dev.as<unsigned char>() + misalign, bytes, chunk, digests.as<std::uint64_t>(), *stream_);
        auto got = get<std::uint64_t>(digests.data(), n + 1);
        EXPECT_EQ(got[n], kPoison64) << "wrote past the last digest";
        got.resize(n);
        std::vector<std::uint64_t> want(n);
        digest_chunks_host(host.data(), bytes, chunk, want.data());
        ASSERT_EQ(got, want);
      }
    }
}

TEST_F(CudaKernels, CompareCompactMatchesHostTwin) {
  // 3000001 chunks take 2930 blocks, more than one pass of the one-block scan of block counts.
  for (std::uint32_t n : {0u, 1u, 31u, 1024u, 1025u, 70000u, 1u << 20, 3000001u})
    for (double p : {0.0, 0.01, 0.5, 1.0}) {
      std::vector<std::uint64_t> cur(n), prev(n);
      for (std::uint32_t i = 0; i < n; ++i) {
        cur[i] = rng_();
        prev[i] = std::uniform_real_distribution<double>(0, 1)(rng_) < p ? ~cur[i] : cur[i];
      }
      gpu::Buffer dc = upload(cur.data(), n * 8ull), dp = upload(prev.data(), n * 8ull);
      gpu::Buffer idx = be_->alloc_device(n * 4ull + 4), cnt = be_->alloc_device(4);
      for (bool all : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " p " << p << " all " << all);
        poison(idx);
        poison(cnt);
        be_->compare_compact(dc.as<std::uint64_t>(), all ? nullptr : dp.as<std::uint64_t>(), n, all,
                             idx.as<std::uint32_t>(), cnt.as<std::uint32_t>(), *stream_);
        const std::uint32_t count = get<std::uint32_t>(cnt.data(), 1)[0];
        std::vector<std::uint32_t> want(n);
        want.resize(compare_compact_host(cur.data(), prev.data(), n, all, want.data()));
        ASSERT_EQ(count, want.size());
        auto got = get<std::uint32_t>(idx.data(), n + 1);
        for (std::uint32_t j = count; j <= n; ++j) ASSERT_EQ(got[j], kPoison32) << "wrote index slot " << j;
        got.resize(count);
        ASSERT_EQ(got, want);
      }
    }
}

TEST_F(CudaKernels, PackAndUnpackMatchHostTwins) {
  for (std::size_t chunk : {256ul, 4096ul, 65536ul, 1ul << 20})
    for (std::size_t misalign : {0ul, random_misalign(), 4ul})
      for (int pattern = 0; pattern < 3; ++pattern) {  // random subset with the partial last chunk, none, all
        const std::size_t bytes = chunk * (2 + rng_() % 30) + 1 + rng_() % (chunk - 1);
        SCOPED_TRACE(::testing::Message()
                     << "chunk " << chunk << " misalign " << misalign << " bytes " << bytes << " pattern " << pattern);
        const auto host = testing::random_bytes(bytes, rng_);
        gpu::Buffer region = upload(host.data(), bytes, misalign);
        const std::uint32_t n = static_cast<std::uint32_t>(chunk_count(bytes, chunk));
        std::vector<std::uint32_t> chosen;
        for (std::uint32_t i = 0; i < n; ++i)
          if (pattern == 2 || (pattern == 0 && (rng_() % 3 == 0 || i == n - 1))) chosen.push_back(i);
        const auto m = static_cast<std::uint32_t>(chosen.size());
        gpu::Buffer idx = upload(chosen.data(), chosen.size() * 4);
        gpu::Buffer staging = be_->alloc_device((m + 1) * chunk);  // one spare chunk must stay poisoned
        poison(staging);
        be_->pack(region.as<unsigned char>() + misalign, bytes, chunk, idx.as<std::uint32_t>(), m, staging.data(),
                  *stream_);
        std::vector<unsigned char> want(staging.size(), kPoison);
        pack_host(host.data(), bytes, chunk, chosen.data(), m, want.data());
        ASSERT_EQ(get<unsigned char>(staging.data(), want.size()), want) << "pack";

        gpu::Buffer target = be_->alloc_device(bytes + misalign + 16);
        poison(target);
        be_->unpack(target.as<unsigned char>() + misalign, bytes, chunk, idx.as<std::uint32_t>(), m, staging.data(),
                    *stream_);
        std::vector<unsigned char> expect(target.size(), kPoison);
        unpack_host(expect.data() + misalign, bytes, chunk, chosen.data(), m, want.data());
        ASSERT_EQ(get<unsigned char>(target.data(), target.size()), expect) << "unpack";
      }
}

TEST_F(CudaKernels, RoundTripThroughTheBackend) {
  for (std::size_t chunk : {256ul, 65536ul})
    for (std::size_t misalign : {0ul, random_misalign()}) {
      const std::size_t bytes = chunk * (3 + rng_() % 60) + 1 + rng_() % (chunk - 1);
      const std::size_t n = chunk_count(bytes, chunk);
      testing::expect_round_trip(*be_, bytes, chunk, misalign, testing::every(n, 1 + rng_() % 5, true), false, rng_());
      testing::expect_round_trip(*be_, bytes, chunk, misalign, testing::every(n, 0, false), false, rng_());
      testing::expect_round_trip(*be_, bytes, chunk, misalign, testing::every(n, 1, false), false, rng_());
      testing::expect_round_trip(*be_, bytes, chunk, misalign, testing::every(n, 0, false), true, rng_());
    }
}

// The compaction scratch is shared by every stream of the backend, grows on demand, and outlives the streams
// that used it: two threads on their own streams, with growing sizes and short-lived streams, must not mix.
TEST_F(CudaKernels, CompactionFromTwoThreadsOnTheirOwnStreams) {
  const std::uint64_t seeds[2] = {rng_(), rng_()};
  std::vector<std::string> failures[2];
  auto worker = [&](int t) {
    std::mt19937_64 rng(seeds[t]);
    auto stream = be_->create_stream(t == 1);
    for (int round = 0; round < 12; ++round) {
      const std::uint32_t n = 1000u << (round % 12);  // 1000 .. 2048000 chunks
      std::vector<std::uint64_t> cur(n), prev(n);
      for (std::uint32_t i = 0; i < n; ++i) cur[i] = prev[i] = rng();
      for (std::uint32_t i = 0; i < n; i += 1 + rng() % 50) prev[i] ^= 1;
      std::vector<std::uint32_t> want(n);
      want.resize(compare_compact_host(cur.data(), prev.data(), n, false, want.data()));
      if (round % 4 == 3) stream = be_->create_stream(t == 1);  // the previous stream is destroyed
      gpu::Buffer dc = be_->alloc_device(n * 8ull), dp = be_->alloc_device(n * 8ull);
      gpu::Buffer idx = be_->alloc_device(n * 4ull), cnt = be_->alloc_device(4);
      be_->copy_to_device(dc.data(), cur.data(), n * 8ull, *stream);
      be_->copy_to_device(dp.data(), prev.data(), n * 8ull, *stream);
      be_->compare_compact(dc.as<std::uint64_t>(), dp.as<std::uint64_t>(), n, false, idx.as<std::uint32_t>(),
                           cnt.as<std::uint32_t>(), *stream);
      std::uint32_t count = 0;
      be_->copy_to_host(&count, cnt.data(), 4, *stream);
      be_->synchronize(*stream);
      std::vector<std::uint32_t> got(count);
      if (count <= n) got = download<std::uint32_t>(*be_, *stream, idx.data(), count);
      if (got != want)
        failures[t].push_back("thread " + std::to_string(t) + " round " + std::to_string(round) + ": " +
                              std::to_string(count) + " indices, expected " + std::to_string(want.size()));
    }
  };
  auto guarded = [&](int t) {
    try {
      worker(t);
    } catch (const std::exception& e) {
      failures[t].push_back("thread " + std::to_string(t) + " threw: " + e.what());
    }
  };
  std::thread other(guarded, 1);
  guarded(0);
  other.join();
  for (const auto& f : failures)
    for (const auto& line : f) ADD_FAILURE() << line;
}

// A failed call throws DeviceError naming the call, and leaves nothing pending that a later launch would
// report as its own failure.
TEST_F(CudaKernels, FailedCallThrowsAndLaterLaunchesStillWork) {
  try {
    be_->alloc_device(std::size_t(1) << 60);
    FAIL() << "allocating 1 EiB of device memory succeeded";
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaMalloc"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda_backend.cpp"), std::string::npos) << what;
  }
  const std::vector<unsigned char> host(4096 * 3, 7);
  gpu::Buffer dev = upload(host.data(), host.size());
  gpu::Buffer digests = be_->alloc_device(3 * 8);
  EXPECT_NO_THROW(be_->digest(dev.data(), host.size(), 4096, digests.as<std::uint64_t>(), *stream_));
  const auto got = get<std::uint64_t>(digests.data(), 3);
  EXPECT_EQ(got[0], lanes64(host.data(), 4096));
}

}  // namespace
}  // namespace reprise::kernels
