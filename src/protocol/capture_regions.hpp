// The two protected regions through which a group checkpoint's protocol state (a Capture) travels with the
// version: to the buddy and back, to files and back. A replacement process or a relaunch gets its counters, its
// log snapshot (the replays it owes) and its orphan record from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "logging/message_log.hpp"
#include "protocol/process.hpp"

namespace reprise::protocol {

/// "reprise.channels": the phase, the number k of channels, then per channel with a count or a view (ascending peer)
/// the peer, sent, delivered, view.delivered and view.sent; zeros behind. Sized by the process's peers, not by the
/// job: it grows (by half again, in steps of 64 words) when the channels outgrow it, and a restore resizes it to
/// the version's.
class CounterRegion {
 public:
  explicit CounterRegion(std::size_t ranks) : ranks_(ranks) {}
  /// The region's memory; `bytes`: the size recorded in a version about to be restored into it (resized).
  std::pair<void*, std::size_t> locate(std::optional<std::size_t> bytes = std::nullopt);
  std::size_t bytes() const { return words_.size() * sizeof(std::uint64_t); }
  /// The counters of `p` now (its phase, channels and committed views).
  void write(const Process& p);
  /// The counters written last (or restored into the region): a Capture without its log and orphan record.
  /// CorruptCheckpointError when the region is truncated or names a peer outside the job of `ranks` processes.
  Capture read() const;
  void clear() { std::fill(words_.begin(), words_.end(), 0); }

 private:
  std::vector<std::uint64_t> words_ = std::vector<std::uint64_t>(64, 0);
  std::size_t ranks_;
};

/// "reprise.log": the log snapshot and the orphan record of the newest capture. Append-stable, so that a
/// differential version carries only what changed: a payload goes once to an offset it keeps while it is live
/// (released ones leave a hole); new payloads go behind the others, then the index (per entry dest, seq, phase, tag,
/// bytes, offset) and the orphan record (u64 ranks, per rank u64 k and k (seq, phase) pairs); a 64-byte header at
/// the start says where the index is and checksums it (XXH3). When new payloads do not fit, everything is laid out
/// compactly from the start, and the region grows (by half again, in 64 KiB steps; that version is a full one) when
/// even that does not fit, or shrinks when that needs less than a quarter of it.
///
/// The region has no memory of its own: a plan (made on the application's thread, work in the number of entries,
/// not in their bytes) fixes where everything goes and which bytes change, and its `fill` writes any range of the
/// region as of that plan straight from the capture's log segments into the version's payload, on the checkpoint's
/// background thread. A version's log payloads are copied once, from the log into the version. What a fill writes
/// where no live entry is (a released entry's hole, padding, room) is zeros; a reader never looks there. Only a
/// restore gives the region memory (locate(bytes)), until the next plan.
class LogRegion {
 public:
  /// What a plan writes: the region's size after it, the byte ranges [from, to) it changes (the rest keeps what the
  /// reader looks at from the plans before), every byte when `all`. `fill(offset, n, dst)` writes the region's bytes
  /// [offset, offset + n) as of this plan into `dst`, from any thread, any number of times, while the plan lives.
  /// `used`: the bytes from the start read() looks at (header, payloads, index, orphan record); past them is room.
  struct Plan {
    std::size_t bytes = 0;
    std::vector<std::pair<std::size_t, std::size_t>> changed;
    bool all = false;
    std::function<void(std::size_t offset, std::size_t n, std::byte* dst)> fill;
    const void* id = nullptr;  // (abandon())
    std::size_t used = SIZE_MAX;
  };
  LogRegion();
  ~LogRegion();
  LogRegion(const LogRegion&) = delete;
  LogRegion& operator=(const LogRegion&) = delete;

  /// Memory for a restore of a version that recorded `bytes` (zeros until the restore writes them; the next plan
  /// lays everything out again: the restored offsets are not this process's). Without `bytes`: that memory, or,
  /// when there is none, the region as of the last plan, made anew. Held until the next plan.
  std::pair<void*, std::size_t> locate(std::optional<std::size_t> bytes = std::nullopt);
  /// Where the log snapshot and orphan record of `c` (a capture of a job of `ranks` processes) go. `c`'s entries
  /// (their segments) are kept while the plan, or a later unchanged() one, lives.
  Plan plan(const Capture& c, std::size_t ranks);
  /// A plan that changes nothing (no capture since the last plan): its fill writes the region as of the last one.
  Plan unchanged();
  /// A plan whose version will never be stored (its checkpoint did not happen): the region is as of the plan before,
  /// and the next plan lays everything out again (this one's bookkeeping assumed its bytes were stored).
  void abandon(const Plan& p);
  /// The log snapshot (copied into `log`'s memory, not live) and the orphan record of the region as restored
  /// (locate(bytes), then written). CorruptCheckpointError when the region is truncated or damaged, or holds an
  /// orphan record for another number of ranks than `ranks`.
  void read(Capture& c, logging::MessageLog& log, std::size_t ranks) const;
  /// Its size after the last plan.
  std::size_t bytes() const { return size_; }
  /// The memory it holds: a restored region's, while the last two plans' layouts keep it (the plans' entries are
  /// the log's memory).
  std::size_t held_bytes() const;
  /// The next plan lays everything out from the start (after a restore, or a start over).
  void rewrite_next() { compact_ = true; }
  /// The next plan's version is a full one anyway: it lays everything out from the start, without the holes of
  /// released entries, and sizes the region to half as much again as that needs (growing it, or shrinking it by a
  /// quarter or more), so that the full version, here and at the buddy, carries little more room than growth needs.
  void fit_next() {
    fit_ = true;
    rewrite_next();
  }

  struct Layout;  // a plan's region: immutable once planned (capture_regions.cpp)

 private:
  static constexpr std::size_t kFirstSize = 4096;                // (and the least it shrinks to)
  std::size_t size_ = kFirstSize;                                // its size after the last plan
  std::map<std::pair<int, std::uint64_t>, std::size_t> offset_;  // (dest, seq) -> payload offset
  std::size_t bump_ = 64;                                        // where the next payload goes
  bool compact_ = true;
  bool fit_ = false;
  std::shared_ptr<const Layout> last_, before_last_;  // the region as of the last plan, and the one before
  std::shared_ptr<std::vector<std::byte>> restored_;  // a restore's memory (locate), until the next plan
  // The layouts whose plans are gone (wherever the last copy of a plan went: the background thread), dropped by the
  // next plan: a log segment is freed by the log's own thread only.
  struct Dropped;
  std::shared_ptr<Dropped> dropped_;
  Plan plan_of(std::shared_ptr<const Layout> l);
};

}  // namespace reprise::protocol
