// The Runtime facade: protected regions, the checkpoint pipeline (digest -> compare -> pack | drain -> store),
// and restore. With one rank and no MPI this is the whole runtime.
//
// Pipeline: checkpoint() fences, digests every region where it lives, packs the changed chunks (host regions
// straight into the version's payload buffer, device regions into device staging) and returns: that is the
// snapshot. A background thread then drains device staging into the version (one DMA into pinned memory from the
// arena, or through two pinned bounce buffers), checksums it, stores it and releases versions no chain needs.
// wait() returns when the store holds everything.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <utility>
#include <variant>

#include "core/bytes.hpp"
#include "core/device_tracker.hpp"
#include "core/format.hpp"
#include "core/host_tracker.hpp"
#include "core/manifest.hpp"
#include "core/memory_budget.hpp"
#include "core/pinned_arena.hpp"
#include "core/restore.hpp"
#include "core/thread_name.hpp"
#include "core/version_store.hpp"
#include "core/work_pool.hpp"
#include "gpu/align.hpp"
#include "gpu/backend.hpp"
#include "kernels/chunk_kernels.hpp"
#include "reprise/reprise.hpp"
#include "runtime/coordination.hpp"

namespace reprise {
namespace {

// One line on stderr in one write: the lines of the ranks sharing a launcher's output do not interleave (a line
// written in pieces could be split by another rank's, and a search for it would miss it).
void say(const std::string& line) {
  const std::string out = line + "\n";
  std::fwrite(out.data(), 1, out.size(), stderr);
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A run of packed device bytes waiting in staging, and where it goes in the payload.
struct DrainSegment {
  std::size_t staging_offset;
  std::size_t payload_offset;
  std::size_t bytes;
};

// Host chunks packed at checkpoint time into a pooled buffer, copied into the version by the background thread.
struct HostPart {
  std::shared_ptr<core::HostBytes> bytes;
  std::vector<DrainSegment> segments;  // staging_offset = offset in `bytes`
};

// A deferred region's part of a version (Runtime::protect_deferred): its plan's fill, and the digests of the
// region's last version, both the background thread's.
struct DeferredPart {
  std::size_t region;  // index in the manifest
  std::function<void(std::size_t, std::size_t, std::byte*)> fill;
  std::shared_ptr<std::vector<std::uint64_t>> reference;
};

// Host memory of a version that no store holds yet, counted in the runtime's versions_in_flight from the moment its
// buffer is taken (a sample on another thread then sees it, and make_room frees enough for what comes next) until
// the store counts it (PutStream::on_stored), the job moves on or is dropped: nothing counted stays counted.
class InFlight {
 public:
  InFlight() = default;
  explicit InFlight(std::atomic<std::size_t>* total) : total_(total) {}
  InFlight(InFlight&& o) noexcept : total_(o.total_), bytes_(std::exchange(o.bytes_, 0)) {}
  InFlight& operator=(InFlight&& o) noexcept {
    if (this != &o) {
      release();
      total_ = o.total_;
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~InFlight() { release(); }
  /// Counts `b` (pinned memory is the arena's, counted there); returns the bytes counted.
  std::size_t add(const core::HostBytes* b) {
    if (!total_ || !b || b->pinned()) return 0;
    const std::size_t n = b->touched();
    bytes_ += n;
    *total_ += n;
    return n;
  }
  /// No longer counts `n` of what add() counted (a buffer the version no longer holds).
  void drop(std::size_t n) {
    n = std::min(n, bytes_);
    bytes_ -= n;
    if (total_) *total_ -= n;
  }
  void release() { drop(bytes_); }

 private:
  std::atomic<std::size_t>* total_ = nullptr;
  std::size_t bytes_ = 0;
};

struct Job {
  core::Manifest manifest;
  std::uint64_t payload_bytes = 0;
  bool host_only = false;  // no device region: the payload came from the pageable pool at checkpoint time
  // The version buffer. Host-only versions get it at checkpoint time (host chunks are packed straight into it);
  // versions with device data get it on the background thread, so allocating (and pinning) it is never on the
  // application's path, except when staging rounds drain synchronously.
  std::shared_ptr<core::HostBytes> payload;
  HostPart host_part;
  gpu::Buffer staging;
  std::vector<DrainSegment> segments;
  std::uint64_t device_bytes = 0;       // staging the device chunks need (0: no device region)
  std::vector<DeferredPart> deferred;   // filled into the payload and digested by the background thread
  InFlight in_flight;                   // its host memory, in versions_in_flight until a store holds it
  std::size_t host_part_counted = 0;    // of which the host part's buffer
  std::vector<std::uint64_t> obsolete;  // versions of an abandoned timeline, released before storing
  CheckpointMetrics metrics;
  Clock::time_point started;
};

// Per protected region, the chunks of a version (those that changed, or all of them).
using Dirty = std::vector<std::vector<std::uint32_t>>;

}  // namespace

struct Runtime::Impl {
  struct Entry {
    core::Region region;
    std::variant<core::HostTracker, core::DeviceTracker> tracker;
    Runtime::Locate locate;  // a resizable region of the runtime's own (protect_resizable)
    Runtime::Follow follow;  // a view variable followed (protect(View&))
    Runtime::Plan plan;      // a region written off the application's thread (protect_deferred)
    std::shared_ptr<std::vector<std::uint64_t>> reference;  // its last version's digests (the background's)
    bool store_all = false;  // a planned version of it was not stored: the next stores every chunk in use
  };
  struct Known {
    core::VersionKind kind;
    std::uint64_t base;
  };

  Config cfg;
  // Declared first: the store and the threads below use it, so it is destroyed last.
  std::unique_ptr<runtime::Coordination> coord;
  core::WorkPool pool;
  // Declared before everything that holds device or pinned memory, so it is destroyed after them.
  std::unique_ptr<gpu::Backend> backend;
  std::shared_ptr<core::BufferPool> payload_pool = std::make_shared<core::BufferPool>(8);
  std::shared_ptr<core::PinnedArena> arena;  // pinned when device regions are protected (pinned_payload)
  std::size_t device_bytes = 0;              // protected device bytes
  std::unique_ptr<core::VersionStore> store;
  std::unique_ptr<gpu::Stream> scan_stream, drain_stream;
  gpu::Buffer pinned[2];
  std::vector<gpu::Buffer> free_staging;
  std::vector<Entry> entries;
  std::map<std::string, std::function<void()>> fences;
  bool restarted = false;
  std::vector<std::pair<std::size_t, Runtime::Deferred>> planned;  // the deferred regions' plans of this checkpoint

  // Timeline of this run (touched by the application thread only).
  std::optional<std::uint64_t> last_version;
  std::uint32_t chain_index = 0;
  bool regions_changed = true;

  // Shared with the background thread.
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Job> queue;
  bool busy = false, stopping = false, force_full = false, chain_broken = false;
  std::size_t reserve_bytes = 0;  // a payload buffer to reserve (reserve_first_payload)
  // The background thread is touching a buffer for the next host version (BufferPool::prepare); the sizes of the
  // last full and differential host versions say which size the next one will have.
  bool preparing = false;
  bool reserving = false;  // the background thread is making the reservation (reserve_bytes)
  std::size_t last_full_bytes = 0, last_diff_bytes = 0;
  std::size_t chains_held = 0;   // full versions kept, after the last release (the background thread's)
  std::size_t chain_stored = 0;  // the payload bytes of the newest chain's versions (the background thread's)
  std::size_t full_stored = 0;   // the payload bytes of the newest full version (the background thread's)
  std::exception_ptr error;
  std::map<std::uint64_t, Known> known;  // versions in the store
  std::vector<CheckpointMetrics> done;
  std::thread worker;

  // The memory budget (Config::memory_budget_bytes, or half the node's memory shared among its ranks) and what was
  // seen against it. The distributed layer's application-thread part is read on that thread and kept for the others.
  std::size_t budget = 0;
  std::atomic<std::size_t> staging_held{0}, bounce_bytes{0}, in_flight{0}, arena_bytes{0}, peak{0};
  std::atomic<std::size_t> last_total{0};  // the last sample()'s total
  std::atomic<std::size_t> shed_bytes{0};  // buffers kept for reuse freed by make_room()
  std::mutex room_mutex;                   // make_room()'s answers, one at a time
  std::atomic<std::size_t> being_made{0};  // allowed by make_room(), not yet counted where it lives
  std::atomic<std::size_t> told{0};        // the budget a warning said to raise to (0: none)
  // The components at the peak (the distributed layer's as last read on the application's thread): what to shrink.
  std::mutex peak_mutex;
  std::map<std::string, std::size_t> coord_parts, peak_parts;
  std::mutex warned_mutex;
  std::set<std::string> warned;
  std::map<std::string, std::size_t> read_core_use() const {
    return {{"pinned_arena", arena_bytes.load()},     {"bounce_buffers", bounce_bytes.load()},
            {"device_staging", staging_held.load()},  {"payload_pool", payload_pool->held_bytes()},
            {"versions_in_flight", in_flight.load()}, {"own_versions", store->memory_bytes()},
            {"new_buffers", being_made.load()}};
  }
  // The runtime's components, each buffer counted once although other threads move buffers between them meanwhile
  // (a version's payload from versions_in_flight to own_versions when it is stored, from the pool to a version,
  // back to the pool when a version is released). Every move takes a buffer out of one component before it puts
  // it into the other, so one read counts it at most once there, but a read of the components one after another
  // may see it in the first before the move and in the second after: a moment of twice a version's bytes, which
  // took a run's peak past its budget (ThreadSanitizer's slowdown, a sample on the application's thread while
  // the background thread stored a version). Read again, the first has changed: two reads in a row that agree
  // are taken; after a few that do not, each component's smaller figure of the last two (a move seen in neither
  // is missed for that sample rather than counted twice).
  std::map<std::string, std::size_t> core_use() const {
    std::map<std::string, std::size_t> last = read_core_use();
    for (int tries = 0; tries < 4; ++tries) {
      std::map<std::string, std::size_t> now = read_core_use();
      if (now == last) return now;
      last = std::move(now);
    }
    std::map<std::string, std::size_t> now = read_core_use();
    for (auto& [name, bytes] : now) bytes = std::min(bytes, last[name]);
    return now;
  }
  // The total now (the distributed layer's application-thread part asked afresh on that thread), into the peak.
  std::size_t sample(std::map<std::string, std::size_t>* parts = nullptr, bool app_thread = false) {
    std::map<std::string, std::size_t> use = core_use();
    std::size_t total = 0;
    for (const auto& [k, v] : use) total += v;
    std::map<std::string, std::size_t> c;
    if (coord) {  // (its application-thread parts read afresh on that thread only)
      c = app_thread ? coord->memory_use() : coord->memory_now();
      for (const auto& [k, v] : c) total += v;
      std::lock_guard<std::mutex> lock(peak_mutex);
      coord_parts = c;
    }
    last_total = total;
    if (coord) coord->memory_sampled(total);
    std::size_t p = peak.load();
    while (total > p && !peak.compare_exchange_weak(p, total)) {
    }
    if (total > p) {  // a new peak: its components (unless another thread raised it meanwhile)
      std::lock_guard<std::mutex> lock(peak_mutex);
      if (total == peak.load()) {
        peak_parts = use;
        peak_parts.insert(c.begin(), c.end());
      }
    }
    if (parts) {
      use.insert(c.begin(), c.end());
      *parts = std::move(use);
    }
    return total;
  }
  // Before new memory is touched for a buffer of `bytes` (a payload, or a ward's version, that no kept buffer serves
  // as it is; any thread; core::BufferPool::NewMemory): whether the rank has room for it within its memory budget.
  // For a buffer that is needed, buffers kept only for reuse go first, the payload pool's, then the distributed
  // layer's (Coordination::shed: the wards' receive buffers, the message log's free segments), as much as the
  // excess, so that memory kept for reuse does not take the rank past its budget; a head start (a buffer prepared
  // ahead) gives nothing up.
  // One answer at a time, and what it allowed counts (new_buffers) until it is counted where it lives
  // (new_memory_counted): two threads that each found room for a buffer would otherwise both make theirs.
  bool make_room(std::size_t bytes, bool head_start) {
    std::lock_guard<std::mutex> lock(room_mutex);
    if (!room_for(bytes, head_start)) return false;
    being_made += bytes;
    return true;
  }
  void new_memory_counted(std::size_t bytes) { being_made -= bytes; }  // (after the make_room() that allowed it)
  bool room_for(std::size_t bytes, bool head_start) {
    const std::size_t total = sample();
    if (total + bytes <= budget) return true;
    if (head_start) return false;
    std::size_t excess = total + bytes - budget;
    if (const std::size_t pooled = payload_pool->held_bytes()) {
      payload_pool->trim(pooled > excess ? pooled - excess : 0);
      const std::size_t left = payload_pool->held_bytes(), freed = pooled > left ? pooled - left : 0;
      excess -= std::min(excess, freed);
      shed_bytes += freed;
    }
    if (excess && coord) {
      const std::size_t freed = coord->shed(excess);
      excess -= std::min(excess, freed);
      shed_bytes += freed;
    }
    return excess == 0;
  }

  // A peak more than a log segment over the memory budget (the most it may pass it by), whatever the budget gave up:
  // said once, when the run's memory is read (memory_json) or at its end, with what the rank held and the figure to
  // raise the budget to, unless the rank said already that its budget is too small (say_budget_too_small).
  // memory_json's budget_told_bytes records the figure told first.
  void say_peak_over() {
    const std::size_t total = peak.load();
    if (!budget || total <= budget + core::log_segment_bytes(cfg)) return;
    {
      std::lock_guard<std::mutex> lock(warned_mutex);
      if (warned.count("too-small")) return;
    }
    std::map<std::string, std::size_t> parts;
    {
      std::lock_guard<std::mutex> lock(peak_mutex);
      parts = peak_parts;
    }
    const std::size_t figure = mib_up(total);
    if (warn_once("peak-over", "its memory peaked at " + mib(total) + " (" + largest(parts) +
                                   "), more than its memory budget of " + mib(budget) + " and a log segment (" +
                                   std::to_string(core::log_segment_bytes(cfg) >> 10) +
                                   " KiB): raise REPRISE_MEMORY_BUDGET to at least " + std::to_string(figure) +
                                   " MiB, or log less between checkpoints"))
      told = figure << 20;
  }

  // Says once (per key) on stderr what the budget changed and which setting to raise; whether it said it now.
  bool warn_once(const std::string& key, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(warned_mutex);
      if (!warned.insert(key).second) return false;
    }
    say("reprise: rank " + std::to_string(cfg.rank) + ": warning: " + message);
    return true;
  }
  // The components that are memory kept only for reuse (given up first over the budget).
  inline static const std::set<std::string> kKeptForReuse = {"payload_pool", "ward_buffers", "log_pool",
                                                             "comm_staging"};
  static std::string mib(std::size_t bytes) { return std::to_string((bytes + (std::size_t{1} << 19)) >> 20) + " MiB"; }
  static std::size_t mib_up(std::size_t bytes) { return (bytes + (std::size_t{1} << 20) - 1) >> 20; }
  // "own_versions 9 MiB, wards 8 MiB, ...": the components of half a MiB or more, the largest first (for warnings).
  static std::string largest(const std::map<std::string, std::size_t>& parts) {
    std::vector<std::pair<std::size_t, std::string>> held;
    for (const auto& [name, bytes] : parts)
      if (bytes >= (std::size_t{1} << 19)) held.emplace_back(bytes, name);
    std::sort(held.rbegin(), held.rend());
    std::string what;
    for (const auto& [bytes, name] : held) what += (what.empty() ? "" : ", ") + name + " " + mib(bytes);
    return what;
  }

  Impl(Config c, std::unique_ptr<runtime::Coordination> co)
      : cfg(std::move(c)), coord(std::move(co)), pool((cfg.validate(), cfg.digest_threads)) {
    if (coord)
      store = coord->make_store(cfg);
    else
      store = cfg.dir.empty() ? core::make_memory_store() : core::make_directory_store(cfg.dir, cfg.rank);
    for (std::uint64_t v : store->list()) {
      try {
        const core::Manifest m = store->load_manifest(v);
        known[v] = Known{m.kind, m.base_version};
      } catch (const Error& e) {
        say(std::string("reprise: warning: ") + e.what() + " (left in place, not restorable)");
      }
    }
    restarted = !known.empty();
    budget = cfg.memory_budget_bytes ? cfg.memory_budget_bytes
                                     : core::default_memory_budget(coord ? coord->ranks_on_node() : 1);
    if (coord) coord->memory_budget(budget);
    if (budget) {
      auto room = [this](std::size_t bytes, bool ahead) { return make_room(bytes, ahead); };
      auto counted = [this](std::size_t bytes) { new_memory_counted(bytes); };
      payload_pool->on_new_memory(room, counted);
      if (coord) coord->attach_room(room, counted);
    }
    worker = core::named_thread("reprise-drain", [this] { worker_loop(); });
  }

  ~Impl() {
    if (coord) coord->attach_room(nullptr, nullptr);  // (its threads outlive this)
    {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait(lock, [&] { return queue.empty() && !busy; });
      stopping = true;
    }
    cv.notify_all();
    worker.join();
    if (coord) coord->release_store();  // (the store goes below; the progress thread applies job floors to it)
  }

  gpu::Backend& device() {
    if (backend) return *backend;
    backend = gpu::make_backend(cfg.device_backend, "a device-memory region was protected");
    scan_stream = backend->create_stream(false);
    drain_stream = backend->create_stream(true);
    return *backend;
  }

  void run_fences() {
    for (auto& [key, fence] : fences) fence();
  }

  bool next_forced = false;  // the checkpoint being taken is forced_checkpoint()'s
  /// A resizable region moved or changed size: a fresh tracker, and the next version is a full one.
  void relocate(Entry& e, std::pair<void*, std::size_t> where);
  /// Followed regions read from their variables (before any other effect of a checkpoint or a restore).
  void follow_handles();

  // The stages of checkpoint() (defined beside it).
  void begin_checkpoint(std::uint64_t version);
  Job new_version(std::uint64_t version, Clock::time_point t0);
  bool full_due();
  Dirty digest_and_compare(Job& job);
  std::vector<std::uint32_t> deferred_chunks(std::size_t entry, bool full);
  void unqueued_plans();
  Deferred& planned_for(std::size_t entry) {
    return std::find_if(planned.begin(), planned.end(), [&](const auto& p) { return p.first == entry; })->second;
  }
  void promote(Job& job, Dirty& dirty);
  void pack(Job& job, const Dirty& dirty);
  void pack_device(Job& job, const Dirty& dirty);
  void seal(Job& job);
  void record(Job& job, Clock::time_point t0);

  // Waits until at most `limit` jobs are queued or running (a reservation to make or being made counts as one).
  void wait_queue(std::size_t limit) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return queue.size() + (busy || reserve_bytes ? 1 : 0) <= limit; });
  }

  // Versions with device data go into the pinned arena when it has room (the drain then DMAs straight into
  // them); otherwise, like host-only versions, into recycled pageable buffers.
  // A checkpoint right after the last one was stored (wait() returned, no compute between) waits for the buffer
  // the background thread is touching for it: it would otherwise take new memory and touch every page itself. So
  // does one right after protect() for the reservation under way; one not started yet is dropped (this take makes
  // its own buffer): two buffers made at once would each find room in the memory budget that only one has.
  std::shared_ptr<core::HostBytes> take_payload(std::size_t bytes, bool has_device_data, bool* reused = nullptr) {
    if (has_device_data && arena)
      if (auto pinned = arena->allocate(bytes)) return std::make_shared<core::HostBytes>(std::move(*pinned));
    {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait(lock, [&] { return !preparing && !reserving; });
      reserve_bytes = 0;
    }
    return core::take_pooled(payload_pool, bytes, reused);
  }

  // The first version of host regions would be packed inside checkpoint() into memory never touched, a page
  // fault per 4 KiB on the application's path. protect() asks the background thread to reserve that buffer,
  // touched (BufferPool::reserve); later versions reuse buffers already touched (prepare()).
  void reserve_first_payload() {
    std::size_t host = 0;
    for (const auto& e : entries)
      if (e.region.space == MemorySpace::Host) host += e.region.bytes;
    {
      std::lock_guard<std::mutex> lock(mutex);
      reserve_bytes = host;
    }
    cv.notify_all();
  }

  gpu::Buffer take_staging(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = free_staging.begin(); it != free_staging.end(); ++it)
      if (it->size() >= bytes) {
        gpu::Buffer b = std::move(*it);
        free_staging.erase(it);
        return b;
      }
    for (const auto& b : free_staging) staging_held -= b.size();
    free_staging.clear();  // smaller ones: give their memory back before allocating
    return gpu::Buffer();
  }

  // Staging -> payload. Into a pinned payload directly; otherwise through two pinned buffers, alternating,
  // the D2H copy of piece k overlapping the host copy of piece k-1. `on_ready(offset, bytes)`: those payload bytes
  // are in host memory (the buddy level sends them at once, overlapping the rest of the drain).
  using ReadyFn = std::function<void(std::size_t, std::size_t)>;
  void drain(const gpu::Buffer& staging, const std::vector<DrainSegment>& segments, core::HostBytes& payload,
             const ReadyFn& on_ready = nullptr) {
    gpu::Backend& be = *backend;
    const std::size_t piece = cfg.pinned_piece_bytes;
    if (payload.pinned()) {
      // The version buffer is page-locked: DMA each segment straight into it, no bounce copy; in pieces with an
      // event each when someone waits for the parts.
      struct Part {
        std::unique_ptr<gpu::Event> event;
        std::size_t offset, bytes;
      };
      std::vector<Part> parts;
      for (const DrainSegment& s : segments)
        for (std::size_t off = 0; off < s.bytes; off += on_ready ? piece : s.bytes) {
          const std::size_t n = on_ready ? std::min(piece, s.bytes - off) : s.bytes;
          be.copy_to_host(payload.data() + s.payload_offset + off, staging.as<std::byte>() + s.staging_offset + off, n,
                          *drain_stream);
          if (on_ready) parts.push_back(Part{be.record(*drain_stream), s.payload_offset + off, n});
        }
      for (Part& p : parts) {
        be.wait(*p.event);
        on_ready(p.offset, p.bytes);
      }
      be.synchronize(*drain_stream);
      return;
    }
    for (auto& p : pinned)
      if (!p) {
        p = be.alloc_pinned(piece);
        bounce_bytes += piece;
      }
    struct Pending {
      std::unique_ptr<gpu::Event> event;
      std::byte* dst;
      std::size_t bytes;
      int buffer;
    };
    std::optional<Pending> pending;
    auto finish = [&](Pending& p) {
      be.wait(*p.event);
      std::memcpy(p.dst, pinned[p.buffer].data(), p.bytes);
      if (on_ready) on_ready(static_cast<std::size_t>(p.dst - payload.data()), p.bytes);
    };
    int next = 0;
    for (const DrainSegment& s : segments)
      for (std::size_t off = 0; off < s.bytes; off += piece) {
        const std::size_t n = std::min(piece, s.bytes - off);
        be.copy_to_host(pinned[next].data(), staging.as<std::byte>() + s.staging_offset + off, n, *drain_stream);
        Pending now{be.record(*drain_stream), payload.data() + s.payload_offset + off, n, next};
        if (pending) finish(*pending);
        pending = std::move(now);
        next ^= 1;
      }
    if (pending) finish(*pending);
  }

  void worker_loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stopping || !queue.empty() || reserve_bytes; });
        if (queue.empty() && !stopping) {  // busy meanwhile: wait() waits for the reservation too
          const std::size_t bytes = std::exchange(reserve_bytes, 0);
          busy = reserving = true;
          lock.unlock();
          try {
            payload_pool->reserve(bytes);
          } catch (const std::bad_alloc&) {  // the checkpoint allocates it then, and reports if it cannot
          }
          lock.lock();
          busy = reserving = false;
          cv.notify_all();
          continue;
        }
        if (queue.empty()) return;
        job = std::move(queue.front());
        queue.pop_front();
        busy = true;
      }
      try {
        process(job);
        job.in_flight.release();
      } catch (...) {
        job.in_flight.release();
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        force_full = true;
        chain_broken = true;
      }
      // The next version gets memory that was already touched, not page faults inside checkpoint(): a buffer of
      // the size it will have (a full version's after the last differential one of a chain, else a differential
      // one's) is prepared after this version is durable, so wait() does not wait for it (a checkpoint does).
      std::size_t next = 0;
      {
        std::lock_guard<std::mutex> lock(mutex);
        busy = false;
        if (job.staging && free_staging.size() < cfg.max_inflight)
          free_staging.push_back(std::move(job.staging));
        else if (job.staging)
          staging_held -= job.staging.size();
        if (job.host_only) {
          const bool full = job.manifest.kind == core::VersionKind::Full;
          (full ? last_full_bytes : last_diff_bytes) = job.payload_bytes;
          next = job.manifest.chain_index + 1 >= cfg.full_every ? last_full_bytes : last_diff_bytes;
          preparing = next > 0;
        }
      }
      cv.notify_all();
      if (next == 0) continue;
      try {
        payload_pool->prepare(next);     // (not made without room in the budget: make_room)
      } catch (const std::bad_alloc&) {  // the checkpoint allocates it then, and reports if it cannot
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        preparing = false;
      }
      cv.notify_all();
    }
  }

  void process(Job& job) {
    const bool full = job.manifest.kind == core::VersionKind::Full;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (full) chain_broken = false;
      if (chain_broken)
        throw StoreError("version " + std::to_string(job.manifest.version) +
                         " was not stored: an earlier version of its chain failed to store");
    }
    for (std::uint64_t v : job.obsolete) store->release(v);
    ensure_payload(job);
    pack_deferred(job);
    // The store gets the version while the drain fills it: the buddy level sends each part as soon as it is in
    // host memory. What the drain does not write (host regions, earlier synchronous rounds) is ready now.
    std::unique_ptr<core::PutStream> put = store->begin_put(job.manifest, job.payload);
    {
      std::vector<std::pair<std::size_t, std::size_t>> drained;
      for (const DrainSegment& s : job.segments) drained.emplace_back(s.payload_offset, s.bytes);
      std::sort(drained.begin(), drained.end());
      std::size_t at = 0;
      for (const auto& [off, n] : drained) {
        if (off > at) put->ready(at, off - at);
        at = std::max(at, off + n);
      }
      if (job.payload->size() > at) put->ready(at, job.payload->size() - at);
    }
    if (!job.segments.empty()) {
      const auto t0 = Clock::now();
      std::size_t before_last = 0;
      ReadyFn on_ready;
      if (put->streams())
        on_ready = [&](std::size_t off, std::size_t n) {
          before_last = put->handed_on();  // sampled before each part: what was already on its way
          put->ready(off, n);
        };
      drain(job.staging, job.segments, *job.payload, on_ready);
      job.metrics.drain.seconds += seconds_since(t0);  // plus the synchronous rounds, if any
      job.metrics.streamed_bytes = before_last;
    }
    const auto t1 = Clock::now();
    job.in_flight.drop(release_unused(*job.payload));
    // Counted in versions_in_flight until the store counts it (no sample on another thread counts it twice).
    put->on_stored([&] { job.in_flight.release(); });
    put->finish(core::payload_checksum(job.manifest));  // from the chunks' digests: no pass over the payload
    job.in_flight.release();                            // (a store that did not say)
    // The new version stored, the old ones not yet released: this rank's peak.
    const std::size_t stored_total = sample();
    const bool over_budget = budget && stored_total > budget;
    job.metrics.memory_bytes = stored_total;
    job.metrics.memory_peak_bytes = peak.load();
    job.metrics.memory_budget_bytes = budget;
    job.metrics.store.seconds = seconds_since(t1);
    job.metrics.store.bytes = job.payload->size();
    chain_stored = (job.manifest.kind == core::VersionKind::Full ? 0 : chain_stored) + job.payload->size();
    if (job.manifest.kind == core::VersionKind::Full) full_stored = job.payload->size();
    job.payload.reset();
    job.metrics.released_versions = release_old(job.manifest, over_budget);
    shorten_chain(job.manifest, stored_total);
    if (over_budget) {
      fit_budget();
      say_budget_too_small();
    }
    job.metrics.durable_seconds = seconds_since(job.started);
    std::lock_guard<std::mutex> lock(mutex);
    done.push_back(job.metrics);
  }

  // The chunks of the deferred regions (Runtime::protect_deferred) that this version stores, filled by their plans
  // straight into the payload and digested there; the other chunks keep their last version's digests.
  void pack_deferred(Job& job) {
    for (DeferredPart& part : job.deferred) {
      core::RegionRecord& r = job.manifest.regions[part.region];
      std::vector<std::uint64_t>& ref = *part.reference;
      if (job.manifest.kind == core::VersionKind::Full)
        ref.assign(r.chunk_count(), 0);  // (the digest of a chunk a full version leaves out: it reads as zeros)
      else
        ref.resize(r.chunk_count());
      std::byte* dst = job.payload->data() + r.payload_offset;
      for (std::uint32_t c : r.chunks) {
        const std::size_t n = r.chunk_length(c);
        part.fill(std::size_t{c} * r.chunk_bytes, n, dst);
        ref[c] = core::xxh3_digest(dst, n);
        dst += n;
      }
      r.digests = ref;
    }
  }

  void ensure_payload(Job& job) {
    if (job.payload) return;
    job.payload = take_payload(job.payload_bytes, true);
    job.in_flight.add(job.payload.get());
    job.metrics.payload_pinned = job.payload->pinned();
    for (const DrainSegment& s : job.host_part.segments)
      std::memcpy(job.payload->data() + s.payload_offset, job.host_part.bytes->data() + s.staging_offset, s.bytes);
    job.in_flight.drop(std::exchange(job.host_part_counted, 0));  // (out of the count before it is in the pool's)
    job.host_part = HostPart{};
  }

  // What a restore checks of the payloads it loads: every stored chunk against its digest, once
  // (REPRISE_VERIFY_RESTORE).
  core::PayloadCheck payload_check() const {
    return cfg.verify_restore ? core::PayloadCheck::Chunks : core::PayloadCheck::None;
  }

  // Still over the memory budget once old chains are released: the payload buffers kept for reuse go, as many as
  // needed, and the pool keeps no more than that for the rest of the run (buffers of released versions handed
  // back to it took ranks over the budget again, by up to 4 MiB in bench/memory_budget.py's runs).
  void fit_budget() {
    std::map<std::string, std::size_t> parts;
    const std::size_t total = sample(&parts);
    if (total <= budget) return;
    const std::size_t pooled = parts["payload_pool"], rest = total - pooled;
    const std::size_t keep = rest < budget ? budget - rest : 0;
    // (Also when make_room() gave every kept buffer up already: released versions would fill the pool again.)
    payload_pool->limit(keep);
    warn_once("pool", "payload buffers kept for reuse limited to " + mib(keep) + " by the memory budget of " +
                          mib(budget) +
                          " for the rest of the run: later versions are packed into new memory (a page fault per "
                          "4 KiB inside checkpoint()); raise REPRISE_MEMORY_BUDGET");
  }

  // On the application's thread, after a checkpoint: over the memory budget, the distributed layer's memory kept
  // for reuse (the message log's free segments, the device messages' staging) goes first, as much as needed.
  void fit_coordination_budget() {
    const std::size_t total = sample(nullptr, true);
    if (!budget || !coord || total <= budget) return;
    if (const std::size_t released = coord->fit_budget(total - budget))
      warn_once("coordination_pools",
                mib(released) +
                    " of message log segments and staging buffers kept for reuse released by the memory "
                    "budget of " +
                    mib(budget) +
                    ": later inter-group messages are logged into new memory (a page fault "
                    "per 4 KiB in the send); raise REPRISE_MEMORY_BUDGET");
  }

  // Over half the memory budget, a version's buffer about to be stored gives back the pages it touched past the
  // version's end (core::HostBytes::release_unused): a buffer kept for reuse serves a version up to half its size
  // (BufferPool::take's waste bound) and is prepared with a quarter of headroom, so stored versions held up to a
  // third more memory than their bytes (0.7 to 2.5 MiB of 7 to 9 MiB at a store's largest in bench/memory_budget.py
  // at 16 MiB). Only then: a buffer given back to the pool with fewer pages touches them again when it is reused.
  // (By the last sample: the one after this version is stored comes next, no other pass over the stores here.)
  // Returns the bytes it no longer holds.
  std::size_t release_unused(core::HostBytes& payload) {
    if (!budget || last_total.load() <= budget / 2) return 0;
    const std::size_t before = payload.touched();
    payload.release_unused();
    return before - payload.touched();
  }

  // Over half the memory budget (`held`: the rank's memory with `m` stored), when the chain that `m` ends holds
  // more than two full versions (a full one and differential ones adding up to more than another, as stored: a
  // region with holes, the message log's, is smaller than its protected bytes), the next version is a full one,
  // before REPRISE_FULL_EVERY's; once it is committed, the chain before it goes. The chain's own bytes decide, not
  // all the versions held: the chain before it may still wait for a commit. Half, not the whole budget: the chain
  // before a full version stays until the job floor passes that version (checkpoints later under
  // REPRISE_ROLLBACK=all) and is held at the buddy too, so a chain cut only once the rank is over its budget had
  // already taken it there. In bench/memory_budget.py (every checkpoint forced by the log bound, 8 ranks, 2 a
  // node), cut over the budget, the heaviest rank peaked at 1.24 times a 16 MiB budget; cut over half, 1.04.
  void shorten_chain(const core::Manifest& m, std::size_t held) {
    if (!budget || held <= budget / 2 || m.kind == core::VersionKind::Full || chain_stored <= 2 * full_stored) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      force_full = true;
    }
    warn_once("chain-length", "a full version comes before REPRISE_FULL_EVERY's (" + std::to_string(cfg.full_every) +
                                  ") because this rank holds more than half its memory budget of " + mib(budget) +
                                  " and its chain more than two full versions (the chain before a full version is "
                                  "held until it is committed everywhere, here and at the buddy); raise "
                                  "REPRISE_MEMORY_BUDGET");
  }

  // Over the memory budget although it holds one chain, counting nothing kept only for reuse (kKeptForReuse, which
  // the budget trims anyway): what this run holds at once does not fit in the budget, whatever else Reprise gives
  // up (its own versions, its wards' copies of theirs, the log its receivers have not committed yet and its
  // region). Says once what the rank holds, of what, and the figure to raise the budget to.
  void say_budget_too_small() {
    if (chains_held > 1) return;  // (the next full version releases the chain before it)
    std::map<std::string, std::size_t> parts;
    sample(&parts);
    {
      std::lock_guard<std::mutex> lock(peak_mutex);
      parts.insert(coord_parts.begin(), coord_parts.end());
    }
    std::size_t needed = 0;
    for (auto it = parts.begin(); it != parts.end();) {
      if (kKeptForReuse.count(it->first)) {
        it = parts.erase(it);
        continue;
      }
      needed += it->second;
      ++it;
    }
    if (needed <= budget) return;
    const std::size_t figure = mib_up(needed);
    if (warn_once("too-small", "holds " + mib(needed) + " besides any buffer kept for reuse (" + largest(parts) +
                                   "), more than its memory budget of " + mib(budget) +
                                   " although it keeps one chain: its own versions, its wards' copies of theirs and "
                                   "the message log its receivers have not committed need that much at once; raise "
                                   "REPRISE_MEMORY_BUDGET to at least " +
                                   std::to_string(figure) + " MiB, or log less between checkpoints"))
      told = figure << 20;
  }

  // Keeps the newest `keep_chains` full versions and everything after the oldest of them; only the newest chain
  // when the rank is over its memory budget, or its buddy over its own (where this rank's copies count).
  std::uint64_t release_old(const core::Manifest& m, bool over_budget) {
    std::vector<std::uint64_t> fulls, drop;
    {
      std::lock_guard<std::mutex> lock(mutex);
      known[m.version] = Known{m.kind, m.base_version};
      for (auto& [v, k] : known)
        if (k.kind == core::VersionKind::Full && v <= m.version) fulls.push_back(v);
      std::size_t keep = cfg.keep_chains;
      const bool buddy_over = !over_budget && coord && coord->buddy_over_budget();
      if (keep > 1 && fulls.size() > 1 && (over_budget || buddy_over)) {
        keep = 1;  // (the buddy level keeps the committed chain until a newer one is committed)
        if (over_budget)
          warn_once("chains", "keeping 1 chain instead of " + std::to_string(cfg.keep_chains) +
                                  " (REPRISE_KEEP_CHAINS): this rank holds more than its memory budget of " +
                                  mib(budget) + "; raise REPRISE_MEMORY_BUDGET");
        else
          warn_once("buddy-chains", "keeping 1 chain instead of " + std::to_string(cfg.keep_chains) +
                                        " (REPRISE_KEEP_CHAINS): its buddy holds more than its own memory budget, "
                                        "its copies of this rank's versions included; raise REPRISE_MEMORY_BUDGET "
                                        "(on the buddy's node)");
      }
      chains_held = std::min(fulls.size(), keep);
      if (fulls.size() <= keep) return 0;
      const std::uint64_t oldest_kept = fulls[fulls.size() - keep];
      for (auto& [v, k] : known)
        if (v < oldest_kept) drop.push_back(v);
      for (auto v : drop) known.erase(v);
    }
    for (auto v : drop) store->release(v);
    return drop.size();
  }
};

// ------------------------------------------------------------------------------------------------------------

Runtime::Runtime(Config config) : impl_(std::make_unique<Impl>(std::move(config), nullptr)) {}

Runtime::Runtime(Config config, std::unique_ptr<runtime::Coordination> coordination)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(coordination))) {
  Impl* d = impl_.get();
  if (d->coord) d->coord->attach([d] { d->wait_queue(0); });
}

Runtime::~Runtime() {
  try {
    impl_->wait_queue(0);
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->error) std::rethrow_exception(impl_->error);
  } catch (const std::exception& e) {
    say(std::string("reprise: a checkpoint failed and was never reported through wait(): ") + e.what());
  }
  impl_->say_peak_over();
  if (!impl_->cfg.metrics_file.empty()) {
    std::ofstream(impl_->cfg.metrics_file) << metrics_json() << "\n";
  }
}

void Runtime::protect(const std::string& name, void* data, std::size_t bytes, MemorySpace space,
                      std::shared_ptr<void> keepalive) {
  if (name.empty()) throw UsageError("a protected region needs a name");
  for (const auto& e : impl_->entries)
    if (e.region.name == name)
      throw UsageError("region '" + name + "' is already protected: names must be unique (unprotect it first)");
  if (!data && bytes) throw UsageError("region '" + name + "': null pointer with " + std::to_string(bytes) + " bytes");
  core::Region region{name, data, bytes, space, std::move(keepalive)};
  const std::size_t chunk = impl_->cfg.chunk_bytes;
  if (space == MemorySpace::Host) {
    impl_->entries.push_back({region, core::HostTracker(region, chunk), nullptr, nullptr, nullptr, nullptr});
    impl_->reserve_first_payload();
  } else {
    impl_->wait_queue(0);  // the background thread reads the arena and the staging pool
    gpu::Backend& be = impl_->device();
    impl_->entries.push_back(
        {region, std::variant<core::HostTracker, core::DeviceTracker>(std::in_place_index<1>, region, chunk, be),
         nullptr, nullptr, nullptr, nullptr});
    impl_->device_bytes += bytes;
    if (impl_->cfg.pinned_payload) {
      // Pinned now, before the compute loop, so that no checkpoint pins memory (see core/pinned_arena.hpp).
      if (!impl_->arena) impl_->arena = core::PinnedArena::create(be);
      std::size_t want = impl_->cfg.pinned_arena_bytes ? impl_->cfg.pinned_arena_bytes : 2 * impl_->device_bytes;
      // Within the memory budget: at most half of it (versions that find no room go through the bounce buffers).
      if (const std::size_t b = impl_->budget; b && want > b / 2) {
        impl_->warn_once("arena", "the pinned arena is limited to " + Impl::mib(b / 2) + " (not " + Impl::mib(want) +
                                      ") by the memory budget of " + Impl::mib(b) +
                                      ": versions that do not fit go through two pinned bounce buffers, a slower "
                                      "drain; raise REPRISE_MEMORY_BUDGET");
        want = b / 2;
      }
      if (want > impl_->arena->capacity()) impl_->arena->grow(want - impl_->arena->capacity());
      impl_->arena_bytes = impl_->arena->capacity();
    }
  }
  impl_->regions_changed = true;
}

void Runtime::protect_resizable(const std::string& name, Locate locate) {
  const auto [data, bytes] = locate(std::nullopt);
  protect(name, data, bytes, MemorySpace::Host);
  impl_->entries.back().locate = std::move(locate);
}

void Runtime::protect_deferred(const std::string& name, Plan plan, Locate locate) {
  const auto [data, bytes] = locate(std::nullopt);
  protect(name, data, bytes, MemorySpace::Host);
  Impl::Entry& e = impl_->entries.back();
  e.locate = std::move(locate);
  e.plan = std::move(plan);
  e.reference = std::make_shared<std::vector<std::uint64_t>>();
}

void Runtime::protect_following(const std::string& name, MemorySpace space, Follow follow) {
  const Located now = follow();
  protect(name, now.data, now.bytes, space);
  impl_->entries.back().follow = std::move(follow);
}

bool Runtime::forced_checkpoint(std::uint64_t version) {
  if (impl_->last_version && version <= *impl_->last_version) return false;
  impl_->next_forced = true;
  checkpoint(version);
  return true;
}

void Runtime::Impl::relocate(Entry& e, std::pair<void*, std::size_t> where) {
  if (where.first == e.region.data && where.second == e.region.bytes) return;
  if (!where.first && where.second)
    throw Error("region '" + e.region.name + "': null pointer with " + std::to_string(where.second) + " bytes");
  e.region.data = where.first;
  e.region.bytes = where.second;
  e.tracker = core::HostTracker(e.region, cfg.chunk_bytes);
  regions_changed = true;
}

// A followed view swapped or reassigned: its chunks are compared with the last version's by contents, so the
// version stays differential. Every region is checked before any moves: a changed size changes nothing.
void Runtime::Impl::follow_handles() {
  std::vector<std::pair<Entry*, void*>> moved;
  for (auto& e : entries) {
    if (!e.follow) continue;
    const Located now = e.follow();
    if (now.bytes != e.region.bytes)
      throw UsageError("view '" + e.region.name + "' is " + std::to_string(now.bytes) + " bytes now, " +
                       std::to_string(e.region.bytes) +
                       " when it was protected: a followed view keeps its extents (unprotect(\"" + e.region.name +
                       "\") and protect it again to change them)");
    if (now.data != e.region.data) moved.emplace_back(&e, now.data);
  }
  for (auto& [e, data] : moved) {
    e->region.data = data;
    std::visit([data = data](auto& tracker) { tracker.retarget(data); }, e->tracker);
  }
}

void Runtime::unprotect(const std::string& name) {
  auto& v = impl_->entries;
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it->region.name == name) {
      v.erase(it);
      impl_->regions_changed = true;
      return;
    }
  throw UsageError("region '" + name + "' is not protected");
}

void Runtime::add_fence(const std::string& key, std::function<void()> fence) {
  impl_->fences[key] = std::move(fence);
}

// checkpoint() = begin, digest_and_compare, promote, pack, seal, record: the part of a checkpoint the
// application waits for. The drain, the store and the buddy transfer run on the background thread (process()).
void Runtime::checkpoint(std::uint64_t version) {
  Impl& d = *impl_;
  const auto t0 = Clock::now();
  d.planned.clear();
  try {
    d.begin_checkpoint(version);
    Job job = d.new_version(version, t0);
    Dirty dirty = d.digest_and_compare(job);
    d.promote(job, dirty);
    d.pack(job, dirty);
    d.seal(job);
    d.record(job, t0);
  } catch (...) {
    d.unqueued_plans();
    throw;
  }
}

// A checkpoint that failed after deferred regions were planned: no version stores what their plans changed, so the
// next version of each stores every chunk in use (the plans after build on this one's layout).
void Runtime::Impl::unqueued_plans() {
  for (const auto& p : planned) entries[p.first].store_all = true;  // (also when it failed after queueing: more)
  planned.clear();
}

// Before capture: a timeline the coordination dropped (start over), the order of versions, room in the queue,
// the application's fences, the coordination's barrier (where commits are agreed), resizable regions located.
void Runtime::Impl::begin_checkpoint(std::uint64_t version) {
  if (coord && coord->take_start_over()) {
    wait_queue(0);
    std::lock_guard<std::mutex> lock(mutex);
    last_version.reset();
    chain_index = 0;
    known.clear();
    force_full = true;
    chain_broken = false;
    error = nullptr;
  }
  if (last_version && version <= *last_version)
    throw UsageError("checkpoint(" + std::to_string(version) + ") after version " + std::to_string(*last_version) +
                     ": versions must increase");
  follow_handles();  // a usage error before the group's barrier, so that no member waits for this one
  wait_queue(cfg.max_inflight > 0 ? cfg.max_inflight - 1 : 0);
  run_fences();
  if (coord) {
    if (full_due()) coord->full_version_due();  // (known before the capture; changed regions are known after)
    coord->before_capture(version);
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    Entry& e = entries[i];
    if (!e.plan) {
      if (e.locate) relocate(e, e.locate(std::nullopt));
      continue;
    }
    Deferred d = e.plan();
    if (d.bytes != e.region.bytes) {  // its memory is the background thread's now: only the size is known here
      e.region.bytes = d.bytes;
      e.tracker = core::HostTracker(e.region, cfg.chunk_bytes);
      regions_changed = true;
    }
    planned.emplace_back(i, std::move(d));
  }
}

// Whether the next version is a full one whatever its regions do: forced, the first of the run, or the chain's
// REPRISE_FULL_EVERY-th.
bool Runtime::Impl::full_due() {
  std::lock_guard<std::mutex> lock(mutex);
  return force_full || !last_version || chain_index + 1 >= cfg.full_every;
}

// The version's manifest header: full (forced, regions changed, first of the run, or every full_every-th), or
// differential on the last one.
Job Runtime::Impl::new_version(std::uint64_t version, Clock::time_point t0) {
  const bool full = regions_changed || full_due();
  Job job;
  job.started = t0;
  job.in_flight = InFlight(&in_flight);
  core::Manifest& m = job.manifest;
  m.rank = static_cast<std::uint32_t>(cfg.rank);
  m.version = version;
  m.kind = full ? core::VersionKind::Full : core::VersionKind::Differential;
  m.base_version = full ? version : *last_version;
  m.chain_index = full ? 0 : chain_index + 1;
  m.created_unix = static_cast<double>(std::time(nullptr));
  return job;
}

// Digests every chunk where it lives (GPU kernel for device regions, XXH3 threads for host ones) and compares them
// with the last version's: per region, the chunks that changed (all of them in a full version).
Dirty Runtime::Impl::digest_and_compare(Job& job) {
  core::Manifest& m = job.manifest;
  const bool full = m.kind == core::VersionKind::Full;
  const auto t_digest = Clock::now();
  Dirty dirty(entries.size());
  std::uint64_t scanned = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    Entry& e = entries[i];
    core::RegionRecord r;
    r.name = e.region.name;
    r.bytes = e.region.bytes;
    r.space = e.region.space;
    r.chunk_bytes = static_cast<std::uint32_t>(cfg.chunk_bytes);
    if (e.plan) {
      dirty[i] = deferred_chunks(i, full);
      r.digest_kind = gpu::DigestKind::Xxh3;
      r.digests.assign(kernels::chunk_count(e.region.bytes, cfg.chunk_bytes), 0);  // the background thread's
      r.chunks = dirty[i];
      m.regions.push_back(std::move(r));
      continue;  // (not scanned here)
    }
    if (auto* h = std::get_if<core::HostTracker>(&e.tracker)) {
      dirty[i] = h->scan(pool, full);
      r.digest_kind = gpu::DigestKind::Xxh3;
      r.digests = h->digests();
    } else {
      auto& dt = std::get<core::DeviceTracker>(e.tracker);
      dirty[i] = dt.scan(*scan_stream, full);
      r.digest_kind = gpu::DigestKind::Lanes64;
      r.digests = dt.digests();
    }
    r.chunks = dirty[i];
    scanned += e.region.bytes;
    m.regions.push_back(std::move(r));
  }
  job.metrics.digest = {seconds_since(t_digest), scanned};
  return dirty;
}

// A deferred region's chunks its plan may change: in a full version (or when every byte may have changed) all of
// those that hold data (Deferred::used); the room behind them reads back as zeros (docs/FORMAT.md).
std::vector<std::uint32_t> Runtime::Impl::deferred_chunks(std::size_t entry, bool full) {
  const std::size_t n = kernels::chunk_count(entries[entry].region.bytes, cfg.chunk_bytes);
  std::vector<std::uint32_t> chunks;
  const Deferred& d = planned_for(entry);
  if (full || d.all || entries[entry].store_all) {
    const std::size_t used = std::min(d.used, entries[entry].region.bytes);
    chunks.resize(std::min(n, (used + cfg.chunk_bytes - 1) / cfg.chunk_bytes));
    std::iota(chunks.begin(), chunks.end(), 0u);
    return chunks;
  }
  for (const auto& [from, to] : d.changed) {
    if (to <= from) continue;
    for (std::size_t c = from / cfg.chunk_bytes; c < n && c <= (to - 1) / cfg.chunk_bytes; ++c)
      chunks.push_back(static_cast<std::uint32_t>(c));
  }
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  return chunks;
}

// Nearly every byte changed (a stencil's field does at every step; what stays is small, e.g. a step counter): the
// version becomes a full one, its unchanged chunks packed too (Config::full_at_dirty_percent). Its chain starts
// here, so the versions before it are released once it is kept.
void Runtime::Impl::promote(Job& job, Dirty& dirty) {
  core::Manifest& m = job.manifest;
  if (m.kind == core::VersionKind::Full || cfg.full_at_dirty_percent == 0) return;
  std::uint64_t changed = 0;
  for (const auto& r : m.regions) changed += r.stored_bytes();
  if (changed * 100 < m.protected_bytes() * cfg.full_at_dirty_percent) return;
  job.metrics.promoted = true;
  m.kind = core::VersionKind::Full;
  m.base_version = m.version;
  m.chain_index = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    core::RegionRecord& r = m.regions[i];
    if (r.chunks.size() == r.chunk_count()) continue;
    if (entries[i].plan) {
      dirty[i] = deferred_chunks(i, true);
    } else if (std::holds_alternative<core::HostTracker>(entries[i].tracker)) {
      dirty[i].resize(r.chunk_count());
      std::iota(dirty[i].begin(), dirty[i].end(), 0u);
    } else {
      dirty[i] = std::get<core::DeviceTracker>(entries[i].tracker).select_all(*scan_stream);
    }
    r.chunks = dirty[i];
  }
}

// Host chunks into the payload now (or into a host part, when the version also has device data: its payload is
// allocated off the application's path); device chunks into staging on the device, in rounds drained
// synchronously when staging is short. After this the application may change its data.
void Runtime::Impl::pack(Job& job, const Dirty& dirty) {
  core::Manifest& m = job.manifest;
  job.payload_bytes = m.layout_payload();
  const auto t_pack = Clock::now();
  bool has_device = false;
  std::uint64_t host_dirty = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].region.space == MemorySpace::Device) {
      has_device = true;
      job.device_bytes += m.regions[i].stored_bytes() + gpu::kDeviceAlign;  // (with its segment's padding)
    } else if (entries[i].plan) {
      job.deferred.push_back({i, std::exchange(planned_for(i).fill, nullptr), entries[i].reference});
      entries[i].store_all = false;
    } else {
      host_dirty += m.regions[i].stored_bytes();
    }
  }
  job.host_only = !has_device;
  if (!has_device) {
    job.payload = take_payload(job.payload_bytes, false, &job.metrics.payload_warm);
    job.in_flight.add(job.payload.get());
  } else if (host_dirty) {
    job.host_part.bytes = take_payload(host_dirty, false, &job.metrics.payload_warm);
    job.host_part_counted = job.in_flight.add(job.host_part.bytes.get());
  }
  if (!host_dirty) job.metrics.payload_warm = false;  // (no host chunk packed)
  std::size_t host_used = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto* h = std::get_if<core::HostTracker>(&entries[i].tracker);
    if (!h || entries[i].plan) continue;
    const core::RegionRecord& r = m.regions[i];
    if (job.payload) {
      h->pack(pool, dirty[i], job.payload->data() + r.payload_offset);
    } else if (!dirty[i].empty()) {
      h->pack(pool, dirty[i], job.host_part.bytes->data() + host_used);
      job.host_part.segments.push_back({host_used, r.payload_offset, r.stored_bytes()});
      host_used += r.stored_bytes();
    }
  }
  if (job.device_bytes > 0) pack_device(job, dirty);
  job.metrics.pack = {seconds_since(t_pack), job.payload_bytes};
  if (job.segments.empty()) job.staging = gpu::Buffer();
}

void Runtime::Impl::pack_device(Job& job, const Dirty& dirty) {
  const core::Manifest& m = job.manifest;
  // Sized for everything protected (capped by the budget), so the pooled buffers fit every later checkpoint:
  // growing them would mean cudaFree, which synchronises the device.
  std::size_t device_regions = 0;
  for (const auto& e : entries) device_regions += e.region.space == MemorySpace::Device;
  // Within the memory budget: at most a quarter of it per checkpoint in flight (more pack rounds otherwise).
  const std::size_t wanted =
      std::min<std::size_t>(device_bytes + gpu::kDeviceAlign * device_regions, cfg.staging_bytes);
  std::size_t allowed = wanted;
  if (budget && wanted > budget / 4 / cfg.max_inflight) {
    allowed = budget / 4 / cfg.max_inflight;
    warn_once("staging", "device staging limited to " + mib(allowed) + " per checkpoint (not " + mib(wanted) +
                             ") by the memory budget of " + mib(budget) +
                             ": more dirty data is packed and drained in rounds; raise REPRISE_MEMORY_BUDGET");
  }
  const std::size_t cap = std::max<std::size_t>(allowed, cfg.chunk_bytes + gpu::kDeviceAlign);
  job.staging = take_staging(cap);
  if (!job.staging) {
    job.staging = backend->alloc_device(cap);
    staging_held += cap;
  }
  std::size_t used = 0;
  unsigned rounds = 0;
  auto flush_round = [&] {
    // Staging is full and more is coming: this round must reach the payload before staging is reused.
    backend->synchronize(*scan_stream);
    wait_queue(0);  // the background thread owns the pinned buffers while it drains
    ensure_payload(job);
    const auto t_round = Clock::now();
    drain(job.staging, job.segments, *job.payload);
    job.metrics.drain.seconds += seconds_since(t_round);
    job.segments.clear();
    used = 0;
    ++rounds;
  };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto* dt = std::get_if<core::DeviceTracker>(&entries[i].tracker);
    if (!dt) continue;
    const core::RegionRecord& r = m.regions[i];
    const std::size_t chunk = r.chunk_bytes;
    std::size_t j = 0;
    while (j < dirty[i].size()) {
      const std::size_t fit = (cap - used) / chunk;
      if (fit == 0) {
        flush_round();
        continue;
      }
      const std::size_t n = std::min(fit, dirty[i].size() - j);
      std::size_t bytes = (n - 1) * chunk + r.chunk_length(dirty[i][j + n - 1]);
      dt->pack(static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(n), job.staging.as<std::byte>() + used,
               *scan_stream);
      job.segments.push_back({used, r.payload_offset + j * chunk, bytes});
      used = gpu::align_up(used + bytes, gpu::kDeviceAlign);
      j += n;
    }
  }
  backend->synchronize(*scan_stream);
  job.metrics.pack_rounds = rounds + 1;
}

// The snapshot is taken: this version is the reference for the next one. Versions newer than this run's last one
// belong to a timeline abandoned by a restore (or, before the first checkpoint of a restarted run that did not
// restore, to the previous run): the background thread releases them before storing this one.
void Runtime::Impl::seal(Job& job) {
  const std::uint64_t version = job.manifest.version;
  {
    std::lock_guard<std::mutex> lock(mutex);
    force_full = false;
    for (auto it = known.begin(); it != known.end();) {
      if (last_version ? it->first > *last_version : it->first >= version) {
        job.obsolete.push_back(it->first);
        it = known.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& e : entries) std::visit([](auto& t) { t.accept(); }, e.tracker);
  last_version = version;
  chain_index = job.manifest.chain_index;
  regions_changed = false;
}

// The version's metrics as far as the application's part goes, and the version to the background thread.
void Runtime::Impl::record(Job& job, Clock::time_point t0) {
  const core::Manifest& m = job.manifest;
  CheckpointMetrics& mt = job.metrics;
  mt.version = m.version;
  mt.full = m.kind == core::VersionKind::Full;
  mt.forced = std::exchange(next_forced, false);
  mt.bytes_protected = m.protected_bytes();
  mt.bytes_dirty = job.payload_bytes;
  for (const auto& r : m.regions) {
    mt.chunks_total += r.chunk_count();
    mt.chunks_dirty += r.chunks.size();
  }
  mt.drain.bytes = job.device_bytes ? job.payload_bytes : 0;
  mt.device_backend = backend ? backend->name() : "";
  mt.payload_pinned = job.payload ? job.payload->pinned() : false;
  mt.app_visible_seconds = seconds_since(t0);
  {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(std::move(job));
  }
  cv.notify_all();
  fit_coordination_budget();
}

void Runtime::wait() {
  impl_->wait_queue(0);
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    error = std::exchange(impl_->error, nullptr);
  }
  if (!impl_->cfg.metrics_file.empty()) std::ofstream(impl_->cfg.metrics_file) << metrics_json() << "\n";
  if (error) std::rethrow_exception(error);
  if (impl_->coord) impl_->coord->after_wait();
}

bool Runtime::restarted() const {
  return impl_->coord ? impl_->coord->restarted() : impl_->restarted;
}

std::uint64_t Runtime::restore(std::uint64_t version) {
  Impl& d = *impl_;
  d.follow_handles();  // restored into the buffers the variables refer to now
  d.wait_queue(0);
  d.run_fences();
  const core::RestoreChain chain = core::load_chain(*d.store, version, d.payload_check());
  for (auto& e : d.entries) {
    const core::RegionRecord* r = e.locate ? chain.target().find(e.region.name) : nullptr;
    // (a deferred region's memory may have moved on the background thread since the runtime last asked)
    if (r && (e.plan || r->bytes != e.region.bytes))
      d.relocate(e, e.locate(r->bytes));
    else if (e.plan)
      d.relocate(e, e.locate(std::nullopt));
  }
  std::vector<core::Region> regions;
  for (const auto& e : d.entries) regions.push_back(e.region);
  core::verify_chain(chain, regions);
  // Everything checked: from here on protected data are written.
  core::apply_chain(chain, regions, d.backend.get(), d.cfg.staging_bytes);
  const core::Manifest& target = chain.target();
  for (auto& e : d.entries) {
    const auto& digests = target.find(e.region.name)->digests;
    if (e.reference) *e.reference = digests;
    if (auto* h = std::get_if<core::HostTracker>(&e.tracker))
      h->adopt(digests);
    else
      std::get<core::DeviceTracker>(e.tracker).adopt(digests, *d.scan_stream);
  }
  d.last_version = version;
  d.chain_index = target.chain_index;
  d.regions_changed = target.regions.size() != d.entries.size();
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    d.force_full = false;
    d.chain_broken = false;
    d.error = nullptr;  // the run is rolled back to a stored version; earlier failures are behind it
  }
  if (d.coord) d.coord->after_restore(version);
  return version;
}

std::vector<std::string> Runtime::region_names() const {
  std::vector<std::string> names;
  for (const auto& e : impl_->entries) names.push_back(e.region.name);
  return names;
}

std::size_t Runtime::restore_own(const std::vector<std::string>& names) {
  Impl& d = *impl_;
  d.wait_queue(0);
  std::optional<std::uint64_t> version;
  if (d.coord) {
    version = d.coord->restore_target();
  } else if (const std::vector<std::uint64_t> all = d.store->list(); !all.empty()) {
    version = all.back();
  }
  if (!version) return 0;
  const core::RestoreChain chain = core::load_chain(*d.store, *version, d.payload_check());
  std::vector<Impl::Entry*> picked;
  for (auto& e : d.entries) {
    if (std::find(names.begin(), names.end(), e.region.name) == names.end()) continue;
    const core::RegionRecord* r = chain.target().find(e.region.name);
    if (!r || e.region.space != MemorySpace::Host) continue;
    if (e.locate && (e.plan || r->bytes != e.region.bytes)) d.relocate(e, e.locate(r->bytes));
    picked.push_back(&e);
  }
  std::vector<core::Region> regions;
  for (const Impl::Entry* e : picked) regions.push_back(e->region);
  core::verify_chain(chain, regions);
  core::apply_chain(chain, regions, d.backend.get(), d.cfg.staging_bytes);
  for (Impl::Entry* e : picked) e->tracker = core::HostTracker(e->region, d.cfg.chunk_bytes);  // stored whole next
  if (!picked.empty()) d.regions_changed = true;
  return picked.size();
}

std::uint64_t Runtime::restore() {
  impl_->wait_queue(0);
  if (impl_->coord) {
    // Distributed: every rank restores the version the ranks agreed on (never a newer local one).
    if (const auto target = impl_->coord->restore_target()) return restore(*target);
    throw RestoreError(
        "nothing to restore: no version is held by every rank (this run was not restarted and no "
        "failure was recovered)");
  }
  const std::vector<std::uint64_t> all = impl_->store->list();
  if (all.empty())
    throw RestoreError("nothing to restore: " + impl_->store->describe() + " holds no checkpoint" +
                       (impl_->cfg.dir.empty() ? " (set REPRISE_DIR to restart from files)" : ""));
  std::string reasons;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      return restore(*it);
    } catch (const CorruptCheckpointError& e) {
      say("reprise: warning: skipping version " + std::to_string(*it) + ": " + e.what());
      reasons += "\n  version " + std::to_string(*it) + ": " + e.what();
    } catch (const core::ChainBrokenError& e) {
      say("reprise: warning: skipping version " + std::to_string(*it) + ": " + e.what());
      reasons += "\n  version " + std::to_string(*it) + ": " + e.what();
    }
  }
  throw RestoreError("no restorable version in " + impl_->store->describe() + ":" + reasons +
                     "\nThe files were left as they are; `reprise verify` reports on each of them.");
}

std::optional<std::uint64_t> Runtime::latest_version() const {
  const auto v = impl_->store->list();
  if (v.empty()) return std::nullopt;
  return v.back();
}

std::vector<std::uint64_t> Runtime::versions() const {
  return impl_->store->list();
}

const Config& Runtime::config() const {
  return impl_->cfg;
}

std::vector<CheckpointMetrics> Runtime::metrics() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->done;
}

std::string Runtime::metrics_json() const {
  return to_json(metrics());
}

std::string Runtime::memory_json() const {
  std::map<std::string, std::size_t> parts;
  const std::size_t total = impl_->sample(&parts, true);
  std::map<std::string, std::size_t> at_peak;
  {
    std::lock_guard<std::mutex> lock(impl_->peak_mutex);
    at_peak = impl_->peak_parts;
  }
  auto object = [](const std::map<std::string, std::size_t>& m) {
    std::string o = "{";
    const char* sep = "";
    for (const auto& [k, v] : m) {
      o += std::string(sep) + "\"" + k + "\": " + std::to_string(v);
      sep = ", ";
    }
    return o + "}";
  };
  impl_->say_peak_over();
  return "{\"budget_bytes\": " + std::to_string(impl_->budget) + ", \"total_bytes\": " + std::to_string(total) +
         ", \"peak_bytes\": " + std::to_string(impl_->peak.load()) +
         ", \"reuse_freed_bytes\": " + std::to_string(impl_->shed_bytes.load()) +
         ", \"budget_told_bytes\": " + std::to_string(impl_->told.load()) + ", \"components\": " + object(parts) +
         ", \"peak_components\": " + object(at_peak) + "}";
}

}  // namespace reprise
