#include "core/bytes.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <utility>

#include "gpu/align.hpp"

namespace reprise::core {

namespace {
constexpr std::size_t kPage = 4096;
std::size_t page_round(std::size_t bytes) {
  return (bytes + kPage - 1) / kPage * kPage;
}

// A mapping of `bytes` (a multiple of the page size), unmapped by its deleter.
std::unique_ptr<std::byte, std::function<void(std::byte*)>> owned_mapping(void* p, std::size_t bytes) {
  return {static_cast<std::byte*>(p), [bytes](std::byte* q) { ::munmap(q, bytes); }};
}
}  // namespace

HostBytes::HostBytes(std::size_t bytes) : size_(bytes), capacity_(bytes), touched_(bytes), own_(true) {
  if (bytes >= kMapMin) {
    const std::size_t n = page_round(bytes);
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = owned_mapping(p, n);
    capacity_ = n;
    mapped_ = true;
    return;
  }
  const std::size_t rounded = gpu::align_up(bytes, gpu::kCacheLine);
  void* p = std::aligned_alloc(gpu::kCacheLine, rounded ? rounded : gpu::kCacheLine);
  if (!p) throw std::bad_alloc();
  data_ = std::unique_ptr<std::byte, std::function<void(std::byte*)>>(static_cast<std::byte*>(p),
                                                                      [](std::byte* q) { std::free(q); });
}

HostBytes::HostBytes(std::byte* data, std::size_t bytes, std::function<void(std::byte*)> release, bool pinned)
    : data_(data, std::move(release)), size_(bytes), capacity_(bytes), touched_(bytes), pinned_(pinned) {}

void HostBytes::resize_within(std::size_t bytes) {
  if (bytes > capacity_) throw std::length_error("HostBytes::resize_within beyond capacity");
  size_ = bytes;
  touched_ = std::max(touched_, bytes);
}

std::size_t HostBytes::release_unused() {
  if (!own_ || !data_ || touched_ <= size_) return 0;
  // Offsets from data() of the first and past the last whole page of the part past size() that was touched.
  const std::size_t misalign = reinterpret_cast<std::uintptr_t>(data_.get()) % kPage;
  const std::size_t from = page_round(misalign + size_) - misalign;
  const std::size_t to = (misalign + std::min(touched_, capacity_)) / kPage * kPage - misalign;
  if (misalign + std::min(touched_, capacity_) < kPage || to <= from ||
      ::madvise(data_.get() + from, to - from, MADV_DONTNEED) != 0)
    return 0;
  touched_ = std::max(size_, from);
  return to - from;
}

void HostBytes::grow(std::size_t capacity) {
  if (!mapped_) throw std::logic_error("HostBytes::grow: only a mapping grows");
  if (capacity <= capacity_) return;
  const std::size_t n = page_round(capacity);
  void* p = ::mremap(data_.get(), capacity_, n, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) throw std::bad_alloc();  // the old mapping is unchanged then
  (void)data_.release();                        // moved or extended: the old range is no longer ours to unmap
  data_ = owned_mapping(p, n);
  capacity_ = n;
}

namespace {
// A quarter of headroom, so that slightly larger versions find a prepared buffer warm too.
std::size_t with_headroom(std::size_t bytes) {
  return bytes + bytes / 4;
}

// Writes one byte per page of [from, to): backs them (the first touch) before anyone times a pack into them.
void touch(HostBytes& b, std::size_t from, std::size_t to) {
  for (std::size_t off = from / kPage * kPage; off < to; off += kPage) b.data()[off] = std::byte{0};
}

// Touches `b` up to `bytes` with headroom, growing a mapping first; a buffer that cannot grow is touched as far as
// it goes.
void warm_up(HostBytes& b, std::size_t bytes) {
  const std::size_t target = with_headroom(bytes);
  if (b.growable() && b.capacity() < target) b.grow(target);
  const std::size_t upto = std::min(target, b.capacity());
  if (b.touched() < upto) touch(b, b.touched(), upto);
  b.resize_within(upto);  // (touched() keeps the larger of the two)
}
}  // namespace

std::optional<BufferPool::Pick> BufferPool::pick_locked(std::size_t bytes) const {
  std::optional<Pick> warm, grown;
  auto consider = [&](const HostBytes& b, std::size_t index) {
    // Waste bound: one huge buffer must not hold a tiny version.
    if (!b.data() || b.touched() > 2 * bytes + (std::size_t(1) << 20)) return;
    if (b.capacity() >= bytes && b.touched() >= bytes) {  // warm: the least touched that suffices
      if (!warm || b.touched() < warm->touched) warm = Pick{index, true, b.touched()};
    } else if (b.capacity() >= bytes || b.growable()) {  // to grow: the one with the fewest new pages
      if (!grown || b.touched() > grown->touched) grown = Pick{index, false, b.touched()};
    }
  };
  for (std::size_t i = 0; i < free_.size(); ++i) consider(free_[i], i);
  consider(reserved_, free_.size());
  return warm ? warm : grown;
}

HostBytes BufferPool::remove_locked(std::size_t index) {
  if (index == free_.size()) return std::exchange(reserved_, HostBytes());
  HostBytes out = std::move(free_[index]);
  free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(index));
  return out;
}

HostBytes BufferPool::take(std::size_t bytes, bool* reused, bool* passed_over) {
  HostBytes out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto p = pick_locked(bytes)) out = remove_locked(p->index);
    if (passed_over) *passed_over = !out.data() && (!free_.empty() || reserved_.data());
  }
  if (out.data()) {
    std::optional<Announced> grows;
    if (out.touched() < bytes) grows.emplace(*this, bytes, false);  // (the pool no longer counts it)
    if (out.capacity() < bytes) out.grow(bytes);  // outside the lock: only the new pages are new memory
    out.resize_within(bytes);
    if (reused) *reused = true;
    return out;  // (counted by the taker from here)
  }
  if (reused) *reused = false;
  Announced fresh(*this, bytes, false);  // (needed whatever it answers)
  return allocate_ ? allocate_(bytes) : HostBytes(bytes);
}

void BufferPool::give(HostBytes&& buffer) {
  if (!buffer.data()) return;
  HostBytes dropped;  // freed after the lock is released
  std::lock_guard<std::mutex> lock(mutex_);
  if (limit_ != SIZE_MAX && held_locked() + buffer.touched() > limit_) {
    dropped = std::move(buffer);  // over the pool's limit: not kept
    return;
  }
  if (free_.size() >= max_buffers_) {
    auto least = std::min_element(free_.begin(), free_.end(),
                                  [](const HostBytes& a, const HostBytes& b) { return a.touched() < b.touched(); });
    if (least == free_.end() || least->touched() >= buffer.touched()) {
      dropped = std::move(buffer);  // the least touched of all: not kept
      return;
    }
    dropped = std::move(*least);
    free_.erase(least);
  }
  free_.push_back(std::move(buffer));
}

HostBytes BufferPool::fresh_touched(std::size_t bytes) {
  const std::size_t n = with_headroom(bytes);
  HostBytes fresh = allocate_ ? allocate_(n) : HostBytes(n);
  touch(fresh, 0, fresh.size());
  return fresh;
}

void BufferPool::prepare(std::size_t bytes) {
  if (bytes == 0) return;
  try {
    HostBytes b;
    bool reservation = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto p = pick_locked(bytes);
      if (p && p->warm) return;
      if (limit_ != SIZE_MAX && held_locked() - (p ? p->touched : 0) + with_headroom(bytes) > limit_) return;
      reservation = p && p->index == free_.size();
      if (p && !reservation) b = remove_locked(p->index);
    }
    if (reservation) {  // the buffer to grow is the reservation: reserve() grows it where it is kept
      reserve(bytes);
      return;
    }
    // Only a head start: none where the memory budget has no room for it.
    if (!b.data()) {
      Announced fresh(*this, with_headroom(bytes), true);
      if (!fresh.room()) return;
      HostBytes made = fresh_touched(bytes);
      fresh.done();
      give(std::move(made));
      return;
    }
    std::optional<Announced> grows;
    if (b.touched() < with_headroom(bytes)) {
      grows.emplace(*this, with_headroom(bytes), true);
      if (!grows->room()) {
        grows.reset();
        give(std::move(b));
        return;
      }
    }
    warm_up(b, bytes);
    if (grows) grows->done();
    give(std::move(b));
  } catch (const std::bad_alloc&) {  // only a head start: the version allocates its buffer, and reports failure
  }
}

void BufferPool::reserve(std::size_t bytes) {
  if (bytes == 0) return;
  HostBytes grown;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto p = pick_locked(bytes);
    if (p && p->warm) return;
    if (reserved_.growable() && reserved_.touched() < bytes)
      grown = std::exchange(reserved_, HostBytes());  // grown: only the new part is touched
  }
  HostBytes fresh;
  Announced made(*this, with_headroom(bytes), true);
  if (!made.room()) {  // no room within the memory budget: no head start
    if (grown.data()) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!reserved_.data()) std::swap(reserved_, grown);
    }
    return;
  }
  if (grown.data()) {
    warm_up(grown, bytes);
    fresh = std::move(grown);
  } else {
    fresh = fresh_touched(bytes);
  }
  made.done();
  std::lock_guard<std::mutex> lock(mutex_);
  const auto p = pick_locked(bytes);
  if (!(p && p->warm)) std::swap(reserved_, fresh);
}  // (`fresh`, now the replaced buffer or the unneeded new one, is freed here, after the lock)

std::size_t BufferPool::held_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_locked();
}

std::size_t BufferPool::held_locked() const {
  std::size_t n = 0;
  for (const auto& b : free_) n += b.touched();
  return n + (reserved_.data() ? reserved_.touched() : 0);
}

void BufferPool::limit(std::size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = std::min(limit_, bytes);
  }
  trim(bytes);
}

void BufferPool::trim(std::size_t bytes) {
  std::vector<HostBytes> freed;  // unmapped outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t held = held_locked();
  while (held > bytes && !free_.empty()) {
    auto least = std::min_element(free_.begin(), free_.end(),
                                  [](const HostBytes& a, const HostBytes& b) { return a.touched() < b.touched(); });
    held -= least->touched();
    freed.push_back(remove_locked(static_cast<std::size_t>(least - free_.begin())));
  }
  if (held > bytes && reserved_.data()) freed.push_back(std::exchange(reserved_, HostBytes()));
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

std::shared_ptr<HostBytes> take_pooled(const std::shared_ptr<BufferPool>& pool, std::size_t bytes, bool* reused,
                                       bool* passed_over) {
  return std::make_shared<PooledBytes>(pool->take(bytes, reused, passed_over), pool);
}

}  // namespace reprise::core
