// Host-twin backend: "device" memory is host memory and kernels are their host twins. It lets the whole device
// data path (digest, compact, pack, double-buffered drain, unpack) run and be tested without a GPU.
//
// Its streams keep CUDA's semantics at their strictest: work enqueued on a stream does not run when it is
// enqueued but when the host waits for it (synchronize, or wait on an event recorded after it), in stream order,
// on the waiting thread. Code that reads a kernel's or a copy's result without waiting for it reads stale bytes,
// and code that changes a copy's source before waiting for the copy sends the new bytes: the host-twin tests see
// every missing wait that a GPU would hit only by chance. Like cudaFree and cudaFreeHost, releasing a buffer first
// completes every stream's work, and destroying a stream completes its work (CUDA finishes it too).
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <unordered_set>

#include "gpu/align.hpp"
#include "gpu/backend.hpp"
#include "kernels/chunk_kernels.hpp"
#include "reprise/errors.hpp"

namespace reprise::gpu {
namespace {

// One stream's queue. `run_` is held while items run so they run in order even when several threads wait.
class WorkQueue {
 public:
  void push(std::function<void()> work) {
    std::lock_guard<std::mutex> lock(mutex_);
    work_.push_back(std::move(work));
  }
  /// How many items were ever enqueued: an event recorded now is complete once that many have run.
  std::uint64_t enqueued() {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_ + work_.size();
  }
  /// Runs the work enqueued before the `target`-th item completed (all of it for ~0), at most `most` items.
  void run_until(std::uint64_t target, std::uint64_t most = ~std::uint64_t{0}) {
    std::lock_guard<std::mutex> running(run_);
    for (std::uint64_t ran = 0; ran < most; ++ran) {
      std::function<void()> next;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (work_.empty() || done_ >= target) return;
        next = std::move(work_.front());
        work_.pop_front();
      }
      next();
      std::lock_guard<std::mutex> lock(mutex_);
      ++done_;
    }
  }
  bool completed(std::uint64_t target) {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_ >= target;
  }

 private:
  std::mutex run_, mutex_;
  std::deque<std::function<void()>> work_;
  std::uint64_t done_ = 0;  // items run
};

// The live streams, so that freeing memory can complete their work first (cudaFree synchronises the device).
class Device {
 public:
  void add(WorkQueue* q) {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_.insert(q);
  }
  void remove(WorkQueue* q) {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_.erase(q);
  }
  void synchronize() {
    std::lock_guard<std::mutex> lock(mutex_);  // held: a stream is not destroyed while its work runs here
    for (WorkQueue* q : queues_) q->run_until(~std::uint64_t{0});
  }

 private:
  std::mutex mutex_;
  std::unordered_set<WorkQueue*> queues_;
};

class DeferredStream final : public Stream {
 public:
  explicit DeferredStream(std::shared_ptr<Device> device)
      : device_(std::move(device)), queue_(std::make_shared<WorkQueue>()) {
    device_->add(queue_.get());
  }
  ~DeferredStream() override {
    queue_->run_until(~std::uint64_t{0});
    device_->remove(queue_.get());
  }
  const std::shared_ptr<WorkQueue>& queue() const { return queue_; }

 private:
  std::shared_ptr<Device> device_;
  std::shared_ptr<WorkQueue> queue_;
};

// Completed once its queue ran `target` items; it keeps the queue alive, as a CUDA event outlives its stream.
class QueueEvent final : public Event {
 public:
  QueueEvent(std::shared_ptr<WorkQueue> queue, std::uint64_t target) : queue_(std::move(queue)), target_(target) {}
  void wait() { queue_->run_until(target_); }
  bool query() {  // not complete: the device advances by one item, and the answer is still "not yet"
    if (queue_->completed(target_)) return true;
    queue_->run_until(target_, 1);
    return false;
  }

 private:
  std::shared_ptr<WorkQueue> queue_;
  std::uint64_t target_;
};

WorkQueue& queue_of(Stream& stream) {
  return *static_cast<DeferredStream&>(stream).queue();
}

class HostTwinBackend final : public Backend {
 public:
  const char* name() const override { return "host-twin"; }
  std::string device_description() const override { return "host (kernel host twins)"; }
  bool is_device_pointer(const void*) const override { return false; }
  Buffer alloc_device(std::size_t bytes) override { return alloc(bytes); }
  Buffer alloc_pinned(std::size_t bytes) override { return alloc(bytes); }
  std::unique_ptr<Stream> create_stream(bool) override { return std::make_unique<DeferredStream>(device_); }
  void synchronize(Stream& stream) override { queue_of(stream).run_until(~std::uint64_t{0}); }
  std::unique_ptr<Event> record(Stream& stream) override {
    const auto& queue = static_cast<DeferredStream&>(stream).queue();
    return std::make_unique<QueueEvent>(queue, queue->enqueued());
  }
  void wait(Event& event) override { static_cast<QueueEvent&>(event).wait(); }
  bool query(Event& event) override { return static_cast<QueueEvent&>(event).query(); }

  void digest(const void* region, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests,
              Stream& stream) override {
    queue_of(stream).push([=] { kernels::digest_chunks_host(region, bytes, chunk_bytes, digests); });
  }
  void compare_compact(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                       std::uint32_t* indices, std::uint32_t* count, Stream& stream) override {
    queue_of(stream).push([=] { *count = kernels::compare_compact_host(cur, prev, n, all, indices); });
  }
  void pack(const void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
            std::uint32_t n, void* staging, Stream& stream) override {
    queue_of(stream).push([=] { kernels::pack_host(region, bytes, chunk_bytes, indices, n, staging); });
  }
  void unpack(void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices, std::uint32_t n,
              const void* staging, Stream& stream) override {
    queue_of(stream).push([=] { kernels::unpack_host(region, bytes, chunk_bytes, indices, n, staging); });
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    copy(dst, src, bytes, stream);
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    copy(dst, src, bytes, stream);
  }
  void copy_device(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    copy(dst, src, bytes, stream);
  }

 private:
  static void copy(void* dst, const void* src, std::size_t bytes, Stream& stream) {
    if (bytes) queue_of(stream).push([=] { std::memcpy(dst, src, bytes); });  // (null pointers when empty)
  }
  Buffer alloc(std::size_t bytes) {
    void* p = std::aligned_alloc(kDeviceAlign, align_up(bytes, kDeviceAlign) + kDeviceAlign);
    if (!p) throw std::bad_alloc();
    return Buffer(p, bytes, [device = device_](void* q) {
      device->synchronize();
      std::free(q);
    });
  }

  std::shared_ptr<Device> device_ = std::make_shared<Device>();
};

}  // namespace

const char* to_string(DigestKind kind) {
  switch (kind) {
    case DigestKind::Xxh3:
      return "xxh3";
    case DigestKind::Lanes64:
      return "lanes64";
  }
  return "unknown";
}

std::unique_ptr<Backend> make_host_twin_backend() {
  return std::make_unique<HostTwinBackend>();
}

std::unique_ptr<Backend> make_backend(DeviceBackendKind kind, const std::string& what) {
  switch (kind) {
    case DeviceBackendKind::HostTwin:
      return make_host_twin_backend();
    case DeviceBackendKind::Cuda:
      return make_cuda_backend();
    case DeviceBackendKind::Auto:
      break;
  }
  if (cuda_device_count() > 0) return make_cuda_backend();
  throw DeviceError(what + " but " +
                    (cuda_compiled() ? "no CUDA device is usable" : "this Reprise was built without CUDA") +
                    " (REPRISE_DEVICE_BACKEND=host-twin runs the kernels' host twins on host memory, for tests)");
}

#if !defined(REPRISE_HAVE_CUDA)
bool cuda_compiled() {
  return false;
}
int cuda_device_count() {
  return 0;
}
std::vector<std::string> cuda_pci_bus_ids() {
  return {};
}
std::unique_ptr<Backend> make_cuda_backend() {
  throw DeviceError(
      "this Reprise was built without CUDA, so device memory cannot be checkpointed: rebuild with nvcc "
      "available (-DREPRISE_ENABLE_CUDA=ON)");
}
#endif

}  // namespace reprise::gpu
