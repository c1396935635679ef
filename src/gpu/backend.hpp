// Device abstraction: the operations the checkpoint data path needs from where device data lives.
// Two implementations: CUDA (cuda_backend.cpp, kernels/*.cu) and the host twin (host_backend.cpp,
// kernels/host_twins.cpp) which runs the same algorithms on host memory so the device path is tested without a
// GPU. Nothing outside src/gpu and kernels includes CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reprise/config.hpp"

namespace reprise::gpu {

/// Digest algorithms, as recorded in checkpoint manifests.
enum class DigestKind : std::uint8_t {
  Xxh3 = 1,     ///< XXH3-64 of the chunk bytes (host memory)
  Lanes64 = 2,  ///< the lane digest of kernels/chunk_kernels.hpp (device memory; host twin identical)
};
const char* to_string(DigestKind kind);

/// An owned allocation (device, pinned or host memory) released by its deleter.
class Buffer {
 public:
  Buffer() = default;
  Buffer(void* data, std::size_t bytes, std::function<void(void*)> release)
      : data_(data), bytes_(bytes), release_(std::move(release)) {}
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (data_ && release_) release_(data_);
  }
  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t size() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  void swap(Buffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    std::swap(release_, o.release_);
  }
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::function<void(void*)> release_;
};

/// An ordered queue of device work (cudaStream_t for CUDA; for the host twin, work that runs when the host waits
/// for it: see host_backend.cpp).
class Stream {
 public:
  virtual ~Stream() = default;
};

/// A point in a stream that the host can wait for (cudaEvent_t for CUDA).
class Event {
 public:
  virtual ~Event() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// "cuda" or "host-twin".
  virtual const char* name() const = 0;
  /// Human-readable device description (GPU name, or "host").
  virtual std::string device_description() const = 0;

  virtual Buffer alloc_device(std::size_t bytes) = 0;
  /// Whether `p` points into memory the host cannot read directly (CUDA device memory; managed and host memory
  /// are host-readable). The host twin has no such memory.
  virtual bool is_device_pointer(const void* p) const = 0;
  /// Page-locked host memory (cudaHostAlloc) where the backend has it; plain host memory otherwise.
  virtual Buffer alloc_pinned(std::size_t bytes) = 0;
  virtual std::unique_ptr<Stream> create_stream(bool low_priority) = 0;
  virtual void synchronize(Stream& stream) = 0;
  virtual std::unique_ptr<Event> record(Stream& stream) = 0;
  virtual void wait(Event& event) = 0;  ///< host blocks until the event completed
  /// Whether the event completed, without blocking (cudaEventQuery). The host twin's device advances only when
  /// the host asks: each query of an event not yet complete runs one item of its stream's work and says false.
  virtual bool query(Event& event) = 0;

  // Kernels; all asynchronous on `stream`; pointers below are device pointers unless stated otherwise.
  /// digests[i] = Lanes64 digest of chunk i of [region, region + bytes); chunk i has
  /// min(chunk_bytes, bytes - i * chunk_bytes) bytes.
  virtual void digest(const void* region, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests,
                      Stream& stream) = 0;
  /// Writes, ascending, the indices i < n with cur[i] != prev[i] (every i when `all`) to `indices`, and their
  /// number to `*count` (all device memory). `prev` may be null when `all`.
  virtual void compare_compact(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                               std::uint32_t* indices, std::uint32_t* count, Stream& stream) = 0;
  /// staging[j * chunk_bytes ...] = chunk indices[j] of the region, for j < n (indices ascending, so only the
  /// last packed chunk can be partial).
  virtual void pack(const void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
                    std::uint32_t n, void* staging, Stream& stream) = 0;
  /// Inverse of pack: chunk indices[j] of the region = staging[j * chunk_bytes ...].
  virtual void unpack(void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
                      std::uint32_t n, const void* staging, Stream& stream) = 0;

  virtual void copy_to_host(void* host_dst, const void* dev_src, std::size_t bytes, Stream& stream) = 0;
  virtual void copy_to_device(void* dev_dst, const void* host_src, std::size_t bytes, Stream& stream) = 0;
  virtual void copy_device(void* dev_dst, const void* dev_src, std::size_t bytes, Stream& stream) = 0;
};

/// The host-twin backend (always available).
std::unique_ptr<Backend> make_host_twin_backend();
/// True when Reprise was built with CUDA.
bool cuda_compiled();
/// Number of usable CUDA devices (0 without CUDA or without a GPU; never throws).
int cuda_device_count();
/// PCI bus ids ("0000:41:00.0") of the CUDA devices, in device order; empty without CUDA or GPUs.
std::vector<std::string> cuda_pci_bus_ids();
/// The CUDA backend on the current device. Throws DeviceError when not built with CUDA or no GPU is usable.
std::unique_ptr<Backend> make_cuda_backend();
/// The backend Config::device_backend (REPRISE_DEVICE_BACKEND) names: Auto is CUDA when a GPU is usable; otherwise
/// a DeviceError saying what to do (`what`: what needed device memory, e.g. "a device-memory region was protected").
std::unique_ptr<Backend> make_backend(DeviceBackendKind kind, const std::string& what);

}  // namespace reprise::gpu
