// The seam between the single-rank Runtime and a distributed layer (MpiRuntime: src/mpi/coordination.hpp).
// The Runtime calls these hooks at fixed points of checkpoint(), wait() and restore(); everything about other
// ranks (buddy store, group barrier and commit, recovery) lives behind them. Without a Coordination the Runtime is
// the single-rank pipeline with a local store.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/version_store.hpp"
#include "reprise/config.hpp"

namespace reprise::runtime {

class Coordination {
 public:
  virtual ~Coordination() = default;
  /// The store the runtime writes versions to (called once, from the Runtime constructor).
  virtual std::unique_ptr<core::VersionStore> make_store(const Config& config) = 0;
  /// Called once the runtime is built: `quiesce` returns when the background thread has handled every queued
  /// version (their stores may fail fast when a failure is pending).
  virtual void attach(std::function<void()> quiesce) = 0;
  /// checkpoint(version), after the fences and before capture: the group barrier, where commits are agreed.
  /// Throws Rollback after a failure was repaired.
  virtual void before_capture(std::uint64_t version) = 0;
  /// checkpoint(), before before_capture(): the version about to be captured will be a full one (the runtime's
  /// chain ends there), so the coordination's own regions may be rewritten compactly at no extra cost.
  virtual void full_version_due() {}
  /// wait(), once every queued version is stored: agree on the commit of the newest one.
  virtual void after_wait() = 0;
  /// restore(version) wrote the protected data back (including the runtime's own regions).
  virtual void after_restore(std::uint64_t /*version*/) {}
  /// The version a restore() without argument must restore (agreed by all ranks), if any.
  virtual std::optional<std::uint64_t> restore_target() const = 0;
  /// Whether this process starts from stored data (a replacement, or a relaunch with files).
  virtual bool restarted() const = 0;
  /// True once after a recovery that started the run over (Rollback::from_start): the runtime forgets its
  /// timeline (every stored version was dropped) and makes its next checkpoint a full one.
  virtual bool take_start_over() { return false; }
  /// Ranks on this rank's node (the default memory budget shares the node's memory among them).
  virtual unsigned ranks_on_node() const { return 1; }
  /// Host memory the distributed layer holds, per component (wards' copies, the message log, ...); called on
  /// the application's thread.
  virtual std::map<std::string, std::size_t> memory_use() { return {}; }
  /// The rank's memory budget, once known (a log bound derived from it).
  virtual void memory_budget(std::size_t /*bytes*/) {}
  /// The rank holds `excess` bytes more than its budget: the distributed layer gives back memory it keeps only for
  /// reuse, and returns how much; called on the application's thread.
  virtual std::size_t fit_budget(std::size_t /*excess*/) { return 0; }
  /// What the rank held when the runtime last added up its memory (its own parts and memory_use()'s); any thread.
  virtual void memory_sampled(std::size_t /*bytes*/) {}
  /// memory_use() from any thread: the application thread's parts as it last read them (plus the new log memory
  /// taken since, less what shed() freed of them since), the others (the wards' copies, a ward's version as it
  /// arrives, their receive buffers) read now.
  virtual std::map<std::string, std::size_t> memory_now() { return {}; }
  /// Gives back `bytes` of memory kept only for reuse that any thread may free, where it holds that much (the
  /// buffers kept to receive the wards' versions, then the message log's free segments, whole: the last one freed
  /// may pass `bytes`); returns how much. Any thread.
  virtual std::size_t shed(std::size_t /*bytes*/) { return 0; }
  /// Called once the runtime is built: `make_room(n, head_start)` before the distributed layer touches new memory
  /// for a buffer of n bytes (a ward's version received into new memory, or, a head start, a receive buffer
  /// prepared); it answers whether the rank has room, giving up its memory kept for reuse first where the buffer is
  /// needed (core::BufferPool::NewMemory); `counted(n)` once what a `true` allowed is counted where it lives (a
  /// ward's copy, a receive buffer kept; core::BufferPool::NewMemoryCounted). Any thread.
  virtual void attach_room(const std::function<bool(std::size_t, bool)>& /*make_room*/,
                           const std::function<void(std::size_t)>& /*counted*/) {}
  /// The runtime is about to destroy the store make_store() returned (its own threads are done): threads of the
  /// distributed layer that outlive the runtime stop using it.
  virtual void release_store() {}
  /// Whether this rank's buddy said, with its last acknowledgement, that it holds more than its own budget (its
  /// copies of this rank's versions count there): the runtime then keeps one chain, as over its own budget.
  virtual bool buddy_over_budget() const { return false; }
};

}  // namespace reprise::runtime
