#include "core/device_tracker.hpp"

#include <cstring>
#include <limits>
#include <numeric>

#include "kernels/chunk_kernels.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {

DeviceTracker::DeviceTracker(Region region, std::size_t chunk_bytes, gpu::Backend& backend)
    : region_(std::move(region)), chunk_bytes_(chunk_bytes), backend_(&backend) {
  const std::size_t n = kernels::chunk_count(region_.bytes, chunk_bytes_);
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw UsageError("region '" + region_.name + "' has more than 2^32 chunks: raise REPRISE_CHUNK_BYTES");
  n_ = static_cast<std::uint32_t>(n);
  const std::size_t slots = n ? n : 1;
  cur_dev_ = backend_->alloc_device(slots * sizeof(std::uint64_t));
  prev_dev_ = backend_->alloc_device(slots * sizeof(std::uint64_t));
  indices_dev_ = backend_->alloc_device(slots * sizeof(std::uint32_t));
  count_dev_ = backend_->alloc_device(sizeof(std::uint32_t));
  digests_pinned_ = backend_->alloc_pinned(slots * sizeof(std::uint64_t));
  indices_pinned_ = backend_->alloc_pinned(slots * sizeof(std::uint32_t));
  count_pinned_ = backend_->alloc_pinned(sizeof(std::uint32_t));
  digests_.resize(n);
}

std::vector<std::uint32_t> DeviceTracker::scan(gpu::Stream& stream, bool all) {
  all = all || !have_prev_;
  backend_->digest(region_.data, region_.bytes, chunk_bytes_, cur_dev_.as<std::uint64_t>(), stream);
  backend_->compare_compact(cur_dev_.as<std::uint64_t>(), all ? nullptr : prev_dev_.as<std::uint64_t>(), n_, all,
                            indices_dev_.as<std::uint32_t>(), count_dev_.as<std::uint32_t>(), stream);
  backend_->copy_to_host(count_pinned_.data(), count_dev_.data(), sizeof(std::uint32_t), stream);
  backend_->copy_to_host(digests_pinned_.data(), cur_dev_.data(), std::size_t(n_) * sizeof(std::uint64_t), stream);
  backend_->synchronize(stream);
  const std::uint32_t count = *count_pinned_.as<std::uint32_t>();
  if (count > n_)
    throw DeviceError("compare_compact returned " + std::to_string(count) + " dirty chunks of " + std::to_string(n_) +
                      " in region '" + region_.name + "'");
  backend_->copy_to_host(indices_pinned_.data(), indices_dev_.data(), std::size_t(count) * sizeof(std::uint32_t),
                         stream);
  backend_->synchronize(stream);
  std::memcpy(digests_.data(), digests_pinned_.data(), std::size_t(n_) * sizeof(std::uint64_t));
  const auto* idx = indices_pinned_.as<std::uint32_t>();
  return std::vector<std::uint32_t>(idx, idx + count);
}

void DeviceTracker::pack(std::uint32_t first, std::uint32_t count, void* staging, gpu::Stream& stream) const {
  backend_->pack(region_.data, region_.bytes, chunk_bytes_, indices_dev_.as<std::uint32_t>() + first, count, staging,
                 stream);
}

std::vector<std::uint32_t> DeviceTracker::select_all(gpu::Stream& stream) {
  // Enqueued only: pack() runs on the same stream, after it.
  backend_->compare_compact(cur_dev_.as<std::uint64_t>(), nullptr, n_, true, indices_dev_.as<std::uint32_t>(),
                            count_dev_.as<std::uint32_t>(), stream);
  std::vector<std::uint32_t> all(n_);
  std::iota(all.begin(), all.end(), 0u);
  return all;
}

void DeviceTracker::accept() {
  std::swap(cur_dev_, prev_dev_);
  have_prev_ = true;
}

void DeviceTracker::adopt(const std::vector<std::uint64_t>& digests, gpu::Stream& stream) {
  std::memcpy(digests_pinned_.data(), digests.data(), digests.size() * sizeof(std::uint64_t));
  backend_->copy_to_device(prev_dev_.data(), digests_pinned_.data(), digests.size() * sizeof(std::uint64_t), stream);
  backend_->synchronize(stream);
  digests_ = digests;
  have_prev_ = true;
}

}  // namespace reprise::core
