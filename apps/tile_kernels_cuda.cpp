// Device tile kernels: cuSOLVER (POTRF) and cuBLAS (SYRK, GEMM, TRSM) on one stream of the current device.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <string>

#include "gpu/cuda_check.hpp"
#include "tile_kernels.hpp"

namespace reprise::apps {
namespace {

void check_cublas(cublasStatus_t rc, const char* call) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    throw DeviceError(std::string("tile kernels: ") + call + " failed: " + cublasGetStatusName(rc) + " (" +
                      cublasGetStatusString(rc) + ")");
}

void check_cusolver(cusolverStatus_t rc, const char* call) {
  if (rc != CUSOLVER_STATUS_SUCCESS)
    throw DeviceError(std::string("tile kernels: ") + call + " failed: cusolverStatus_t " +
                      std::to_string(static_cast<int>(rc)));
}

class CudaTileKernels final : public TileKernels {
 public:
  explicit CudaTileKernels(int b) : b_(b) {
    REPRISE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    check_cublas(cublasCreate(&blas_), "cublasCreate");
    check_cublas(cublasSetStream(blas_, stream_), "cublasSetStream");
    check_cusolver(cusolverDnCreate(&solver_), "cusolverDnCreate");
    check_cusolver(cusolverDnSetStream(solver_, stream_), "cusolverDnSetStream");
#if defined(CUSOLVER_VERSION) && CUSOLVER_VERSION >= 11500
    // Bit-identical results run after run: a rolled-back rank re-executes panels and must write the same bytes.
    check_cusolver(cusolverDnSetDeterministicMode(solver_, CUSOLVER_DETERMINISTIC_RESULTS),
                   "cusolverDnSetDeterministicMode");
#endif
    REPRISE_CUDA_CHECK(cudaMalloc(&info_, sizeof(int)));
  }
  ~CudaTileKernels() override {
    cudaStreamSynchronize(stream_);
    if (work_) cudaFree(work_);
    cudaFree(info_);
    cusolverDnDestroy(solver_);
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }
  CudaTileKernels(const CudaTileKernels&) = delete;
  CudaTileKernels& operator=(const CudaTileKernels&) = delete;

  const char* name() const override {
    return "device (cuSOLVER/cuBLAS)";
  }
  bool on_device() const override {
    return true;
  }
  void syrk(const double* l, double* a) override {
    const double alpha = -1.0, beta = 1.0;
    check_cublas(cublasDsyrk(blas_, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, b_, b_, &alpha, l, b_, &beta, a, b_),
                 "cublasDsyrk");
  }
  void gemm(const double* x, const double* y, double* a) override {
    const double alpha = -1.0, beta = 1.0;
    check_cublas(cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, b_, b_, b_, &alpha, x, b_, y, b_, &beta, a, b_),
                 "cublasDgemm");
  }
  int potrf(double* a) override {
    if (!work_) {
      check_cusolver(cusolverDnDpotrf_bufferSize(solver_, CUBLAS_FILL_MODE_LOWER, b_, a, b_, &lwork_),
                     "cusolverDnDpotrf_bufferSize");
      REPRISE_CUDA_CHECK(cudaMalloc(&work_, static_cast<std::size_t>(lwork_ > 0 ? lwork_ : 1) * sizeof(double)));
    }
    check_cusolver(cusolverDnDpotrf(solver_, CUBLAS_FILL_MODE_LOWER, b_, a, b_, work_, lwork_, info_),
                   "cusolverDnDpotrf");
    int info = 0;
    REPRISE_CUDA_CHECK(cudaMemcpyAsync(&info, info_, sizeof(int), cudaMemcpyDeviceToHost, stream_));
    REPRISE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return info;
  }
  void trsm(const double* l, double* a) override {
    const double alpha = 1.0;
    check_cublas(cublasDtrsm(blas_, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, b_,
                             b_, &alpha, l, b_, a, b_),
                 "cublasDtrsm");
  }
  void synchronize() override {
    REPRISE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  int b_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  double* work_ = nullptr;
  int lwork_ = 0;
  int* info_ = nullptr;
};

}  // namespace

bool cuda_tile_kernels_built() {
  return true;
}

std::unique_ptr<TileKernels> make_cuda_tile_kernels(int b) {
  if (b <= 0) throw UsageError("tile kernels: the tile order must be positive");
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    throw DeviceError(std::string("tile kernels: no usable GPU here (") +
                      (rc != cudaSuccess ? cudaGetErrorString(rc) : "no device") +
                      "): device tiles need one; use host tiles");
  }
  return std::make_unique<CudaTileKernels>(b);
}

}  // namespace reprise::apps
