// CUDA backend: device memory, pinned host memory, streams and events from the CUDA runtime, and the chunk
// kernels of kernels/chunk_kernels.cu.
#include <cstdio>
#include <mutex>

#include "gpu/backend.hpp"
#include "gpu/cuda_check.hpp"
#include "kernels/chunk_kernels_cuda.hpp"

namespace reprise::gpu {
namespace {

class CudaStream final : public Stream {
 public:
  explicit CudaStream(bool low_priority) {
    int least = 0, greatest = 0;
    REPRISE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    // Numerically larger = lower priority: the drain yields to the application's kernels.
    REPRISE_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, low_priority ? least : greatest));
  }
  ~CudaStream() override { cudaStreamDestroy(stream); }
  cudaStream_t stream = nullptr;
};

class CudaEvent final : public Event {
 public:
  CudaEvent() { REPRISE_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)); }
  ~CudaEvent() override { cudaEventDestroy(event); }
  cudaEvent_t event = nullptr;
};

cudaStream_t raw(Stream& s) {
  return static_cast<CudaStream&>(s).stream;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    REPRISE_CUDA_CHECK(cudaGetDevice(&device_));
    REPRISE_CUDA_CHECK(cudaGetDeviceProperties(&props_, device_));
  }
  ~CudaBackend() override {
    if (scratch_) cudaFree(scratch_);
  }

  const char* name() const override { return "cuda"; }
  std::string device_description() const override {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s (device %d, sm_%d%d, %.1f GiB)", props_.name, device_, props_.major,
                  props_.minor, double(props_.totalGlobalMem) / (1u << 30));
    return buf;
  }

  Buffer alloc_device(std::size_t bytes) override {
    void* p = nullptr;
    REPRISE_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return Buffer(p, bytes, [](void* q) { cudaFree(q); });
  }
  Buffer alloc_pinned(std::size_t bytes) override {
    void* p = nullptr;
    REPRISE_CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));
    return Buffer(p, bytes, [](void* q) { cudaFreeHost(q); });
  }
  std::unique_ptr<Stream> create_stream(bool low_priority) override {
    return std::make_unique<CudaStream>(low_priority);
  }
  void synchronize(Stream& stream) override { REPRISE_CUDA_CHECK(cudaStreamSynchronize(raw(stream))); }
  std::unique_ptr<Event> record(Stream& stream) override {
    auto e = std::make_unique<CudaEvent>();
    REPRISE_CUDA_CHECK(cudaEventRecord(e->event, raw(stream)));
    return e;
  }
  void wait(Event& event) override { REPRISE_CUDA_CHECK(cudaEventSynchronize(static_cast<CudaEvent&>(event).event)); }

  void digest(const void* region, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests,
              Stream& stream) override {
    REPRISE_CUDA_CHECK(kernels::launch_digest(region, bytes, chunk_bytes, digests, raw(stream)));
  }
  void compare_compact(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                       std::uint32_t* indices, std::uint32_t* count, Stream& stream) override {
    // The scratch is used by the kernels after this call returns: serialise users on one stream order
    // by making every call synchronous on the scratch's last user.
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t words = kernels::compact_scratch_words(n);
    if (words > scratch_words_) {
      if (scratch_) {
        REPRISE_CUDA_CHECK(cudaDeviceSynchronize());
        cudaFree(scratch_);
        scratch_ = nullptr;
      }
      REPRISE_CUDA_CHECK(cudaMalloc(&scratch_, words * sizeof(std::uint32_t)));
      scratch_words_ = words;
    }
    if (scratch_stream_ && scratch_stream_ != raw(stream)) REPRISE_CUDA_CHECK(cudaStreamSynchronize(scratch_stream_));
    scratch_stream_ = raw(stream);
    REPRISE_CUDA_CHECK(kernels::launch_compare_compact(cur, prev, n, all, indices, count, scratch_, raw(stream)));
  }
  void pack(const void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
            std::uint32_t n, void* staging, Stream& stream) override {
    REPRISE_CUDA_CHECK(kernels::launch_pack(region, bytes, chunk_bytes, indices, n, staging, raw(stream)));
  }
  void unpack(void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices, std::uint32_t n,
              const void* staging, Stream& stream) override {
    REPRISE_CUDA_CHECK(kernels::launch_unpack(region, bytes, chunk_bytes, indices, n, staging, raw(stream)));
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    if (bytes) REPRISE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, raw(stream)));
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    if (bytes) REPRISE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, raw(stream)));
  }
  void copy_device(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    if (bytes) REPRISE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, raw(stream)));
  }

 private:
  int device_ = 0;
  cudaDeviceProp props_{};
  std::mutex mutex_;
  std::uint32_t* scratch_ = nullptr;
  std::size_t scratch_words_ = 0;
  cudaStream_t scratch_stream_ = nullptr;
};

}  // namespace

bool cuda_compiled() {
  return true;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend() {
  if (cuda_device_count() == 0)
    throw DeviceError(
        "no usable CUDA device (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them): run on a GPU node, or "
        "set REPRISE_DEVICE_BACKEND=host-twin to run the kernels' host twins on host memory (tests only)");
  return std::make_unique<CudaBackend>();
}

}  // namespace reprise::gpu
