// The NCCL group barrier on the GPUs of this machine: one member per GPU (threads), allgather, abort. Label gpu;
// skips without NCCL in the build or without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <thread>

#include "gpu/nccl_barrier.hpp"
#include "reprise/errors.hpp"

namespace reprise::gpu {
namespace {

int gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  (void)cudaGetLastError();
  return n;
}

class NcclBarrierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string p = nccl_problem(); !p.empty()) GTEST_SKIP() << "NCCL unusable here: " << p;
    if (gpus() == 0) GTEST_SKIP() << "no CUDA device: the NCCL barrier is compiled but cannot run on this machine";
  }
};

TEST_F(NcclBarrierTest, AllgathersEveryMembersWordsInMemberOrder) {
  const int n = std::min(gpus(), 4);  // NCCL: one GPU per member
  const NcclId id = nccl_unique_id();
  std::vector<std::vector<std::uint64_t>> got(static_cast<std::size_t>(n));
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int m = 0; m < n; ++m)
    threads.emplace_back([&, m] {
      try {
        cudaSetDevice(m);
        NcclBarrier b(id, n, m);
        while (!b.ready()) std::this_thread::yield();
        for (int round = 0; round < 3; ++round) {  // reused, with the word count of a checkpoint then a commit
          const std::size_t words = round == 1 ? 1 : 3;
          std::vector<std::uint64_t> mine;
          for (std::size_t w = 0; w < words; ++w) mine.push_back(100u * static_cast<unsigned>(m) + w + 10u * round);
          b.start(mine);
          while (!b.done()) std::this_thread::yield();
          if (round == 2) got[static_cast<std::size_t>(m)] = b.result();
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(m)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int m = 0; m < n; ++m) {
    ASSERT_EQ(errors[static_cast<std::size_t>(m)], "") << "member " << m;
    ASSERT_EQ(got[static_cast<std::size_t>(m)].size(), 3u * static_cast<std::size_t>(n));
    for (int from = 0; from < n; ++from)
      for (int w = 0; w < 3; ++w)
        EXPECT_EQ(got[static_cast<std::size_t>(m)][static_cast<std::size_t>(from * 3 + w)],
                  100u * static_cast<unsigned>(from) + static_cast<unsigned>(w) + 20u);
  }
}

TEST_F(NcclBarrierTest, AnAbortedBarrierRefusesWorkAndIsDestroyedWithoutWaiting) {
  cudaSetDevice(0);
  NcclBarrier b(nccl_unique_id(), 1, 0);
  while (!b.ready()) std::this_thread::yield();
  b.abort();
  EXPECT_THROW(b.start({1, 2}), DeviceError);
  EXPECT_THROW(b.ready(), DeviceError);
}

}  // namespace
}  // namespace reprise::gpu
