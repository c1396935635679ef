// The CUDA chunk kernels against their host twins on fresh random data (seed printed), with partial chunks,
// misaligned regions and poisoned outputs. Label gpu; skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "kernels/chunk_kernels.hpp"

namespace reprise::kernels {
namespace {

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA device on this machine: CUDA kernels are compiled but not run here";
    be_ = gpu::make_cuda_backend();
    stream_ = be_->create_stream(false);
    seed_ = std::random_device{}();
    std::printf("seed %llu, %s\n", static_cast<unsigned long long>(seed_), be_->device_description().c_str());
  }
  gpu::Buffer upload(const void* host, std::size_t bytes, std::size_t extra = 0) {
    gpu::Buffer d = be_->alloc_device(bytes + extra);
    be_->copy_to_device(d.as<unsigned char>() + extra, host, bytes, *stream_);
    be_->synchronize(*stream_);
    return d;
  }
  template <class T>
  std::vector<T> download(const void* dev, std::size_t count) {
    std::vector<T> out(count);
    be_->copy_to_host(out.data(), dev, count * sizeof(T), *stream_);
    be_->synchronize(*stream_);
    return out;
  }
  void poison(gpu::Buffer& b) {
    std::vector<unsigned char> junk(b.size(), 0xA5);
    be_->copy_to_device(b.data(), junk.data(), junk.size(), *stream_);
  }
  std::unique_ptr<gpu::Backend> be_;
  std::unique_ptr<gpu::Stream> stream_;
  std::uint64_t seed_ = 0;
};

TEST_F(CudaKernels, DigestMatchesHostTwin) {
  std::mt19937_64 rng(seed_);
  for (std::size_t chunk : {256ul, 4096ul, 65536ul, 1ul << 20})
    for (std::size_t misalign : {0ul, 1ul, 8ul, 15ul}) {
      const std::size_t bytes = chunk * (1 + rng() % 40) + rng() % chunk;  // partial last chunk
      const auto host = random_bytes(bytes, rng());
      gpu::Buffer dev = upload(host.data(), bytes, misalign);
      const std::size_t n = chunk_count(bytes, chunk);
      gpu::Buffer digests = be_->alloc_device(n * 8);
      poison(digests);
      be_->digest(dev.as<unsigned char>() + misalign, bytes, chunk, digests.as<std::uint64_t>(), *stream_);
      const auto got = download<std::uint64_t>(digests.data(), n);
      std::vector<std::uint64_t> want(n);
      digest_chunks_host(host.data(), bytes, chunk, want.data());
      ASSERT_EQ(got, want) << "chunk " << chunk << " misalign " << misalign << " bytes " << bytes;
    }
}

TEST_F(CudaKernels, CompareCompactMatchesHostTwin) {
  std::mt19937_64 rng(seed_);
  for (std::uint32_t n : {1u, 31u, 1024u, 1025u, 70000u, 1u << 20})
    for (double p : {0.0, 0.01, 0.5, 1.0}) {
      std::vector<std::uint64_t> cur(n), prev(n);
      for (std::uint32_t i = 0; i < n; ++i) {
        cur[i] = rng();
        prev[i] = std::uniform_real_distribution<double>(0, 1)(rng) < p ? ~cur[i] : cur[i];
      }
      gpu::Buffer dc = upload(cur.data(), n * 8), dp = upload(prev.data(), n * 8);
      gpu::Buffer idx = be_->alloc_device(n * 4), cnt = be_->alloc_device(4);
      for (bool all : {false, true}) {
        poison(idx);
        poison(cnt);
        be_->compare_compact(dc.as<std::uint64_t>(), dp.as<std::uint64_t>(), n, all, idx.as<std::uint32_t>(),
                             cnt.as<std::uint32_t>(), *stream_);
        const std::uint32_t count = download<std::uint32_t>(cnt.data(), 1)[0];
        std::vector<std::uint32_t> want(n);
        want.resize(compare_compact_host(cur.data(), prev.data(), n, all, want.data()));
        ASSERT_EQ(count, want.size()) << "n " << n << " p " << p << " all " << all;
        ASSERT_EQ(download<std::uint32_t>(idx.data(), count), want) << "n " << n << " p " << p;
      }
    }
}

TEST_F(CudaKernels, PackAndUnpackRoundTripThroughTheBackend) {
  std::mt19937_64 rng(seed_);
  for (std::size_t chunk : {256ul, 65536ul})
    for (std::size_t misalign : {0ul, 4ul}) {
      const std::size_t bytes = chunk * 33 + 77;
      const auto host = random_bytes(bytes, rng());
      gpu::Buffer region = upload(host.data(), bytes, misalign);
      const std::uint32_t n = static_cast<std::uint32_t>(chunk_count(bytes, chunk));
      std::vector<std::uint32_t> chosen;
      for (std::uint32_t i = 0; i < n; ++i)
        if (rng() % 3 == 0 || i == n - 1) chosen.push_back(i);
      gpu::Buffer idx = upload(chosen.data(), chosen.size() * 4);
      gpu::Buffer staging = be_->alloc_device(chosen.size() * chunk);
      poison(staging);
      be_->pack(region.as<unsigned char>() + misalign, bytes, chunk, idx.as<std::uint32_t>(),
                static_cast<std::uint32_t>(chosen.size()), staging.data(), *stream_);
      std::vector<unsigned char> want(chosen.size() * chunk, 0xA5);
      pack_host(host.data(), bytes, chunk, chosen.data(), static_cast<std::uint32_t>(chosen.size()), want.data());
      ASSERT_EQ(download<unsigned char>(staging.data(), want.size()), want) << "pack, chunk " << chunk;
      gpu::Buffer target = be_->alloc_device(bytes + misalign);
      poison(target);
      be_->unpack(target.as<unsigned char>() + misalign, bytes, chunk, idx.as<std::uint32_t>(),
                  static_cast<std::uint32_t>(chosen.size()), staging.data(), *stream_);
      std::vector<unsigned char> expect(bytes, 0xA5);
      unpack_host(expect.data(), bytes, chunk, chosen.data(), static_cast<std::uint32_t>(chosen.size()), want.data());
      auto got = download<unsigned char>(target.as<unsigned char>() + misalign, bytes);
      ASSERT_EQ(got, expect) << "unpack, chunk " << chunk << " misalign " << misalign;
    }
}

}  // namespace
}  // namespace reprise::kernels
