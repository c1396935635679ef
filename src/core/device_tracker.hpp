// Dirty tracking of a device-memory region: the digest, compare+compact and pack kernels run where the data
// live (gpu::Backend); only the digest table and the dirty list (8 + 4 bytes per chunk) come to the host.
#pragma once

#include <cstdint>
#include <vector>

#include "core/region.hpp"
#include "gpu/backend.hpp"

namespace reprise::core {

class DeviceTracker {
 public:
  DeviceTracker(Region region, std::size_t chunk_bytes, gpu::Backend& backend);
  const Region& region() const { return region_; }
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  std::uint32_t chunk_count() const { return n_; }

  /// Digests every chunk on the device and compacts the changed ones; returns their indices (host copy).
  std::vector<std::uint32_t> scan(gpu::Stream& stream, bool all);
  const std::vector<std::uint64_t>& digests() const { return digests_; }
  /// Packs dirty chunks [first, first + count) of the last scan into `staging` (device memory), asynchronously on
  /// `stream`: `staging` holds them once the stream is synchronised.
  void pack(std::uint32_t first, std::uint32_t count, void* staging, gpu::Stream& stream) const;
  /// Makes every chunk the last scan's dirty list (the version becomes a full one), without digesting again;
  /// asynchronous on `stream`, which pack() must then use too.
  std::vector<std::uint32_t> select_all(gpu::Stream& stream);
  void accept();
  void adopt(const std::vector<std::uint64_t>& digests, gpu::Stream& stream);
  void reset() { have_prev_ = false; }
  /// As HostTracker::retarget: the reference digests stay on the device.
  void retarget(void* data) { region_.data = data; }

 private:
  Region region_;
  std::size_t chunk_bytes_;
  gpu::Backend* backend_;
  std::uint32_t n_;
  gpu::Buffer cur_dev_, prev_dev_, indices_dev_, count_dev_;
  gpu::Buffer digests_pinned_, indices_pinned_, count_pinned_;
  std::vector<std::uint64_t> digests_;
  bool have_prev_ = false;
};

}  // namespace reprise::core
