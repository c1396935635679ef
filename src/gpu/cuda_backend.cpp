// CUDA backend: device memory, pinned host memory, streams and events from the CUDA runtime, and the chunk
// kernels of kernels/chunk_kernels.cu.
//
// Threads: the application thread digests and packs while a background thread drains, so every method may be
// called from either. Each call makes the backend's device current for its duration (a new thread starts on
// device 0, which is the wrong GPU for ranks that share a node), and the compaction scratch is the only
// mutable state, guarded by a mutex.
#include <algorithm>
#include <cstdio>
#include <mutex>

#include "gpu/backend.hpp"
#include "gpu/cuda_check.hpp"
#include "kernels/chunk_kernels_cuda.hpp"

namespace reprise::gpu {
namespace {

// Makes `device` current on the calling thread and restores the caller's device on exit.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    REPRISE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ == device)
      previous_ = -1;
    else
      REPRISE_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// Release paths never throw (they run in destructors); a failure there (e.g. the driver already shutting down
// at exit) is dropped and cleared so it does not surface in an unrelated later call.
template <class Release>
void release_on(int device, Release release) noexcept {
  int previous = -1;
  bool failed = cudaGetDevice(&previous) != cudaSuccess;
  if (failed || previous == device)
    previous = -1;
  else
    failed = cudaSetDevice(device) != cudaSuccess;
  failed = release() != cudaSuccess || failed;
  if (previous >= 0) failed = cudaSetDevice(previous) != cudaSuccess || failed;
  if (failed) (void)cudaGetLastError();
}

class CudaStream final : public Stream {
 public:
  CudaStream(int device, bool low_priority) : device_(device) {
    DeviceScope on(device);
    int least = 0, greatest = 0;
    REPRISE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    // Numerically larger = lower priority: the drain yields to the application's kernels.
    REPRISE_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, low_priority ? least : greatest));
  }
  ~CudaStream() override {
    release_on(device_, [this] { return cudaStreamDestroy(stream); });
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t stream = nullptr;

 private:
  int device_;
};

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(int device) : device_(device) {
    DeviceScope on(device);
    REPRISE_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  ~CudaEvent() override {
    release_on(device_, [this] { return cudaEventDestroy(event); });
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t event = nullptr;

 private:
  int device_;
};

cudaStream_t raw(Stream& s) {
  return static_cast<CudaStream&>(s).stream;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    REPRISE_CUDA_CHECK(cudaGetDevice(&device_));
    REPRISE_CUDA_CHECK(cudaGetDeviceProperties(&props_, device_));
    REPRISE_CUDA_CHECK(cudaEventCreateWithFlags(&scratch_free_, cudaEventDisableTiming));
  }
  ~CudaBackend() override {
    release_on(device_, [this] {
      const cudaError_t done = cudaEventSynchronize(scratch_free_);  // queued compactions may still use it
      const cudaError_t freed = scratch_ ? cudaFree(scratch_) : cudaSuccess;
      const cudaError_t destroyed = cudaEventDestroy(scratch_free_);
      return done != cudaSuccess ? done : freed != cudaSuccess ? freed : destroyed;
    });
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const char* name() const override { return "cuda"; }
  std::string device_description() const override {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s (device %d, sm_%d%d, %.1f GiB)", props_.name, device_, props_.major,
                  props_.minor, double(props_.totalGlobalMem) / double(1u << 30));
    return buf;
  }

  Buffer alloc_device(std::size_t bytes) override {
    DeviceScope on(device_);
    void* p = nullptr;
    REPRISE_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    const int device = device_;
    return Buffer(p, bytes, [device](void* q) { release_on(device, [q] { return cudaFree(q); }); });
  }
  bool is_device_pointer(const void* p) const override {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // not a pointer CUDA knows: host memory
      return false;
    }
    return a.type == cudaMemoryTypeDevice;
  }
  Buffer alloc_pinned(std::size_t bytes) override {
    DeviceScope on(device_);
    void* p = nullptr;
    REPRISE_CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));
    const int device = device_;
    return Buffer(p, bytes, [device](void* q) { release_on(device, [q] { return cudaFreeHost(q); }); });
  }
  std::unique_ptr<Stream> create_stream(bool low_priority) override {
    return std::make_unique<CudaStream>(device_, low_priority);
  }
  void synchronize(Stream& stream) override { REPRISE_CUDA_CHECK(cudaStreamSynchronize(raw(stream))); }
  std::unique_ptr<Event> record(Stream& stream) override {
    auto e = std::make_unique<CudaEvent>(device_);
    DeviceScope on(device_);
    REPRISE_CUDA_CHECK(cudaEventRecord(e->event, raw(stream)));
    return e;
  }
  void wait(Event& event) override { REPRISE_CUDA_CHECK(cudaEventSynchronize(static_cast<CudaEvent&>(event).event)); }
  bool query(Event& event) override {
    const cudaError_t rc = cudaEventQuery(static_cast<CudaEvent&>(event).event);
    if (rc == cudaErrorNotReady) return false;
    REPRISE_CUDA_CHECK(rc);
    return true;
  }

  void digest(const void* region, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests,
              Stream& stream) override {
    DeviceScope on(device_);
    REPRISE_CUDA_CHECK(kernels::launch_digest(region, bytes, chunk_bytes, digests, raw(stream)));
  }
  void compare_compact(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                       std::uint32_t* indices, std::uint32_t* count, Stream& stream) override {
    DeviceScope on(device_);
    // One scratch serves every stream. Its users are ordered on the device, not the host: each call's kernels
    // wait for the event recorded after the previous call's, whichever stream (alive or not) that was on.
    std::lock_guard<std::mutex> lock(scratch_mutex_);
    const std::size_t words = kernels::compact_scratch_words(n);
    if (words > scratch_words_) {
      const std::size_t grown = std::max<std::size_t>({words, 2 * scratch_words_, 1024});
      REPRISE_CUDA_CHECK(cudaEventSynchronize(scratch_free_));  // the old scratch's last users are done
      if (scratch_) {
        REPRISE_CUDA_CHECK(cudaFree(scratch_));
        scratch_ = nullptr;
        scratch_words_ = 0;
      }
      REPRISE_CUDA_CHECK(cudaMalloc(&scratch_, grown * sizeof(std::uint32_t)));
      scratch_words_ = grown;
    }
    REPRISE_CUDA_CHECK(cudaStreamWaitEvent(raw(stream), scratch_free_, 0));
    REPRISE_CUDA_CHECK(kernels::launch_compare_compact(cur, prev, n, all, indices, count, scratch_, raw(stream)));
    REPRISE_CUDA_CHECK(cudaEventRecord(scratch_free_, raw(stream)));
  }
  void pack(const void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
            std::uint32_t n, void* staging, Stream& stream) override {
    DeviceScope on(device_);
    REPRISE_CUDA_CHECK(kernels::launch_pack(region, bytes, chunk_bytes, indices, n, staging, raw(stream)));
  }
  void unpack(void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices, std::uint32_t n,
              const void* staging, Stream& stream) override {
    DeviceScope on(device_);
    REPRISE_CUDA_CHECK(kernels::launch_unpack(region, bytes, chunk_bytes, indices, n, staging, raw(stream)));
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    copy(dst, src, bytes, cudaMemcpyHostToDevice, stream);
  }
  void copy_device(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    copy(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
  }

 private:
  void copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, Stream& stream) {
    if (bytes == 0) return;
    DeviceScope on(device_);
    REPRISE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, raw(stream)));
  }

  int device_ = 0;
  cudaDeviceProp props_{};
  std::mutex scratch_mutex_;
  std::uint32_t* scratch_ = nullptr;
  std::size_t scratch_words_ = 0;
  cudaEvent_t scratch_free_ = nullptr;  // recorded after the kernels of the last compare_compact
};

}  // namespace

bool cuda_compiled() {
  return true;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the "no driver" / "no device" error so it does not surface later
    return 0;
  }
  return n;
}

std::vector<std::string> cuda_pci_bus_ids() {
  std::vector<std::string> ids;
  for (int d = 0; d < cuda_device_count(); ++d) {
    char bus[64] = "";
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) != cudaSuccess) {
      cudaGetLastError();
      return {};
    }
    ids.emplace_back(bus);
  }
  return ids;
}

std::unique_ptr<Backend> make_cuda_backend() {
  if (cuda_device_count() == 0)
    throw DeviceError(
        "no usable CUDA device (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them): run on a GPU node, or "
        "set REPRISE_DEVICE_BACKEND=host-twin to run the kernels' host twins on host memory (tests only)");
  return std::make_unique<CudaBackend>();
}

}  // namespace reprise::gpu
