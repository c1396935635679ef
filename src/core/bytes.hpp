// Host byte buffers for version payloads, and a pool that recycles them: a fresh allocation costs a page fault
// per 4 KiB on first touch, which would land in the application-visible part of a checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace reprise::core {

/// An owned, uninitialised host buffer: 64-byte aligned heap memory (below 1 MiB), an anonymous mapping that can
/// grow in place (1 MiB and more), or memory from elsewhere (pinned memory from gpu::Backend) released by its own
/// deleter.
class HostBytes {
 public:
  /// Buffers of this size and larger are mappings (growable).
  static constexpr std::size_t kMapMin = std::size_t(1) << 20;
  HostBytes() = default;
  explicit HostBytes(std::size_t bytes);
  HostBytes(std::byte* data, std::size_t bytes, std::function<void(std::byte*)> release, bool pinned);
  /// Page-locked (DMA straight into it).
  bool pinned() const { return pinned_; }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  /// Uses the first `bytes` bytes (<= capacity).
  void resize_within(std::size_t bytes);
  /// The largest size() this buffer has had: its holders wrote that much, so those pages are backed (their first
  /// touch, a page fault each, is paid).
  std::size_t touched() const { return touched_; }
  /// A mapping: grow() can enlarge it.
  bool growable() const { return mapped_ && data_; }
  /// Gives back to the system the whole pages past size() that were touched (a buffer sized for a larger
  /// version, or prepared with headroom), where this buffer's memory is its own (not pinned, not from elsewhere):
  /// they read as zeros if touched again, at the cost of a first touch. Returns the bytes given back; touched()
  /// drops by as much. Not while another thread reads touched().
  std::size_t release_unused();
  /// Enlarges a mapping to at least `capacity` bytes (mremap: the pages already touched stay, without a copy;
  /// new ones are backed on first touch). May move data(). Throws std::bad_alloc when the system refuses,
  /// std::logic_error for a buffer that is not growable.
  void grow(std::size_t capacity);

 private:
  std::unique_ptr<std::byte, std::function<void(std::byte*)>> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::size_t touched_ = 0;
  bool pinned_ = false;
  bool mapped_ = false;
  bool own_ = false;  // memory this class allocated (release_unused() may give pages of it back)
};

/// Recycles HostBytes. take() returns a buffer of at least `bytes`: a kept one already touched that far (the
/// least touched such), else the kept one touched the most, grown if it is a mapping (only its pages beyond what
/// was touched are new), else a new one (`allocate`). Versions' sizes vary from one checkpoint to the next
/// (differential ones grow as the changed part of the data grows), so a buffer kept from an earlier version
/// usually needs growing rather than replacing: without growth, most versions went into new memory. A kept buffer
/// touched more than twice `bytes` (plus 1 MiB) does not serve it, so one huge buffer does not hold a tiny
/// version. give() hands one back; at most `max_buffers` are kept (the least touched goes).
class BufferPool {
 public:
  using Allocate = std::function<HostBytes(std::size_t)>;
  explicit BufferPool(std::size_t max_buffers = 8, Allocate allocate = nullptr)
      : max_buffers_(max_buffers), allocate_(std::move(allocate)) {}
  /// `reused`: set to whether the buffer came from the pool (touched, at least in part) rather than newly
  /// allocated. `passed_over`: set to whether it is new although the pool kept buffers (all of them too large to
  /// serve `bytes`, by the waste bound above).
  HostBytes take(std::size_t bytes, bool* reused = nullptr, bool* passed_over = nullptr);
  void give(HostBytes&& buffer);
  /// Makes sure a buffer that take(bytes) would use is waiting, already written once up to `bytes` plus a quarter
  /// (first touch: a page fault per 4 KiB), so that the next version of about this size is packed into warm
  /// memory: the kept buffer take() would grow is grown and touched, or a new one is. Called off the
  /// application's path, after a version is stored.
  void prepare(std::size_t bytes);
  /// The same for the first version of newly protected regions, before any version exists: one buffer kept
  /// apart from those give() returns. A reservation that the kept one does not fit grows it (touching only the
  /// new part) or replaces it, so regions protected one by one never hold more than one such buffer.
  void reserve(std::size_t bytes);
  /// Bytes touched in the kept buffers (memory they hold).
  std::size_t held_bytes() const;
  /// Frees kept buffers, the least touched first, until they hold at most `bytes` (a memory budget).
  void trim(std::size_t bytes);
  /// trim(bytes), for good: from then on the pool holds at most `bytes` (the lowest limit given): a buffer handed
  /// back that does not fit beside the kept ones is freed, and prepare() makes none that would not fit.
  void limit(std::size_t bytes);
  /// Called (on the thread that takes or prepares, outside the pool's lock) before memory is touched for the first
  /// time, with the size of the buffer that needs it: a new one, or a kept one to grow, which the pool no longer
  /// counts in held_bytes() then (so the caller's count of what the rank holds misses all of it, not only its new
  /// pages), and whether it is only a head start (prepare(), reserve()) or needed (take()). A memory budget answers
  /// whether the rank has room for it, giving up other memory kept only for reuse first where it is needed (it may
  /// trim this pool too); a head start without room is not made, take() goes on. Set before the pool is shared.
  using NewMemory = std::function<bool(std::size_t bytes, bool head_start)>;
  /// Called once what a `true` answer allowed is counted where it lives again (back in this pool, or returned by
  /// take(): its taker counts it from there), also when making it failed; just before, so that no sample counts it
  /// twice. A budget counts the bytes it allowed until then: memory being touched for a buffer is in no pool and no
  /// version, and two threads that each found room for a buffer would otherwise both make theirs.
  using NewMemoryCounted = std::function<void(std::size_t bytes)>;
  void on_new_memory(NewMemory hook, NewMemoryCounted counted = nullptr) {
    new_memory_ = std::move(hook);
    counted_ = std::move(counted);
  }

 private:
  // The kept buffer that take(bytes) would use (an index in free_, free_.size() for reserved_) and whether it is
  // touched that far already; nullopt when none may serve.
  struct Pick {
    std::size_t index;
    bool warm;
    std::size_t touched;
  };
  std::optional<Pick> pick_locked(std::size_t bytes) const;
  HostBytes remove_locked(std::size_t index);
  std::size_t held_locked() const;
  HostBytes fresh_touched(std::size_t bytes);
  mutable std::mutex mutex_;
  std::vector<HostBytes> free_;
  HostBytes reserved_;
  std::size_t max_buffers_;
  std::size_t limit_ = SIZE_MAX;  // limit()
  Allocate allocate_;
  NewMemory new_memory_;
  NewMemoryCounted counted_;
  // The answer of the hook for one buffer; the counted hook runs once after a `true` (done(), or at the end of the
  // scope when making the buffer threw).
  class Announced {
   public:
    Announced(const BufferPool& pool, std::size_t bytes, bool head_start)
        : pool_(pool), bytes_(bytes), room_(!pool.new_memory_ || bytes == 0 || pool.new_memory_(bytes, head_start)) {
      owed_ = room_ && pool.new_memory_ && bytes > 0;
    }
    Announced(const Announced&) = delete;
    Announced& operator=(const Announced&) = delete;
    ~Announced() { done(); }
    bool room() const { return room_; }
    void done() {
      if (std::exchange(owed_, false) && pool_.counted_) pool_.counted_(bytes_);
    }

   private:
    const BufferPool& pool_;
    std::size_t bytes_;
    bool room_, owed_ = false;
  };
};

/// A buffer from `pool` (take(bytes, reused)) that goes back to the pool when its last holder drops it; freed
/// instead when the pool is gone by then.
std::shared_ptr<HostBytes> take_pooled(const std::shared_ptr<BufferPool>& pool, std::size_t bytes,
                                       bool* reused = nullptr, bool* passed_over = nullptr);

}  // namespace reprise::core
