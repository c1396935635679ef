#include "core/bytes.hpp"

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace reprise::core {

HostBytes::HostBytes(std::size_t bytes) : size_(bytes), capacity_(bytes) {
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p) throw std::bad_alloc();
  data_ = std::unique_ptr<std::byte, std::function<void(std::byte*)>>(static_cast<std::byte*>(p),
                                                                      [](std::byte* q) { std::free(q); });
}

HostBytes::HostBytes(std::byte* data, std::size_t bytes, std::function<void(std::byte*)> release, bool pinned)
    : data_(data, std::move(release)), size_(bytes), capacity_(bytes), pinned_(pinned) {}

void HostBytes::resize_within(std::size_t bytes) {
  if (bytes > capacity_) throw std::length_error("HostBytes::resize_within beyond capacity");
  size_ = bytes;
}

namespace {
// Reuse only when the waste is bounded, so one huge buffer does not serve every tiny version.
bool reusable(const HostBytes& b, std::size_t bytes) {
  return b.capacity() >= bytes && b.capacity() <= 2 * bytes + (1u << 20);
}
}  // namespace

HostBytes BufferPool::take(std::size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t best = free_.size();
    for (std::size_t i = 0; i < free_.size(); ++i)
      if (free_[i].capacity() >= bytes && (best == free_.size() || free_[i].capacity() < free_[best].capacity()))
        best = i;
    if (best != free_.size() && reusable(free_[best], bytes)) {
      HostBytes out = std::move(free_[best]);
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      out.resize_within(bytes);
      return out;
    }
  }
  return allocate_ ? allocate_(bytes) : HostBytes(bytes);
}

void BufferPool::give(HostBytes&& buffer) {
  if (!buffer.data()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() >= max_buffers_) free_.erase(free_.begin());
  free_.push_back(std::move(buffer));
}

void BufferPool::prepare(std::size_t bytes) {
  if (bytes == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& b : free_)
      if (reusable(b, bytes)) return;
  }
  // A quarter of headroom, so that slightly larger versions reuse it too.
  HostBytes fresh = allocate_ ? allocate_(bytes + bytes / 4) : HostBytes(bytes + bytes / 4);
  for (std::size_t off = 0; off < fresh.size(); off += 4096) fresh.data()[off] = std::byte{0};
  give(std::move(fresh));
}

std::size_t BufferPool::held_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const auto& b : free_) n += b.capacity();
  return n;
}

}  // namespace reprise::core
