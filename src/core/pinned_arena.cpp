#include "core/pinned_arena.hpp"

namespace reprise::core {
namespace {
constexpr std::size_t kAlign = 4096;
std::size_t round_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

void PinnedArena::grow(std::size_t bytes) {
  bytes = round_up(bytes);
  if (bytes == 0) return;
  Slab slab{backend_->alloc_pinned(bytes), {}};
  slab.free[0] = bytes;
  std::lock_guard<std::mutex> lock(mutex_);
  slabs_.push_back(std::move(slab));
}

std::optional<HostBytes> PinnedArena::allocate(std::size_t bytes) {
  const std::size_t need = round_up(bytes ? bytes : 1);
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t s = 0; s < slabs_.size(); ++s) {
    auto& free = slabs_[s].free;
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < need) continue;
      const std::size_t offset = it->first, length = it->second;
      free.erase(it);
      if (length > need) free[offset + need] = length - need;
      std::byte* data = slabs_[s].memory.as<std::byte>() + offset;
      std::shared_ptr<PinnedArena> self = shared_from_this();
      return HostBytes(
          data, bytes, [self, s, offset, need](std::byte*) { self->release(s, offset, need); }, true);
    }
  }
  return std::nullopt;
}

void PinnedArena::release(std::size_t slab, std::size_t offset, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& free = slabs_[slab].free;
  auto it = free.emplace(offset, bytes).first;
  auto next = std::next(it);
  if (next != free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free.erase(next);
  }
  if (it != free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free.erase(it);
    }
  }
}

std::size_t PinnedArena::capacity() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const auto& s : slabs_) n += s.memory.size();
  return n;
}

std::size_t PinnedArena::free_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const auto& s : slabs_)
    for (const auto& [off, len] : s.free) n += len;
  return n;
}

}  // namespace reprise::core
