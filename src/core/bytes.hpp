// Host byte buffers for version payloads, and a pool that recycles them: a fresh allocation costs a page fault
// per 4 KiB on first touch, which would land in the application-visible part of a checkpoint.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace reprise::core {

/// An owned, uninitialised host buffer: 64-byte aligned heap memory, or memory from elsewhere (pinned memory
/// from gpu::Backend) released by its own deleter.
class HostBytes {
 public:
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

 private:
  std::unique_ptr<std::byte, std::function<void(std::byte*)>> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  bool pinned_ = false;
};

/// Recycles HostBytes. take() returns a buffer of at least `bytes` (reusing the smallest that fits, else
/// allocating with `allocate`); give() hands one back. Bounded: at most `max_buffers` are kept.
class BufferPool {
 public:
  using Allocate = std::function<HostBytes(std::size_t)>;
  explicit BufferPool(std::size_t max_buffers = 8, Allocate allocate = nullptr)
      : max_buffers_(max_buffers), allocate_(std::move(allocate)) {}
  /// `reused`: set to whether the buffer came from the pool (already touched) rather than newly allocated.
  HostBytes take(std::size_t bytes, bool* reused = nullptr);
  void give(HostBytes&& buffer);
  /// Makes sure a buffer that take(bytes) would reuse is waiting, already written once (first touch: a page fault
  /// per 4 KiB), so that the next version of about this size is packed into warm memory. Called off the
  /// application's path, after a version is stored.
  void prepare(std::size_t bytes);
  /// The same for the first version of newly protected regions, before any version exists: one buffer kept
  /// apart from those give() returns. A reservation that the kept one does not fit replaces it (the old one is
  /// freed), so regions protected one by one never hold more than one such buffer.
  void reserve(std::size_t bytes);
  std::size_t held_bytes() const;

 private:
  bool fits_locked(std::size_t bytes) const;  // a kept buffer take(bytes) would reuse
  HostBytes fresh_touched(std::size_t bytes);
  mutable std::mutex mutex_;
  std::vector<HostBytes> free_;
  HostBytes reserved_;
  std::size_t max_buffers_;
  Allocate allocate_;
};

/// A buffer from `pool` (take(bytes, reused)) that goes back to the pool when its last holder drops it; freed
/// instead when the pool is gone by then.
std::shared_ptr<HostBytes> take_pooled(const std::shared_ptr<BufferPool>& pool, std::size_t bytes,
                                       bool* reused = nullptr);

}  // namespace reprise::core
