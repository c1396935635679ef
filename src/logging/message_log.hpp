// The sender-based message log (PROTOCOL.md "Normal operation", "Garbage collection"): every inter-group
// message a process sends is appended here, payload included, before the send completes, so that it can be
// replayed to a receiver that rolls back. Knows nothing of MPI or of the protocol's rules; the protocol core
// decides what to append, when to snapshot and what to release.
//
// Memory: payloads live in segments (default 1 MiB) allocated through `Allocate` — pinned memory
// (gpu::Backend::alloc_pinned, i.e. cudaHostAlloc when CUDA exists) so device payloads are copied D2H straight
// into the log on a stream. A payload larger than a segment gets a segment of its own.
//
// Copy-on-write snapshots: snapshot() returns the live entries as references to their segments (no payload is
// copied). Entries are never written again once appended, and appends only go behind the bytes in use, so later
// appends may fill the same segment without touching bytes a snapshot can see (sealing the open segment at every
// snapshot would waste most of a segment per checkpoint when checkpoints are frequent). A segment is freed when
// neither the live log nor any retained snapshot references it.
//
// Thread safety: none; one thread uses a log (the application's: reprise::Comm's protocol state). How a log
// snapshot travels with a version is protocol::LogRegion's (src/protocol/capture_regions.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu/backend.hpp"

namespace reprise::logging {

/// Freed segments kept for reuse (pinning memory is slow, and on VMs that return free memory to the host every
/// first touch of a page faults): a segment is reused for any request it can hold (the smallest that fits); over
/// the cap, the segments freed longest ago are released. A limit (a memory budget's) lowers the cap for good.
/// Thread-safe (unlike the log): a memory budget's make_room frees kept segments from any thread (shed()).
class SegmentPool {
 public:
  explicit SegmentPool(std::size_t cap_bytes) : cap_(cap_bytes) {}
  gpu::Buffer take(std::size_t bytes);  ///< empty when none fits
  void raise_cap(std::size_t bytes);
  void give(gpu::Buffer&& b);
  std::size_t pooled_bytes() const;
  /// The pool keeps at most `bytes` from now on (a lower limit than one set before wins); the segments over it,
  /// freed longest ago first, are released now.
  void limit(std::size_t bytes);
  /// Releases kept segments, freed longest ago first, until at least `bytes` went or none is left (the cap stays:
  /// segments freed later are kept again). Returns the bytes released.
  std::size_t shed(std::size_t bytes);

 private:
  void release_over_cap(std::list<gpu::Buffer>& out);
  mutable std::mutex mutex_;
  std::size_t cap_, pooled_ = 0, limit_ = SIZE_MAX;
  std::list<gpu::Buffer> free_;  // oldest first: over the cap, the oldest are released
};

/// One segment of log memory. Shared by the live log and snapshots.
struct Segment {
  gpu::Buffer memory;
  std::size_t used = 0;
  std::shared_ptr<std::size_t> held;  // the log's count of bytes in live segments
  std::shared_ptr<SegmentPool> pool;  // where the memory goes back
  ~Segment() {
    if (held) *held -= memory.size();
    if (pool) pool->give(std::move(memory));
  }
};

/// A logged message: where it went, its sequence number on that channel, the sender's phase when it was sent,
/// the application's tag, and the payload.
struct Entry {
  int dest = -1;
  std::uint64_t seq = 0;
  std::uint64_t phase = 0;
  std::int32_t tag = 0;
  std::size_t bytes = 0;
  std::shared_ptr<Segment> segment;
  std::size_t offset = 0;

  std::byte* data() const { return static_cast<std::byte*>(segment->memory.data()) + offset; }
};

/// The live entries at the time of a snapshot (segment references, not copies), in (dest, seq) order.
struct Snapshot {
  std::vector<Entry> entries;
  std::size_t payload_bytes() const;
};

struct LogOptions {
  std::size_t segment_bytes = std::size_t{1} << 20;
  std::size_t bound_bytes = 0;  ///< 0: unbounded; otherwise over_bound() reports when held_bytes() reaches it
  /// Freed segments kept for reuse: at most this, or the most the log ever held if that is more (memory the log
  /// needed once is kept rather than faulted in again; the footprint never exceeds the log's own peak).
  std::size_t pool_bytes = std::size_t{64} << 20;
};

/// A segment of plain host memory (MessageLog's default Allocate).
gpu::Buffer host_segment_memory(std::size_t bytes);

class MessageLog {
 public:
  using Allocate = std::function<gpu::Buffer(std::size_t)>;
  using Options = LogOptions;

  /// `allocate` defaults to plain host memory (tests, host-only builds).
  explicit MessageLog(Options options = {}, Allocate allocate = nullptr);

  /// Records entry (dest, seq) and returns where its `bytes` of payload go; the caller copies them there (a
  /// memcpy, or a D2H copy on a stream that must complete before the send does). Seqs per dest must increase.
  std::byte* append(int dest, std::uint64_t seq, std::uint64_t phase, std::int32_t tag, std::size_t bytes);
  /// append() + memcpy from host memory.
  void append_copy(int dest, std::uint64_t seq, std::uint64_t phase, std::int32_t tag, const void* payload,
                   std::size_t bytes);

  /// Copy-on-write snapshot of the live log (entries referenced, nothing copied).
  Snapshot snapshot();
  /// The live log becomes the snapshot's entries (a rolled-back process restores its log with its version).
  void restore(const Snapshot& snapshot);

  /// Garbage collection: entries to `dest` with seq <= `delivered` leave the live log (the receiver's group
  /// committed a version that delivered them). Returns how many left.
  std::size_t release_through(int dest, std::uint64_t delivered);

  /// Live entries to `dest` with lo < seq <= hi, in seq order (what a rolled-back receiver is owed).
  std::vector<const Entry*> range(int dest, std::uint64_t lo, std::uint64_t hi) const;
  const Entry* find(int dest, std::uint64_t seq) const;

  /// The receivers this log holds live entries for, ascending.
  std::vector<int> dests() const;
  std::size_t live_entries() const;
  std::size_t live_payload_bytes() const;
  /// Bytes of every segment still allocated: the live log's and those only retained snapshots reference.
  std::size_t held_bytes() const { return *held_; }
  std::size_t pooled_bytes() const { return pool_->pooled_bytes(); }
  /// Freed segments kept for reuse: at most `bytes` from now on (SegmentPool::limit; a memory budget's).
  void limit_pool(std::size_t bytes) { pool_->limit(bytes); }
  /// Releases kept segments, at least `bytes` where the pool holds them (SegmentPool::shed). Unlike the rest of
  /// the log, callable from any thread, as pooled_bytes() is.
  std::size_t shed_pool(std::size_t bytes) { return pool_->shed(bytes); }
  /// Segments allocated (first touch included) and segments taken from the pool, since the start.
  std::size_t segments_allocated() const { return allocated_; }
  std::size_t segments_reused() const { return reused_; }
  bool over_bound() const { return options_.bound_bytes != 0 && held_bytes() >= options_.bound_bytes; }
  const Options& options() const { return options_; }
  void set_bound(std::size_t bytes) { options_.bound_bytes = bytes; }

  /// An entry in this log's memory holding a copy of `payload` (a snapshot read back from a checkpoint); not live.
  Entry copy_in(int dest, std::uint64_t seq, std::uint64_t phase, std::int32_t tag, const void* payload,
                std::size_t bytes);

 private:
  std::shared_ptr<Segment> room_for(std::size_t bytes);

  Options options_;
  Allocate allocate_;
  std::shared_ptr<std::size_t> held_ = std::make_shared<std::size_t>(0);
  std::shared_ptr<SegmentPool> pool_;
  std::size_t allocated_ = 0, reused_ = 0;
  std::weak_ptr<Segment> current_;          // the open segment, while an entry (live or in a snapshot) references it
  std::map<int, std::vector<Entry>> live_;  // per dest, seq ascending (released from the front)
};

}  // namespace reprise::logging
