#include "core/host_tracker.hpp"

#include <algorithm>
#include <cstring>

#include "core/xxh3.hpp"
#include "kernels/chunk_kernels.hpp"

namespace reprise::core {
namespace {
// Work items of about 4 MiB keep both threads busy without per-chunk scheduling cost.
std::size_t chunks_per_item(std::size_t chunk_bytes) {
  return std::max<std::size_t>(1, (std::size_t(4) << 20) / chunk_bytes);
}
}  // namespace

std::uint64_t xxh3_digest(const void* data, std::size_t bytes) {
  return xxh3_64(data, bytes);
}

void xxh3_chunk_digests(const void* data, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests,
                        WorkPool& pool) {
  const auto* base = static_cast<const std::byte*>(data);
  const std::size_t n = kernels::chunk_count(bytes, chunk_bytes);
  const std::size_t per = chunks_per_item(chunk_bytes);
  pool.parallel_for((n + per - 1) / per, [&](std::size_t item) {
    const std::size_t end = std::min(n, (item + 1) * per);
    for (std::size_t i = item * per; i < end; ++i)
      digests[i] = xxh3_64(base + i * chunk_bytes, kernels::chunk_length(bytes, chunk_bytes, i));
  });
}

HostTracker::HostTracker(Region region, std::size_t chunk_bytes)
    : region_(std::move(region)), chunk_bytes_(chunk_bytes) {
  const std::size_t n = kernels::chunk_count(region_.bytes, chunk_bytes_);
  prev_.resize(n);
  cur_.resize(n);
}

std::vector<std::uint32_t> HostTracker::scan(WorkPool& pool, bool all) {
  xxh3_chunk_digests(region_.data, region_.bytes, chunk_bytes_, cur_.data(), pool);
  std::vector<std::uint32_t> dirty(cur_.size());
  dirty.resize(kernels::compare_compact_host(cur_.data(), prev_.data(), static_cast<std::uint32_t>(cur_.size()),
                                             all || !have_prev_, dirty.data()));
  return dirty;
}

void HostTracker::pack(WorkPool& pool, const std::vector<std::uint32_t>& chunks, std::byte* dst) const {
  const std::size_t per = chunks_per_item(chunk_bytes_);
  const auto* src = static_cast<const std::byte*>(region_.data);
  // Only the region's last chunk can be short, and it comes last, so chunk j lands at j * chunk_bytes.
  pool.parallel_for((chunks.size() + per - 1) / per, [&](std::size_t item) {
    const std::size_t end = std::min(chunks.size(), (item + 1) * per);
    for (std::size_t j = item * per; j < end; ++j)
      std::memcpy(dst + j * chunk_bytes_, src + std::size_t(chunks[j]) * chunk_bytes_,
                  kernels::chunk_length(region_.bytes, chunk_bytes_, chunks[j]));
  });
}

void HostTracker::accept() {
  prev_.swap(cur_);
  have_prev_ = true;
}

void HostTracker::adopt(const std::vector<std::uint64_t>& digests) {
  prev_ = digests;
  have_prev_ = true;
}

}  // namespace reprise::core
