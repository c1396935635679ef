// Device buffers in reprise::Comm: staged through pinned host memory (an MPI that is not CUDA-aware, or a payload
// packed behind its header), or handed to a CUDA-aware MPI as they are, with a logged payload copied D2H into its
// log entry on Comm's stream while MPI sends it.
#include <cstring>
#include <memory>

#include "mpi/comm_state.hpp"

namespace reprise::mpi {

bool CommState::on_device(const void* buf, std::optional<MemorySpace> space) {
  if (space) return *space == MemorySpace::Device;
  return host_.device_pointers_possible() && host_.device().is_device_pointer(buf);
}

bool CommState::device_direct(std::size_t bytes) {
  if (bytes <= kPackLimit) return false;
  if (!device_mpi_) device_mpi_ = host_.device_mpi();
  return device_mpi_->direct;
}

std::shared_ptr<std::byte> CommState::take_staging(std::size_t bytes) {
  gpu::Buffer b = staging_pool_->take(bytes);
  if (!b) {
    b = host_.device().alloc_pinned(bytes);
    std::memset(b.data(), 0, b.size());  // first touch now (see logging::MessageLog::room_for)
  }
  auto* p = static_cast<std::byte*>(b.data());
  auto owned = std::make_shared<gpu::Buffer>(std::move(b));
  std::weak_ptr<logging::SegmentPool> pool = staging_pool_;
  return std::shared_ptr<std::byte>(p, [owned, pool](std::byte*) {
    if (auto q = pool.lock()) q->give(std::move(*owned));
  });
}

gpu::Stream& CommState::stream() {
  if (!stream_) stream_ = host_.device().create_stream(false);
  return *stream_;
}

void CommState::device_to_host(void* dst, const void* src, std::size_t bytes) {
  gpu::Backend& be = host_.device();
  be.copy_to_host(dst, src, bytes, stream());
  be.synchronize(stream());
}

void CommState::host_to_device(void* dst, const void* src, std::size_t bytes) {
  gpu::Backend& be = host_.device();
  be.copy_to_device(dst, src, bytes, stream());
  be.synchronize(stream());
}

void CommState::copy_into_log(PendingMessage& m, void* slot, const void* buf, std::size_t bytes,
                              std::shared_ptr<logging::Segment> segment) {
  gpu::Backend& be = host_.device();
  while (!log_copies_.empty() && be.query(*log_copies_.front().done)) log_copies_.pop_front();
  be.copy_to_host(slot, buf, bytes, stream());
  m.log_copy = be.record(stream());
  log_copies_.push_back(LogCopy{m.log_copy, std::move(segment)});
}

void CommState::log_copies_done() {
  if (log_copies_.empty() && unposted_.empty()) return;  // (staging copies of unposted sends are on it too)
  host_.device().synchronize(stream());                  // the copies are in order on it
  log_copies_.clear();
}

}  // namespace reprise::mpi
