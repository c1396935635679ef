// The tile operations of reprise-cholesky's left-looking factorisation, on column-major b x b tiles (leading
// dimension b), where the tiles live: LAPACKE/CBLAS (OpenBLAS) on host memory, cuSOLVER/cuBLAS on device memory.
// No Kokkos and no MPI here, so both are tested side by side on raw buffers (tests/apps/test_tile_kernels.cpp).
#pragma once

#include <memory>

namespace reprise::apps {

class TileKernels {
 public:
  virtual ~TileKernels() = default;
  virtual const char* name() const = 0;
  /// The tiles are device pointers (cuBLAS/cuSOLVER) rather than host pointers.
  virtual bool on_device() const = 0;
  /// a -= l l^T on the lower triangle of a (SYRK: diagonal tile update).
  virtual void syrk(const double* l, double* a) = 0;
  /// a -= x y^T (GEMM: off-diagonal tile update).
  virtual void gemm(const double* x, const double* y, double* a) = 0;
  /// The lower triangle of a becomes L with L L^T = a (POTRF; the strict upper triangle is left as it was).
  /// Returns LAPACK's info: 0, or k > 0 when the leading minor of order k is not positive definite. Waits for the
  /// operations issued before it.
  virtual int potrf(double* a) = 0;
  /// a = a L^{-T} with L the lower triangle of l (TRSM: right side, lower, transposed, non-unit diagonal).
  virtual void trsm(const double* l, double* a) = 0;
  /// Every operation issued so far has written its tile (the device backend runs them on its own stream).
  virtual void synchronize() = 0;
};

/// LAPACKE/CBLAS on host tiles of order `b` (OpenBLAS; set it to one thread for results independent of load).
std::unique_ptr<TileKernels> make_host_tile_kernels(int b);

/// Whether this build has the cuSOLVER/cuBLAS kernels (CUDA found at configure time).
bool cuda_tile_kernels_built();

/// cuSOLVER/cuBLAS on device tiles of order `b`, on a stream of the current device, in deterministic mode (the
/// same inputs give bit-identical tiles on the same GPU model, so a re-executed panel after a rollback writes the
/// bytes the failure-free run wrote). Throws reprise::DeviceError when not built with CUDA or with no usable GPU.
std::unique_ptr<TileKernels> make_cuda_tile_kernels(int b);

}  // namespace reprise::apps
