// Host byte buffers for version payloads, and a pool that recycles them: a fresh allocation costs a page fault
// per 4 KiB on first touch, which would land in the application-visible part of a checkpoint.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace reprise::core {

/// An owned, uninitialised, 64-byte aligned host buffer.
class HostBytes {
 public:
  HostBytes() = default;
  explicit HostBytes(std::size_t bytes);
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  /// Uses the first `bytes` bytes (<= capacity).
  void resize_within(std::size_t bytes);

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

/// Recycles HostBytes. take() returns a buffer of at least `bytes` (reusing the smallest that fits);
/// give() hands one back. Bounded: at most `max_buffers` are kept.
class BufferPool {
 public:
  explicit BufferPool(std::size_t max_buffers = 8) : max_buffers_(max_buffers) {}
  HostBytes take(std::size_t bytes);
  void give(HostBytes&& buffer);
  std::size_t held_bytes() const;

 private:
  mutable std::mutex mutex_;
  std::vector<HostBytes> free_;
  std::size_t max_buffers_;
};

}  // namespace reprise::core
