// Host tile kernels: LAPACKE + CBLAS (OpenBLAS).
#include "tile_kernels.hpp"

#include <cblas.h>
#include <lapacke.h>

#include "reprise/errors.hpp"

namespace reprise::apps {
namespace {

class HostTileKernels final : public TileKernels {
 public:
  explicit HostTileKernels(int b) : b_(b) {}
  const char* name() const override { return "host (LAPACKE/CBLAS)"; }
  bool on_device() const override { return false; }
  void syrk(const double* l, double* a) override {
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, b_, b_, -1.0, l, b_, 1.0, a, b_);
  }
  void gemm(const double* x, const double* y, double* a) override {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b_, b_, b_, -1.0, x, b_, y, b_, 1.0, a, b_);
  }
  int potrf(double* a) override { return LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', b_, a, b_); }
  void trsm(const double* l, double* a) override {
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, b_, b_, 1.0, l, b_, a, b_);
  }
  void synchronize() override {}

 private:
  int b_;
};

}  // namespace

std::unique_ptr<TileKernels> make_host_tile_kernels(int b) {
  if (b <= 0) throw UsageError("tile kernels: the tile order must be positive");
  return std::make_unique<HostTileKernels>(b);
}

#if !REPRISE_TILES_HAVE_CUDA
bool cuda_tile_kernels_built() {
  return false;
}
std::unique_ptr<TileKernels> make_cuda_tile_kernels(int) {
  throw DeviceError(
      "tile kernels: this build has no cuSOLVER/cuBLAS kernels (CUDA was not found at configure "
      "time); rebuild with -DREPRISE_ENABLE_CUDA=ON on a machine with the CUDA toolkit");
}
#endif

}  // namespace reprise::apps
