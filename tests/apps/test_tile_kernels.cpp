// The host tile kernels of reprise-cholesky (LAPACKE/CBLAS) against plain loops, including an indefinite tile.
#include <gtest/gtest.h>

#include "reprise/errors.hpp"
#include "tile_kernels.hpp"
#include "tile_reference.hpp"

namespace reprise::apps {
namespace {

using namespace testing;

class HostTiles : public ::testing::TestWithParam<int> {};

TEST_P(HostTiles, MatchPlainLoops) {
  const int b = GetParam();
  std::mt19937_64 rng(1234 + static_cast<unsigned>(b));
  auto k = make_host_tile_kernels(b);
  EXPECT_FALSE(k->on_device());
  const Tile x = random_tile(b, rng), y = random_tile(b, rng);
  Tile a = spd_tile(b, rng), want = a;
  k->syrk(x.data(), a.data());
  ref_syrk(x, want, b);
  EXPECT_LT(rel_diff(a, want, b, true), 1e-13) << "syrk";
  Tile g = random_tile(b, rng), gwant = g;
  k->gemm(x.data(), y.data(), g.data());
  ref_gemm(x, y, gwant, b);
  EXPECT_LT(rel_diff(g, gwant, b), 1e-13) << "gemm";
  Tile p = spd_tile(b, rng), pwant = p;
  ASSERT_EQ(k->potrf(p.data()), 0);
  ASSERT_EQ(ref_potrf(pwant, b), 0);
  EXPECT_LT(rel_diff(p, pwant, b, true), 1e-13) << "potrf";
  Tile t = random_tile(b, rng), twant = t;
  k->trsm(p.data(), t.data());
  ref_trsm(p, twant, b);
  EXPECT_LT(rel_diff(t, twant, b), 1e-12) << "trsm";
  k->synchronize();
}

INSTANTIATE_TEST_SUITE_P(Orders, HostTiles, ::testing::Values(1, 7, 64, 100));

TEST(HostTileKernels, AnIndefiniteTileReportsItsLeadingMinor) {
  const int b = 16;
  std::mt19937_64 rng(7);
  Tile a = spd_tile(b, rng);
  at(a, b, 5, 5) = -1.0;  // the leading minor of order 6 is no longer positive definite
  Tile want = a;
  const int ref = ref_potrf(want, b);
  ASSERT_GT(ref, 0);
  EXPECT_EQ(make_host_tile_kernels(b)->potrf(a.data()), ref);
}

TEST(HostTileKernels, RejectABadOrderAndSayWhenCudaIsMissing) {
  EXPECT_THROW(make_host_tile_kernels(0), UsageError);
  if (!cuda_tile_kernels_built()) {
    try {
      make_cuda_tile_kernels(8);
      FAIL() << "expected DeviceError";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("REPRISE_ENABLE_CUDA"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace reprise::apps
