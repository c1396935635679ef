// The checkpoint data path on a real GPU: device regions digested, compacted and packed by the CUDA kernels,
// drained through pinned buffers on a low-priority stream, restored by the unpack kernel. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "reprise/reprise.hpp"
#include "support/test_support.hpp"

namespace reprise {
namespace {

class CudaDataPath : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA device on this machine: the CUDA data path is not exercised here (the host-twin "
                      "tests cover its logic); run `scripts/test.sh -L gpu` on a GPU machine";
    backend_ = gpu::make_cuda_backend();
    stream_ = backend_->create_stream(false);
    seed_ = std::random_device{}();
    std::printf("seed %llu on %s\n", static_cast<unsigned long long>(seed_), backend_->device_description().c_str());
  }
  gpu::Buffer device_copy(const std::vector<unsigned char>& host) {
    gpu::Buffer d = backend_->alloc_device(host.size());
    upload(d, host);
    return d;
  }
  void upload(gpu::Buffer& d, const std::vector<unsigned char>& host) {
    backend_->copy_to_device(d.data(), host.data(), host.size(), *stream_);
    backend_->synchronize(*stream_);
  }
  std::vector<unsigned char> download(const gpu::Buffer& d, std::size_t bytes) {
    std::vector<unsigned char> host(bytes);
    backend_->copy_to_host(host.data(), d.data(), bytes, *stream_);
    backend_->synchronize(*stream_);
    return host;
  }
  Config config(std::size_t chunk) const {
    Config c;
    c.chunk_bytes = chunk;
    c.device_backend = DeviceBackendKind::Cuda;
    c.full_every = 4;
    c.keep_chains = 4;
    c.pinned_piece_bytes = 1 << 20;
    return c;
  }
  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<gpu::Stream> stream_;
  std::uint64_t seed_ = 0;
};

TEST_F(CudaDataPath, DifferentialChainRestoresExactBytes) {
  const std::size_t chunk = 64 * 1024, bytes = 300 * chunk + 4321;
  std::vector<unsigned char> host(bytes);
  test::fill_random(host.data(), bytes, seed_);
  gpu::Buffer dev = device_copy(host);
  Runtime rt(config(chunk));
  rt.protect("field", dev.data(), bytes, MemorySpace::Device);
  std::vector<std::vector<unsigned char>> history;
  std::mt19937_64 rng(seed_);
  for (int v = 1; v <= 6; ++v) {
    for (int k = 0; k < 5; ++k) host[rng() % bytes] ^= static_cast<unsigned char>(1 + rng() % 255);
    upload(dev, host);
    rt.checkpoint(std::uint64_t(v));
    history.push_back(host);
    std::vector<unsigned char> junk(bytes, 0xCD);  // overwrite at once: the snapshot must already be taken
    upload(dev, junk);
  }
  rt.wait();
  const auto m = rt.metrics();
  EXPECT_EQ(m[0].device_backend, "cuda");
  // The reference is the captured snapshot, not the junk written after it: only the few changed chunks count.
  EXPECT_GE(m[1].chunks_dirty, 1u);
  EXPECT_LE(m[1].chunks_dirty, 5u);
  for (int v = 6; v >= 1; --v) {
    rt.restore(std::uint64_t(v));
    ASSERT_EQ(download(dev, bytes), history[std::size_t(v - 1)]) << "version " << v;
  }
}

TEST_F(CudaDataPath, OnlyChangedChunksAreStored) {
  const std::size_t chunk = 4096, bytes = 1000 * chunk;
  std::vector<unsigned char> host(bytes);
  test::fill_random(host.data(), bytes, seed_);
  gpu::Buffer dev = device_copy(host);
  Runtime rt(config(chunk));
  rt.protect("field", dev.data(), bytes, MemorySpace::Device);
  rt.checkpoint(1);
  for (std::size_t c : {3ul, 500ul, 999ul}) host[c * chunk + 7] ^= 0x40;
  upload(dev, host);
  rt.checkpoint(2);
  rt.wait();
  EXPECT_EQ(rt.metrics()[1].chunks_dirty, 3u);
  EXPECT_EQ(rt.metrics()[1].bytes_dirty, 3 * chunk);
  std::vector<unsigned char> zero(bytes, 0);
  upload(dev, zero);
  rt.restore(2);
  EXPECT_EQ(download(dev, bytes), host);
}

TEST_F(CudaDataPath, StagingRoundsAndDirectoryStore) {
  test::ScratchDir dir;
  Config c = config(16384);
  c.dir = dir.path();
  c.staging_bytes = 5 * 16384 + 256;
  const std::size_t bytes = 77 * 16384 + 100;
  std::vector<unsigned char> host(bytes);
  test::fill_random(host.data(), bytes, seed_);
  gpu::Buffer dev = device_copy(host);
  {
    Runtime rt(c);
    rt.protect("field", dev.data(), bytes, MemorySpace::Device);
    rt.checkpoint(1);
    rt.wait();
    EXPECT_GT(rt.metrics()[0].pack_rounds, 1u);
  }
  std::vector<unsigned char> zero(bytes, 0);
  upload(dev, zero);
  Runtime rt(c);
  rt.protect("field", dev.data(), bytes, MemorySpace::Device);
  EXPECT_TRUE(rt.restarted());
  EXPECT_EQ(rt.restore(), 1u);
  EXPECT_EQ(download(dev, bytes), host);
}

}  // namespace
}  // namespace reprise
