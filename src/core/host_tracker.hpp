// Dirty tracking of a host-memory region: XXH3 digest per chunk on the host (threads of a WorkPool), compare
// with the digests of the previous version, pack the changed chunks.
#pragma once

#include <cstdint>
#include <vector>

#include "core/region.hpp"
#include "core/work_pool.hpp"

namespace reprise::core {

/// XXH3-64 digest of one chunk (the host digest of the format).
std::uint64_t xxh3_digest(const void* data, std::size_t bytes);
/// XXH3-64 digest of every chunk of a host buffer (the host digest of the format).
void xxh3_chunk_digests(const void* data, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests,
                        WorkPool& pool);

class HostTracker {
 public:
  HostTracker(Region region, std::size_t chunk_bytes);
  const Region& region() const { return region_; }
  std::size_t chunk_bytes() const { return chunk_bytes_; }

  /// Digests every chunk; returns the changed chunks (all when `all` or when no previous version is known).
  std::vector<std::uint32_t> scan(WorkPool& pool, bool all);
  /// Digests of the last scan.
  const std::vector<std::uint64_t>& digests() const { return cur_; }
  /// Copies the given chunks, in order, to dst.
  void pack(WorkPool& pool, const std::vector<std::uint32_t>& chunks, std::byte* dst) const;
  /// The last scan becomes the reference for the next one (its version was captured).
  void accept();
  /// After a restore: the restored version's digests become the reference.
  void adopt(const std::vector<std::uint64_t>& digests);
  /// Forget the reference (the next scan reports every chunk).
  void reset() { have_prev_ = false; }
  /// The region's bytes now live at `data` (a followed view was swapped): the digests are of contents, not places,
  /// so the reference stays and the next scan reports the chunks whose contents differ.
  void retarget(void* data) { region_.data = data; }

 private:
  Region region_;
  std::size_t chunk_bytes_;
  std::vector<std::uint64_t> prev_, cur_;
  bool have_prev_ = false;
};

}  // namespace reprise::core
