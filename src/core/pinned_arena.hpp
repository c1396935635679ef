// Page-locked host memory for versions that hold device data, allocated in a few large slabs up front.
// Pinning memory (cudaHostAlloc) is slow and holds the driver's lock, stalling the application's kernel launches
// (pinning every version on the fly made a stencil loop much slower on an H100: bench/results). So slabs are pinned
// when regions are protected (before the compute loop), versions are carved out of them, and a version that finds no
// room falls back to pageable memory (drained through the bounce buffers) instead of pinning more.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/bytes.hpp"
#include "gpu/backend.hpp"

namespace reprise::core {

class PinnedArena : public std::enable_shared_from_this<PinnedArena> {
 public:
  static std::shared_ptr<PinnedArena> create(gpu::Backend& backend) {
    return std::shared_ptr<PinnedArena>(new PinnedArena(backend));
  }
  /// Pins one more slab of `bytes`.
  void grow(std::size_t bytes);
  /// A pinned buffer of `bytes` carved from a slab (first fit), or nothing when no slab has room. The buffer
  /// returns its range to the arena when released; the arena lives as long as any of its buffers.
  std::optional<HostBytes> allocate(std::size_t bytes);
  std::size_t capacity() const;
  std::size_t free_bytes() const;

 private:
  explicit PinnedArena(gpu::Backend& backend) : backend_(&backend) {}
  void release(std::size_t slab, std::size_t offset, std::size_t bytes);

  struct Slab {
    gpu::Buffer memory;
    std::map<std::size_t, std::size_t> free;  // offset -> length, coalesced
  };
  gpu::Backend* backend_;
  mutable std::mutex mutex_;
  std::vector<Slab> slabs_;
};

}  // namespace reprise::core
