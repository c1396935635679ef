// Reprise public API: protect data, checkpoint it asynchronously, restore it.
//
//   reprise::Runtime rt(reprise::Config::from_env());
//   rt.protect(u);                       // Kokkos view (include <reprise/kokkos.hpp>)
//   rt.protect("step", &step);           // trivially copyable value
//   if (rt.restarted()) rt.restore();
//   for (; step < n; ++step) { ...; if (step % k == 0) rt.checkpoint(step); }
//   rt.wait();
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "reprise/config.hpp"
#include "reprise/errors.hpp"
#include "reprise/memory_space.hpp"
#include "reprise/metrics.hpp"

namespace reprise {

namespace runtime {
class Coordination;
}

/// One per process. Its methods are called from one application thread; the runtime's own threads (digest
/// workers, the background drain) never call back into the application.
class Runtime {
 public:
  explicit Runtime(Config config = Config::from_env());
  /// Waits for in-flight checkpoints; errors are reported on stderr, never thrown. Virtual: an MpiRuntime held as
  /// a Runtime (e.g. std::unique_ptr<Runtime>) is destroyed as an MpiRuntime.
  virtual ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Registers `bytes` at `data` (in `space`) under `name`. `keepalive` is held while registered
  /// (e.g. a Kokkos view's allocation). Throws UsageError when the name is taken.
  void protect(const std::string& name, void* data, std::size_t bytes, MemorySpace space,
               std::shared_ptr<void> keepalive = nullptr);

  /// Registers one trivially copyable host value.
  template <class T, class = std::enable_if_t<std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>>>
  void protect(const std::string& name, T* value) {
    protect(name, static_cast<void*>(value), sizeof(T), MemorySpace::Host);
  }

  /// Registers a Kokkos view (label = name; any memory space; contiguous layouts only) and follows the variable:
  /// every checkpoint and restore use the buffer `view` refers to then, so `std::swap(u, u_next)` or `u = other`
  /// (same extents) needs no copy. The variable must outlive the registration (unprotect() or the runtime's end);
  /// a checkpoint that finds it with other extents throws UsageError. Defined in <reprise/kokkos.hpp>.
  template <class View, class = decltype(std::declval<const View&>().span_is_contiguous())>
  void protect(View& view);
  /// The same for a const view (or a temporary): the buffer it refers to now, kept alive while registered,
  /// whatever becomes of the variable.
  template <class View, class = decltype(std::declval<const View&>().span_is_contiguous())>
  void protect(const View& view);

  /// Unregisters a region (it will not be in later versions).
  void unprotect(const std::string& name);

  /// Takes version `version` (strictly greater than the previous one) of every protected region. Returns once
  /// the snapshot is captured: the application may then modify its data. Draining and storing go on in the
  /// background; wait() makes them durable.
  void checkpoint(std::uint64_t version);

  /// Blocks until every checkpoint taken so far is durable in the store. Throws the first background error.
  void wait();

  /// True when the store already holds a restorable version at startup (a restarted run). The distributed
  /// runtime also answers true after a rollback to a version (not a start over), so a program run again from its
  /// top (reprise::run of the MPI interposition) restores with the same line.
  bool restarted() const;

  /// Restores the newest version whose whole chain is intact (a damaged newer version is skipped and reported
  /// on stderr). Returns the version restored. Throws RestoreError when nothing is restorable. Protected data
  /// are written only after every chunk was read and verified.
  std::uint64_t restore();
  /// Restores exactly `version`; throws RestoreError or CorruptCheckpointError (data untouched) otherwise.
  std::uint64_t restore(std::uint64_t version);

  /// Newest durable version, if any.
  std::optional<std::uint64_t> latest_version() const;
  /// Every durable version, ascending.
  std::vector<std::uint64_t> versions() const;

  /// `fence` runs at the start of checkpoint() and restore() so pending device work is visible
  /// (Kokkos::fence). A second fence under the same key replaces the first.
  void add_fence(const std::string& key, std::function<void()> fence);

  const Config& config() const;
  std::vector<CheckpointMetrics> metrics() const;
  std::string metrics_json() const;
  /// The memory this rank's Reprise holds against its budget (Config::memory_budget_bytes): {"budget_bytes",
  /// "total_bytes", "peak_bytes" (the largest total seen: after each checkpoint, each stored version and each
  /// report), "components": {"pinned_arena", "bounce_buffers", "device_staging", "payload_pool",
  /// "versions_in_flight", "own_versions",
  /// and, under MpiRuntime, "wards", "ward_buffers", "message_log", "log_pool" (its free segments kept for reuse),
  /// "log_region", "comm_staging"}}, in bytes.
  std::string memory_json() const;

 protected:
  /// For the distributed runtime (MpiRuntime in <reprise/mpi.hpp>): `coordination` supplies the store and the
  /// group hooks.
  Runtime(Config config, std::unique_ptr<runtime::Coordination> coordination);
  /// A host region of the runtime's own whose place and size change between versions (reprise::Comm's message
  /// log snapshot). `locate(std::nullopt)` says where it is now; it is asked after the coordination's
  /// before_capture hook, and a new place or size makes that version a full one. `locate(bytes)` makes it `bytes`
  /// long before a restore of a version that recorded that size, and says where it is.
  using Locate = std::function<std::pair<void*, std::size_t>(std::optional<std::size_t>)>;
  void protect_resizable(const std::string& name, Locate locate);
  /// A host region of the runtime's own whose bytes a checkpoint writes off the application's thread, straight into
  /// the version (reprise::Comm's message log snapshot: its payloads go from the log's segments into the version on
  /// the background thread, not inside checkpoint(), and the region has no memory of its own). After the
  /// coordination's before_capture hook, `plan()` says the region's size and which bytes may have changed since the
  /// last plan, without writing them; the background thread has the plan's `fill` write the chunks the changed
  /// ranges touch into the version's payload, and digests them there. `locate` serves restores, as
  /// protect_resizable's; it is asked only while no version is in flight.
  struct Deferred {
    std::size_t bytes = 0;                                     ///< the region's size as of this plan
    std::vector<std::pair<std::size_t, std::size_t>> changed;  ///< [from, to) byte ranges; the rest is unchanged
    bool all = false;                                          ///< every byte may have changed
    /// Writes the region's bytes [offset, offset + n) as of this plan into `dst` (the background thread).
    std::function<void(std::size_t offset, std::size_t n, std::byte* dst)> fill;
    /// The bytes from the start that hold data; the rest is room the reader ignores. A full version (and one with
    /// `all`) stores only the chunks that hold data: the others read back as zeros (docs/FORMAT.md).
    std::size_t used = SIZE_MAX;
  };
  using Plan = std::function<Deferred()>;
  void protect_deferred(const std::string& name, Plan plan, Locate locate);
  /// checkpoint(version) that the runtime decided on (its metrics say `forced`); nothing when `version` is not
  /// newer than the last one. Returns whether it was taken.
  bool forced_checkpoint(std::uint64_t version);
  /// The names of the protected regions, in the order they were protected.
  std::vector<std::string> region_names() const;
  /// Writes only the regions named `names` (the runtime's own, or a layer's) from the version restore() would
  /// restore now, before the application restores the rest (the MPI interposition reads its communicators back
  /// this way before the program's set-up runs again). Regions that version lacks are left alone; returns how many
  /// were written. Their next version stores them whole; the application's restore() writes them again.
  std::size_t restore_own(const std::vector<std::string>& names);

 private:
  /// Where a followed region is now (protect(View&)): asked at every checkpoint and restore. No keepalive: the
  /// variable owns the buffer it refers to.
  struct Located {
    void* data = nullptr;
    std::size_t bytes = 0;
  };
  using Follow = std::function<Located()>;
  void protect_following(const std::string& name, MemorySpace space, Follow follow);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reprise
