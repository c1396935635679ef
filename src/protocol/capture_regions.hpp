// The two protected regions through which a group checkpoint's protocol state (a Capture) travels with the
// version: to the buddy and back, to files and back. A replacement process or a relaunch gets its counters, its
// log snapshot (the replays it owes) and its orphan record from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
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
/// differential version carries only what changed: a payload is written once, at an offset it keeps while it is
/// live (released ones leave their bytes, unchanged); new payloads go behind the others, then the index (per entry
/// dest, seq, phase, tag, bytes, offset) and the orphan record (u64 ranks, per rank u64 k and k (seq, phase)
/// pairs); a 64-byte header at the start says where the index is and checksums it (XXH3). When new payloads do not
/// fit, everything is rewritten compactly from the start, and the region grows (by half again, in 64 KiB steps;
/// that version is a full one) when even that does not fit, or shrinks when that needs less than a quarter of it.
///
/// Written in two steps, so that a checkpoint copies no payload on the application's thread: plan() decides where
/// everything goes and which bytes change (work in the number of entries, not in their bytes), and the plan's
/// write, on the checkpoint's background thread, copies the payloads from the snapshot's segments. Plans are
/// written in the order they were made, each before the next plan's write; locate() and read() only while no write
/// is pending. The snapshot a plan references is dropped by the thread that plans (the next plan, rewrite_next()
/// or the region's end), never by the writer: a log segment is freed by the log's own thread only.
class LogRegion {
 public:
  /// What a plan writes: the region's size after it, the byte ranges [from, to) it may change (the rest keeps the
  /// bytes of the plans before), every byte when `all`; `write` writes them and returns the region's memory.
  /// `used`: the bytes from the start read() looks at (header, payloads, index, orphan record); past them is room.
  struct Plan {
    std::size_t bytes = 0;
    std::vector<std::pair<std::size_t, std::size_t>> changed;
    bool all = false;
    std::function<const std::byte*()> write;
    const void* id = nullptr;  // (abandon())
    std::size_t used = SIZE_MAX;
  };
  LogRegion() = default;
  LogRegion(const LogRegion&) = delete;
  LogRegion& operator=(const LogRegion&) = delete;

  /// The region's memory; `bytes`: the size recorded in a version about to be restored into it (it is resized,
  /// and the next plan rewrites everything: the restored offsets are not this process's).
  std::pair<void*, std::size_t> locate(std::optional<std::size_t> bytes = std::nullopt);
  /// Where the log snapshot and orphan record of `c` (a capture of a job of `ranks` processes) go. `c`'s entries
  /// are kept until the plan is written.
  Plan plan(const Capture& c, std::size_t ranks);
  /// A plan that changes nothing (no capture since the last plan).
  Plan unchanged();
  /// A plan whose write will never run (its checkpoint did not happen): its capture is dropped, and the next plan
  /// rewrites everything (this one's bookkeeping assumed its bytes were there).
  void abandon(const Plan& p);
  /// plan() and its write at once.
  void write(const Capture& c, std::size_t ranks);
  /// The log snapshot (copied into `log`'s memory, not live) and the orphan record of the region as restored.
  /// CorruptCheckpointError when the region is truncated or damaged, or holds an orphan record for another
  /// number of ranks than `ranks`.
  void read(Capture& c, logging::MessageLog& log, std::size_t ranks) const;
  /// Its size after the last plan (the memory it holds once written).
  std::size_t bytes() const { return size_; }
  /// The next plan rewrites everything from the start (after a restore, or a start over).
  void rewrite_next() {
    compact_ = true;
    settle();
  }
  /// The next plan's version is a full one anyway: it rewrites everything from the start, without the bytes of
  /// released entries, and sizes the region to half as much again as that needs (growing it, or shrinking it by a
  /// quarter or more), so that the full version, here and at the buddy, carries little more room than growth needs.
  void fit_next() {
    fit_ = true;
    rewrite_next();
  }

 private:
  // A planned write: the capture it copies from, each entry's offset and whether it is new there.
  struct Pending {
    Capture capture;
    std::vector<std::size_t> offsets;
    std::vector<bool> fresh;
    std::size_t index = 0, size = 0, ranks = 0;
    bool done = false;
  };
  const std::byte* run(Pending& w);
  void settle();  // drops the written plans' captures (the planning thread)

  static constexpr std::size_t kFirstSize = 4096;                      // (and the least it shrinks to)
  std::vector<std::byte> bytes_ = std::vector<std::byte>(kFirstSize);  // the writes' (and restores') memory
  std::size_t size_ = kFirstSize;                                      // its size after the last plan
  std::map<std::pair<int, std::uint64_t>, std::size_t> offset_;        // (dest, seq) -> payload offset
  std::size_t bump_ = 64;                                              // where the next payload goes
  std::size_t used_ = SIZE_MAX;  // the last plan's `used` (all of it when not known: restored, abandoned)
  bool compact_ = true;
  bool fit_ = false;
  std::mutex mutex_;
  std::list<Pending> pending_;  // planned, oldest first; `done` once written
};

}  // namespace reprise::protocol
