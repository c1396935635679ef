// The cuSOLVER/cuBLAS tile kernels of reprise-cholesky against the host ones (LAPACKE/CBLAS) on random tiles, and
// run twice on the same inputs: bit-identical (a rolled-back rank re-executes panels). Label gpu; skips without a
// device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>

#include "tile_kernels.hpp"
#include "tile_reference.hpp"

namespace reprise::apps {
namespace {

using namespace testing;

bool have_device() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  (void)cudaGetLastError();
  return ok;
}

// One device tile, uploaded from and downloaded to host vectors.
class DeviceTile {
 public:
  DeviceTile(const Tile& t) : bytes_(t.size() * sizeof(double)) {
    EXPECT_EQ(cudaMalloc(&p_, bytes_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, t.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceTile() { cudaFree(p_); }
  DeviceTile(const DeviceTile&) = delete;
  DeviceTile& operator=(const DeviceTile&) = delete;
  double* data() { return p_; }
  Tile get() const {
    Tile t(bytes_ / sizeof(double));
    EXPECT_EQ(cudaMemcpy(t.data(), p_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return t;
  }

 private:
  std::size_t bytes_;
  double* p_ = nullptr;
};

class CudaTiles : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!cuda_tile_kernels_built()) GTEST_SKIP() << "built without CUDA: no cuSOLVER/cuBLAS tile kernels";
    if (!have_device())
      GTEST_SKIP() << "no CUDA device: the cuSOLVER/cuBLAS tile kernels are compiled but cannot run on this machine";
  }
};

// syrk, gemm, potrf, trsm as a panel does them; returns the four results.
std::vector<Tile> panel_on(TileKernels& k, const Tile& x, const Tile& y, const Tile& a, const Tile& g, const Tile& p,
                           const Tile& t) {
  if (!k.on_device()) {
    Tile a2 = a, g2 = g, p2 = p, t2 = t;
    k.syrk(x.data(), a2.data());
    k.gemm(x.data(), y.data(), g2.data());
    EXPECT_EQ(k.potrf(p2.data()), 0);
    k.trsm(p2.data(), t2.data());
    return {a2, g2, p2, t2};
  }
  DeviceTile dx(x), dy(y), da(a), dg(g), dp(p), dt(t);
  k.syrk(dx.data(), da.data());
  k.gemm(dx.data(), dy.data(), dg.data());
  EXPECT_EQ(k.potrf(dp.data()), 0);
  k.trsm(dp.data(), dt.data());
  k.synchronize();
  return {da.get(), dg.get(), dp.get(), dt.get()};
}

TEST_P(CudaTiles, MatchTheHostKernelsAndRepeatBitForBit) {
  const int b = GetParam();
  std::mt19937_64 rng(99 + static_cast<unsigned>(b));
  const Tile x = random_tile(b, rng), y = random_tile(b, rng), a = spd_tile(b, rng), g = random_tile(b, rng),
             p = spd_tile(b, rng), t = random_tile(b, rng);
  auto host = make_host_tile_kernels(b);
  auto dev = make_cuda_tile_kernels(b);
  EXPECT_TRUE(dev->on_device());
  const auto want = panel_on(*host, x, y, a, g, p, t);
  const auto got = panel_on(*dev, x, y, a, g, p, t);
  const char* names[] = {"syrk", "gemm", "potrf", "trsm"};
  for (int i = 0; i < 4; ++i)
    EXPECT_LT(rel_diff(got[i], want[i], b, i == 0 || i == 2), 1e-12) << names[i] << " b=" << b;
  const auto again = panel_on(*dev, x, y, a, g, p, t);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(std::memcmp(got[i].data(), again[i].data(), got[i].size() * sizeof(double)), 0)
        << names[i] << " differs between two runs on the same inputs (b=" << b << ")";
}

INSTANTIATE_TEST_SUITE_P(Orders, CudaTiles, ::testing::Values(1, 7, 64, 100, 256));

TEST_F(CudaTiles, AnIndefiniteTileReportsItsLeadingMinor) {
  const int b = 16;
  std::mt19937_64 rng(7);
  Tile a = spd_tile(b, rng);
  at(a, b, 5, 5) = -1.0;
  Tile want = a;
  const int ref = ref_potrf(want, b);
  ASSERT_GT(ref, 0);
  DeviceTile d(a);
  EXPECT_EQ(make_cuda_tile_kernels(b)->potrf(d.data()), ref);
}

}  // namespace
}  // namespace reprise::apps
