#include "logging/message_log.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gpu/align.hpp"
#include "reprise/errors.hpp"

namespace reprise::logging {

gpu::Buffer host_segment_memory(std::size_t bytes) {
  void* p = std::malloc(std::max<std::size_t>(bytes, 1));
  if (!p) throw Error("message log: out of host memory allocating a segment of " + std::to_string(bytes) + " bytes");
  return gpu::Buffer(p, bytes, [](void* q) { std::free(q); });
}

gpu::Buffer SegmentPool::take(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->size() >= bytes && (best == free_.end() || it->size() < best->size())) best = it;
  if (best == free_.end()) return {};
  gpu::Buffer b = std::move(*best);
  free_.erase(best);
  pooled_ -= b.size();
  return b;
}

void SegmentPool::raise_cap(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  cap_ = std::min(limit_, std::max(cap_, bytes));
}

std::size_t SegmentPool::pooled_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pooled_;
}

// Released segments leave the list under the lock and are freed (their deleters run) once it is dropped.
void SegmentPool::give(gpu::Buffer&& b) {
  std::list<gpu::Buffer> out;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!b || b.size() > cap_) return;  // released by its deleter
  pooled_ += b.size();
  free_.push_back(std::move(b));
  release_over_cap(out);
}

void SegmentPool::limit(std::size_t bytes) {
  std::list<gpu::Buffer> out;
  std::lock_guard<std::mutex> lock(mutex_);
  limit_ = std::min(limit_, bytes);
  cap_ = std::min(cap_, limit_);
  release_over_cap(out);
}

std::size_t SegmentPool::shed(std::size_t bytes) {
  std::list<gpu::Buffer> out;
  std::size_t freed = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  while (freed < bytes && !free_.empty()) {
    freed += free_.front().size();
    out.splice(out.end(), free_, free_.begin());
  }
  pooled_ -= freed;
  return freed;
}

void SegmentPool::release_over_cap(std::list<gpu::Buffer>& out) {
  while (pooled_ > cap_) {
    pooled_ -= free_.front().size();
    out.splice(out.end(), free_, free_.begin());
  }
}

std::size_t Snapshot::payload_bytes() const {
  std::size_t n = 0;
  for (const Entry& e : entries) n += e.bytes;
  return n;
}

MessageLog::MessageLog(Options options, Allocate allocate)
    : options_(options),
      allocate_(allocate ? std::move(allocate) : Allocate(host_segment_memory)),
      pool_(std::make_shared<SegmentPool>(options.pool_bytes)) {
  if (options_.segment_bytes == 0) throw ConfigError("message log: segment_bytes must be positive");
}

std::shared_ptr<Segment> MessageLog::room_for(std::size_t bytes) {
  if (auto open = current_.lock(); open && open->memory.size() - open->used >= bytes) return open;
  auto seg = std::make_shared<Segment>();
  const std::size_t want = std::max(bytes, options_.segment_bytes);
  seg->memory = pool_->take(want);
  if (seg->memory) ++reused_;
  if (!seg->memory) {
    ++allocated_;
    seg->memory = allocate_(want);
    // First touch now, not in the middle of an application's send (a page fault per 4 KiB on some VMs).
    std::memset(seg->memory.data(), 0, want);
  }
  seg->held = held_;
  seg->pool = pool_;
  *held_ += seg->memory.size();
  pool_->raise_cap(*held_);
  // A payload bigger than a segment gets its own; the current segment stays open for the small ones.
  if (bytes <= options_.segment_bytes) current_ = seg;
  return seg;
}

std::byte* MessageLog::append(int dest, std::uint64_t seq, std::uint64_t phase, std::int32_t tag, std::size_t bytes) {
  auto& list = live_[dest];
  if (!list.empty() && seq <= list.back().seq)
    throw UsageError("message log: entry to " + std::to_string(dest) + " with seq " + std::to_string(seq) +
                     " after seq " + std::to_string(list.back().seq) + " (seqs per destination must increase)");
  const std::size_t aligned = gpu::align_up(bytes, gpu::kPayloadAlign);
  std::shared_ptr<Segment> seg = room_for(aligned);
  Entry e{dest, seq, phase, tag, bytes, seg, seg->used};
  seg->used += aligned;
  list.push_back(std::move(e));
  return list.back().data();
}

void MessageLog::append_copy(int dest, std::uint64_t seq, std::uint64_t phase, std::int32_t tag, const void* payload,
                             std::size_t bytes) {
  std::byte* to = append(dest, seq, phase, tag, bytes);
  if (bytes) std::memcpy(to, payload, bytes);
}

Snapshot MessageLog::snapshot() {
  Snapshot s;
  for (const auto& [dest, list] : live_) s.entries.insert(s.entries.end(), list.begin(), list.end());
  return s;
}

void MessageLog::restore(const Snapshot& snapshot) {
  live_.clear();
  current_.reset();
  for (const Entry& e : snapshot.entries) live_[e.dest].push_back(e);
  for (auto& [dest, list] : live_)
    std::sort(list.begin(), list.end(), [](const Entry& a, const Entry& b) { return a.seq < b.seq; });
}

std::size_t MessageLog::release_through(int dest, std::uint64_t delivered) {
  auto it = live_.find(dest);
  if (it == live_.end()) return 0;
  auto& list = it->second;
  const auto end = std::find_if(list.begin(), list.end(), [&](const Entry& e) { return e.seq > delivered; });
  const std::size_t n = static_cast<std::size_t>(end - list.begin());
  list.erase(list.begin(), end);
  if (list.empty()) live_.erase(it);
  return n;
}

std::vector<const Entry*> MessageLog::range(int dest, std::uint64_t lo, std::uint64_t hi) const {
  std::vector<const Entry*> out;
  auto it = live_.find(dest);
  if (it == live_.end()) return out;
  for (const Entry& e : it->second)
    if (e.seq > lo && e.seq <= hi) out.push_back(&e);
  return out;
}

const Entry* MessageLog::find(int dest, std::uint64_t seq) const {
  auto it = live_.find(dest);
  if (it == live_.end()) return nullptr;
  auto e = std::lower_bound(it->second.begin(), it->second.end(), seq,
                            [](const Entry& x, std::uint64_t s) { return x.seq < s; });
  return e != it->second.end() && e->seq == seq ? &*e : nullptr;
}

std::vector<int> MessageLog::dests() const {
  std::vector<int> out;
  for (const auto& [dest, list] : live_)
    if (!list.empty()) out.push_back(dest);
  return out;
}

std::size_t MessageLog::live_entries() const {
  std::size_t n = 0;
  for (const auto& [dest, list] : live_) n += list.size();
  return n;
}

std::size_t MessageLog::live_payload_bytes() const {
  std::size_t n = 0;
  for (const auto& [dest, list] : live_)
    for (const Entry& e : list) n += e.bytes;
  return n;
}

Entry MessageLog::copy_in(int dest, std::uint64_t seq, std::uint64_t phase, std::int32_t tag, const void* payload,
                          std::size_t bytes) {
  const std::size_t aligned = gpu::align_up(bytes, gpu::kPayloadAlign);
  std::shared_ptr<Segment> seg = room_for(aligned);
  Entry e{dest, seq, phase, tag, bytes, seg, seg->used};
  seg->used += aligned;
  if (bytes) std::memcpy(e.data(), payload, bytes);
  return e;
}

}  // namespace reprise::logging
