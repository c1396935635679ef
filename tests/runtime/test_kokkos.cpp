// Runtime::protect(view) for Kokkos views. Kernels live in free functions (nvcc rejects KOKKOS_LAMBDA inside a
// gtest TEST body).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <string>
#include <utility>
#include <vector>

#include "reprise/kokkos.hpp"
#include "reprise/reprise.hpp"

namespace {

using Field = Kokkos::View<double**>;

void fill(const Field& u, double base) {
  Kokkos::parallel_for(
      "fill", Kokkos::MDRangePolicy<Kokkos::Rank<2>>({0, 0}, {int(u.extent(0)), int(u.extent(1))}),
      KOKKOS_LAMBDA(int i, int j) { u(i, j) = base + i * 1000.0 + j; });
  Kokkos::fence();
}

double sum_of(const Field& u) {
  double s = 0;
  Kokkos::parallel_reduce(
      "sum", Kokkos::MDRangePolicy<Kokkos::Rank<2>>({0, 0}, {int(u.extent(0)), int(u.extent(1))}),
      KOKKOS_LAMBDA(int i, int j, double& acc) { acc += u(i, j) * (1 + i % 7); }, s);
  return s;
}

void set_one(const Field& u, int i, int j, double value) {
  Kokkos::parallel_for(
      "set_one", 1, KOKKOS_LAMBDA(int) { u(i, j) = value; });
  Kokkos::fence();
}

reprise::Config small_chunks() {
  reprise::Config c;
  c.chunk_bytes = 1024;
  return c;
}

TEST(KokkosViews, ProtectedViewRestoresExactly) {
  reprise::Runtime rt(small_chunks());
  Field u("temperature", 64, 48);
  rt.protect(u);
  fill(u, 1.0);
  const double expect = sum_of(u);
  rt.checkpoint(1);
  fill(u, -5.0);
  rt.checkpoint(2);
  rt.wait();
  EXPECT_EQ(rt.restore(1), 1u);
  EXPECT_EQ(sum_of(u), expect);
  const std::string json = rt.metrics_json();
  EXPECT_NE(json.find("\"bytes_protected\": 24576"), std::string::npos) << json;
}

TEST(KokkosViews, RuntimeKeepsTheAllocationOfAConstViewAlive) {
  reprise::Runtime rt(small_chunks());
  {
    Field u("scratch", 16, 16);
    fill(u, 2.0);
    rt.protect(std::as_const(u));  // captured, not followed
  }                                // the application's handle is gone; the region must still be valid
  EXPECT_NO_THROW(rt.checkpoint(1));
  rt.wait();
  EXPECT_EQ(rt.metrics().back().bytes_dirty, 16u * 16 * sizeof(double));
}

// The double-buffer idiom: the variable is followed, so a swap needs no copy; a restore writes the buffer the
// variable refers to then, and leaves the other one alone.
TEST(KokkosViews, AFollowedViewIsCheckpointedAndRestoredThroughSwaps) {
  reprise::Runtime rt(small_chunks());
  Field u("u", 64, 48), next("next", 64, 48);
  rt.protect(u);
  fill(u, 1.0);
  const double one = sum_of(u);
  rt.checkpoint(1);
  fill(next, 2.0);
  std::swap(u, next);
  const double two = sum_of(u);
  rt.checkpoint(2);
  fill(u, 7.0);
  fill(next, 5.0);
  const double other = sum_of(next);
  rt.wait();
  EXPECT_EQ(rt.restore(2), 2u);
  EXPECT_EQ(sum_of(u), two);
  EXPECT_EQ(rt.restore(1), 1u);
  EXPECT_EQ(sum_of(u), one);
  EXPECT_EQ(sum_of(next), other);
  EXPECT_EQ(std::string(u.label()), "next");  // the region keeps the name it was protected under
  EXPECT_EQ(rt.versions(), (std::vector<std::uint64_t>{1, 2}));
}

// Swapped for a buffer that differs in one element: the version is differential with one dirty chunk (the
// reference digests are of contents, not places).
TEST(KokkosViews, ASwapToNearlyTheSameContentsStaysDifferential) {
  reprise::Runtime rt(small_chunks());
  Field u("u", 64, 48), next("next", 64, 48);
  rt.protect(u);
  fill(u, 1.0);
  rt.checkpoint(1);
  Kokkos::deep_copy(next, u);
  set_one(next, 10, 3, -1.0);  // one chunk
  std::swap(u, next);
  rt.checkpoint(2);
  rt.wait();
  const reprise::CheckpointMetrics m = rt.metrics().back();
  EXPECT_FALSE(m.full);
  EXPECT_EQ(m.chunks_dirty, 1u);
  EXPECT_EQ(m.chunks_total, 24u);
}

TEST(KokkosViews, AConstViewKeepsTheBufferItWasGiven) {
  reprise::Runtime rt(small_chunks());
  Field u("u", 64, 48), next("next", 64, 48);
  fill(u, 1.0);
  const double one = sum_of(u);
  rt.protect(std::as_const(u));
  rt.checkpoint(1);
  fill(next, 2.0);
  std::swap(u, next);
  rt.checkpoint(2);
  rt.wait();
  EXPECT_EQ(rt.metrics().back().chunks_dirty, 0u);  // the old buffer, unchanged
  rt.restore(2);
  EXPECT_EQ(sum_of(next), one);
}

TEST(KokkosViews, AFollowedViewWithOtherExtentsIsRefusedAndNothingIsTaken) {
  reprise::Runtime rt(small_chunks());
  Field u("u", 32, 32);
  rt.protect(u);
  fill(u, 1.0);
  rt.checkpoint(1);
  const Field kept = u;
  u = Field("u", 32, 40);
  try {
    rt.checkpoint(2);
    FAIL() << "a view of other extents was checkpointed";
  } catch (const reprise::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("view 'u' is 10240 bytes now, 8192 when it was protected"), std::string::npos)
        << e.what();
  }
  rt.wait();
  EXPECT_EQ(rt.versions(), (std::vector<std::uint64_t>{1}));
  u = kept;  // back to the protected extents: checkpoints go on
  EXPECT_NO_THROW(rt.checkpoint(2));
  rt.wait();
  EXPECT_EQ(rt.versions(), (std::vector<std::uint64_t>{1, 2}));
}

TEST(KokkosViews, NonContiguousViewIsRejectedWithAnExplanation) {
  reprise::Runtime rt(small_chunks());
  // LayoutRight explicitly: the default layout of device views is LayoutLeft, whose columns are contiguous.
  Kokkos::View<double**, Kokkos::LayoutRight> u("u", 8, 8);
  auto column = Kokkos::subview(u, Kokkos::ALL, 3);  // stride 8: not contiguous
  try {
    rt.protect(column);
    FAIL() << "a strided view was accepted";
  } catch (const reprise::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not contiguous"), std::string::npos) << e.what();
  }
  auto row = Kokkos::subview(u, 3, Kokkos::ALL);  // contiguous in LayoutRight
  EXPECT_NO_THROW(rt.protect(row));
}

TEST(KokkosViews, RestoreIntoAViewOfADifferentSizeFailsAndLeavesItUntouched) {
  reprise::Runtime rt(small_chunks());
  Field u("u", 32, 32);
  fill(u, 3.0);
  rt.protect(u);
  rt.checkpoint(1);
  rt.wait();
  rt.unprotect("u");
  Field bigger("u", 32, 40);
  fill(bigger, 9.0);
  const double before = sum_of(bigger);
  rt.protect(bigger);
  try {
    rt.restore(1);
    FAIL();
  } catch (const reprise::RestoreError& e) {
    EXPECT_NE(std::string(e.what()).find("'u' is 10240 bytes now"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sum_of(bigger), before);
}

TEST(KokkosViews, UnlabelledViewNeedsAName) {
  reprise::Runtime rt(small_chunks());
  std::vector<double> storage(10);
  Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> v(storage.data(), 10);
  EXPECT_THROW(rt.protect(v), reprise::UsageError);
}

// Where a view lives, as protect() and reprise::Comm see it (the stencil passes its halo lines to Comm with it):
// host memory here; CudaSpace and CudaUVMSpace views are device memory with a CUDA Kokkos.
TEST(KokkosViews, MemorySpaceOfAView) {
  Kokkos::View<double*, Kokkos::HostSpace> host("host", 4);
  EXPECT_EQ(reprise::memory_space_of(host), reprise::MemorySpace::Host);
#if defined(KOKKOS_ENABLE_CUDA)
  Kokkos::View<double*, Kokkos::CudaSpace> device("device", 4);
  EXPECT_EQ(reprise::memory_space_of(device), reprise::MemorySpace::Device);
  Kokkos::View<double*, Kokkos::CudaUVMSpace> uvm("uvm", 4);
  EXPECT_EQ(reprise::memory_space_of(uvm), reprise::MemorySpace::Device);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  return RUN_ALL_TESTS();
}
