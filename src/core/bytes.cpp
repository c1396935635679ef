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

HostBytes BufferPool::take(std::size_t bytes, bool* reused) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HostBytes* best = nullptr;  // the smallest kept buffer that holds `bytes`
    for (HostBytes& b : free_)
      if (b.capacity() >= bytes && (!best || b.capacity() < best->capacity())) best = &b;
    if (reserved_.data() && reserved_.capacity() >= bytes && (!best || reserved_.capacity() < best->capacity()))
      best = &reserved_;
    if (best && reusable(*best, bytes)) {
      HostBytes out = std::move(*best);
      if (best == &reserved_)
        reserved_ = HostBytes();
      else
        free_.erase(free_.begin() + (best - free_.data()));
      out.resize_within(bytes);
      if (reused) *reused = true;
      return out;
    }
  }
  if (reused) *reused = false;
  return allocate_ ? allocate_(bytes) : HostBytes(bytes);
}

void BufferPool::give(HostBytes&& buffer) {
  if (!buffer.data()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() >= max_buffers_) free_.erase(free_.begin());
  free_.push_back(std::move(buffer));
}

bool BufferPool::fits_locked(std::size_t bytes) const {
  for (const auto& b : free_)
    if (reusable(b, bytes)) return true;
  return reserved_.data() && reusable(reserved_, bytes);
}

HostBytes BufferPool::fresh_touched(std::size_t bytes) {
  // A quarter of headroom, so that slightly larger versions reuse it too.
  HostBytes fresh = allocate_ ? allocate_(bytes + bytes / 4) : HostBytes(bytes + bytes / 4);
  for (std::size_t off = 0; off < fresh.size(); off += 4096) fresh.data()[off] = std::byte{0};
  return fresh;
}

void BufferPool::prepare(std::size_t bytes) {
  if (bytes == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fits_locked(bytes)) return;
  }
  give(fresh_touched(bytes));
}

void BufferPool::reserve(std::size_t bytes) {
  if (bytes == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fits_locked(bytes)) return;
  }
  HostBytes fresh = fresh_touched(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fits_locked(bytes)) std::swap(reserved_, fresh);
}  // (`fresh`, now the replaced buffer or the unneeded new one, is freed here, after the lock)

std::size_t BufferPool::held_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const auto& b : free_) n += b.capacity();
  return n + (reserved_.data() ? reserved_.capacity() : 0);
}

namespace {
struct PooledBytes : HostBytes {
  PooledBytes(HostBytes b, std::weak_ptr<BufferPool> p) : HostBytes(std::move(b)), pool(std::move(p)) {}
  PooledBytes(const PooledBytes&) = delete;
  PooledBytes& operator=(const PooledBytes&) = delete;
  ~PooledBytes() {
    if (auto p = pool.lock()) p->give(std::move(static_cast<HostBytes&>(*this)));
  }
  std::weak_ptr<BufferPool> pool;
};
}  // namespace

std::shared_ptr<HostBytes> take_pooled(const std::shared_ptr<BufferPool>& pool, std::size_t bytes, bool* reused) {
  return std::make_shared<PooledBytes>(pool->take(bytes, reused), pool);
}

}  // namespace reprise::core
