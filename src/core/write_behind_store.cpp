// The persistent level off the commit path (REPRISE_DIR with a buddy): a version is put in host memory, which is
// what the commit needs, and a background thread writes it to its file (DirectoryStore: temporary file, fsync,
// rename), in the order the versions came. `files_progress()` says how far the files are; the job floor follows
// it (GroupCommit), so files are released only below a version every rank has in its files.
// A writer that lags (a disk slower than the checkpoints) skips: the versions waiting in front of a newer full
// version are never written, that full version takes their place in the files, except the pin (the first version
// at or after the job's mark, set_pin_mark), which every rank writes, so that the job floor can rise to it. Chains
// stay whole (a skipped run ends right before a full version: nothing written needs it), and the skipped versions
// are reported (files_progress) so that the floor never settles on a version some rank skipped. Before the first
// mark nothing is skipped, and put() waits for the disk beyond max_pending.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include "core/format.hpp"
#include "core/thread_name.hpp"
#include "core/version_store.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {
namespace {

class WriteBehindStore final : public VersionStore {
 public:
  WriteBehindStore(std::unique_ptr<VersionStore> files, std::size_t max_pending, std::optional<std::uint64_t> hold_from,
                   std::optional<std::uint64_t> slow_from)
      : memory_(make_memory_store()),
        files_(std::move(files)),
        max_pending_(max_pending),
        hold_from_(hold_from),
        slow_from_(slow_from) {
    writer_ = named_thread("reprise-files", [this] { write_loop(); });
  }
  ~WriteBehindStore() override {
    try {
      flush();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reprise: %s\n", e.what());
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    writer_.join();
  }
  WriteBehindStore(const WriteBehindStore&) = delete;
  WriteBehindStore& operator=(const WriteBehindStore&) = delete;

  std::string describe() const override { return "host memory + " + files_->describe() + " (written behind)"; }
  std::string locate(std::uint64_t version) const override { return files_->locate(version); }

  // In memory at once; to the files in the background. More than max_pending versions not written yet: waits
  // for the writer (the disk is slower than the checkpoints: memory would grow without end).
  void put(const Manifest& manifest, std::shared_ptr<const HostBytes> payload, std::uint64_t sum) override {
    memory_->put(manifest, payload, sum);
    std::unique_lock<std::mutex> lock(mutex_);
    throw_if_failed();
    skipped_.erase(manifest.version);  // (a number put again: written or skipped anew)
    queue_.push_back({manifest, std::move(payload), sum, false, {}});
    skip_lagging();
    wake_.notify_all();
    done_.wait(lock, [&] { return pending_writes() <= max_pending_ || !error_.empty(); });
    throw_if_failed();
  }

  std::size_t memory_bytes() const override { return memory_->memory_bytes(); }

  std::vector<std::uint64_t> list() const override {
    std::set<std::uint64_t> all;
    for (std::uint64_t v : memory_->list()) all.insert(v);
    for (std::uint64_t v : files_->list()) all.insert(v);
    return {all.begin(), all.end()};
  }
  Manifest load_manifest(std::uint64_t version) const override {
    return in_memory(version) ? memory_->load_manifest(version) : files_->load_manifest(version);
  }
  StoredVersion load(std::uint64_t version, PayloadCheck check) const override {
    return in_memory(version) ? memory_->load(version, check) : files_->load(version, check);
  }

  // At once in memory; the file in the background, after what is queued before it (removing a file of 64 MiB
  // freshly written takes 15 to 25 ms here: not on the thread that commits).
  void release(std::uint64_t version) override {
    memory_->release(version);
    const std::lock_guard<std::mutex> lock(mutex_);
    skipped_.erase(version);
    if (pin_ == version) pin_.reset();  // (a rollback's, or below the floor: the next mark names another)
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if (!it->remove && it->manifest.version == version) {
        queue_.erase(it);  // never written (an older file of that number, if any, goes below)
        done_.notify_all();
        break;
      }
    if (writing_ == version) {
      release_after_write_ = true;  // the writer removes the file once it is complete
      return;
    }
    // The newest version written goes only with an abandoned timeline (a rollback drops the versions after the
    // one it restored; the floor keeps older ones): nothing counts as written until the next version is.
    if (written_ == static_cast<std::int64_t>(version)) written_ = -1;
    Pending r;
    r.manifest.version = version;
    r.remove = true;
    queue_.push_back(std::move(r));
    wake_.notify_all();
  }

  std::optional<FilesProgress> files_progress() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    FilesProgress p;
    p.written = written_;
    if (!skipped_.empty()) {
      p.skipped_oldest = *skipped_.begin();
      p.skipped_newest = *skipped_.rbegin();
    }
    p.skipped_total = skipped_total_;
    p.pin = pin_;
    return p;
  }

  void pause_skips(bool paused) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (paused == paused_) return;
    paused_ = paused;
    if (!paused && skip_lagging()) done_.notify_all();
  }

  void set_pin_mark(std::uint64_t mark) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (mark_ && mark <= *mark_) return;
    mark_ = mark;
    pin_.reset();                            // the first version at or after the new mark is the pin now
    if (skip_lagging()) done_.notify_all();  // (a put() may wait for room)
  }

  void flush() override {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return ((queue_.empty() || held_front()) && !busy_) || !error_.empty(); });
    throw_if_failed();
  }

 private:
  struct Pending {
    Manifest manifest;
    std::shared_ptr<const HostBytes> payload;
    std::uint64_t sum = 0;
    bool remove = false;                // the file of manifest.version goes (release)
    std::vector<StoredVersion> before;  // skipped versions of its chain right before it, merged into its file
  };
  std::size_t pending_writes() const {  // caller holds mutex_
    std::size_t n = 0;
    for (const Pending& p : queue_) n += p.remove ? 0 : 1;
    return n;
  }

  // The next task is a write that hold_from_ keeps back (caller holds mutex_).
  bool held_front() const {
    return hold_from_ && !queue_.empty() && !queue_.front().remove && queue_.front().manifest.version >= *hold_from_;
  }

  // The writer lags: the writes waiting in front of the last queued full version that every one of them precedes
  // (in number and in the queue) are dropped, except the pin still to write (the first version at or after the
  // mark while no pin is written or being written) and the rest of its chain, and nothing from a held version on
  // (stall_files). Nothing kept depends on what is dropped: a chain starts at a full version. True when something
  // was dropped (caller holds mutex_).
  bool skip_lagging() {
    if (!mark_ || paused_) return false;
    bool pin_due = !pin_ && !(writing_ && *writing_ >= *mark_);
    std::size_t last = queue_.size();            // the full version the skipped ones leave their place to
    std::size_t pin = queue_.size(), chain = 0;  // the pin's place and its chain's: [chain, pin] stays
    std::size_t full = 0;                        // the last full version's place (0: the queue's chain began before)
    std::uint64_t newest = 0;                    // the newest write in front of the current one
    bool any = false;
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      const Pending& p = queue_[i];
      if (p.remove) continue;
      const std::uint64_t v = p.manifest.version;
      if (hold_from_ && v >= *hold_from_) break;
      if (any && p.manifest.kind == VersionKind::Full && v > newest) last = i;
      if (p.manifest.kind == VersionKind::Full) full = i;
      if (pin_due && v >= *mark_) {
        pin_due = false;
        pin = i;
        chain = full;
      }
      newest = std::max(newest, v);
      any = true;
    }
    std::vector<bool> drop(queue_.size(), false);
    std::size_t dropped = 0;
    for (std::size_t i = 0; i < last && last < queue_.size(); ++i) {
      const bool pin_chain = pin < queue_.size() && i >= chain && i <= pin;
      if (!pin_chain && !queue_[i].remove) drop[i] = true;
    }
    // Then versions of one chain that wait one behind the other: each goes into the file of the one built on it
    // (merge_chain_run at the write), never the pin (it must be a file of its own) nor from a held one on.
    std::size_t prev = queue_.size();  // the previous write kept
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      Pending& p = queue_[i];
      if (p.remove || drop[i]) continue;
      if (hold_from_ && p.manifest.version >= *hold_from_) break;
      if (prev < queue_.size() && prev != pin) {
        Pending& q = queue_[prev];
        const Manifest& head = p.before.empty() ? p.manifest : p.before.front().manifest;
        if (head.kind == VersionKind::Differential && head.base_version == q.manifest.version) {
          std::vector<StoredVersion> run = std::move(q.before);
          run.push_back({q.manifest, std::move(q.payload), {}});
          for (StoredVersion& b : p.before) run.push_back(std::move(b));
          p.before = std::move(run);
          drop[prev] = true;
        }
      }
      prev = i;
    }
    std::deque<Pending> kept;
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      if (drop[i]) {
        skipped_.insert(queue_[i].manifest.version);
        ++dropped;
        continue;
      }
      kept.push_back(std::move(queue_[i]));
    }
    queue_ = std::move(kept);
    skipped_total_ += dropped;
    return dropped > 0;
  }

  // A version's file (writer thread). The files' chains lack what was skipped: a version merged with the skipped
  // ones before it is built on the last one written, and every later position in its chain moves down as many.
  void write(Pending& p) {
    if (p.before.empty() && (p.manifest.kind == VersionKind::Full || file_shift_ == 0)) {
      if (p.manifest.kind == VersionKind::Full) file_shift_ = 0;
      files_->put(p.manifest, p.payload, p.sum);
      return;
    }
    StoredVersion v;
    std::uint32_t merged = 0;
    if (p.before.empty()) {
      v = {p.manifest, p.payload, {}};
    } else {
      merged = static_cast<std::uint32_t>(p.before.size());
      std::vector<StoredVersion> run = std::move(p.before);
      run.push_back({p.manifest, p.payload, {}});
      v = merge_chain_run(run);
    }
    if (v.manifest.kind == VersionKind::Full) {
      file_shift_ = 0;
    } else {
      v.manifest.chain_index -= std::min(file_shift_, v.manifest.chain_index - 1);
    }
    file_shift_ += merged;
    files_->put(v.manifest, v.payload, payload_checksum(v.manifest));
  }

  bool in_memory(std::uint64_t version) const {
    const auto held = memory_->list();
    return std::binary_search(held.begin(), held.end(), version);
  }
  void throw_if_failed() const {  // caller holds mutex_
    if (!error_.empty())
      throw StoreError("the persistent level (REPRISE_DIR) failed: " + error_ +
                       "; the versions in host memory and at the buddy are intact. Free space or point REPRISE_DIR "
                       "elsewhere, and relaunch from the newest version in files");
  }

  void write_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || (!queue_.empty() && !held_front()); });
      if (queue_.empty() || held_front()) return;  // (stop_)
      if (skip_lagging()) done_.notify_all();
      Pending p = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      if (!p.remove) writing_ = p.manifest.version;
      release_after_write_ = false;
      lock.unlock();
      std::string error;
      try {
        if (p.remove) {
          files_->release(p.manifest.version);
        } else {
          if (slow_from_ && p.manifest.version >= *slow_from_) std::this_thread::sleep_for(kSlowWrite);
          write(p);
        }
      } catch (const std::exception& e) {
        error = e.what();
      }
      p.payload.reset();  // (the buffer may go back to its pool)
      lock.lock();
      if (!error.empty() && error_.empty()) error_ = error;
      if (error.empty() && !p.remove && !release_after_write_) {
        written_ = static_cast<std::int64_t>(p.manifest.version);
        if (mark_ && !pin_ && p.manifest.version >= *mark_) pin_ = p.manifest.version;
      }
      if (error.empty() && release_after_write_) {
        lock.unlock();
        files_->release(p.manifest.version);
        lock.lock();
      }
      writing_.reset();
      busy_ = false;
      done_.notify_all();
      if (!error_.empty()) {  // nothing more is written: put() and flush() report it
        queue_.clear();
        done_.notify_all();
      }
    }
  }

  std::unique_ptr<VersionStore> memory_, files_;
  const std::size_t max_pending_;
  const std::optional<std::uint64_t> hold_from_, slow_from_;
  static constexpr std::chrono::milliseconds kSlowWrite{200};  // slow_from_'s extra time per version
  mutable std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Pending> queue_;
  std::optional<std::uint64_t> writing_;
  std::int64_t written_ = -1;  // the newest version written (all those put before it are written, skipped or released)
  std::optional<std::uint64_t> mark_;  // the job's mark (none yet: nothing is skipped)
  bool paused_ = false;                // pause_skips (over the memory budget: nothing is skipped)
  std::optional<std::uint64_t> pin_;   // the first version at or after mark_ written
  std::set<std::uint64_t> skipped_;    // versions skipped and not released since (above the job floor, in memory)
  std::uint64_t skipped_total_ = 0;
  std::uint32_t file_shift_ = 0;  // positions the current chain's files lack (writer thread)
  bool release_after_write_ = false;
  bool busy_ = false;  // the writer is on a task it took from the queue
  bool stop_ = false;
  std::string error_;
  std::thread writer_;
};

}  // namespace

std::unique_ptr<VersionStore> make_write_behind_store(std::unique_ptr<VersionStore> files, std::size_t max_pending,
                                                      std::optional<std::uint64_t> hold_from,
                                                      std::optional<std::uint64_t> slow_from) {
  return std::make_unique<WriteBehindStore>(std::move(files), max_pending, hold_from, slow_from);
}

}  // namespace reprise::core

namespace reprise::core {

StoredVersion merge_chain_run(const std::vector<StoredVersion>& run) {
  if (run.empty()) throw std::invalid_argument("merge_chain_run: no version");
  for (std::size_t k = 1; k < run.size(); ++k)
    if (run[k].manifest.kind != VersionKind::Differential ||
        run[k].manifest.base_version != run[k - 1].manifest.version)
      throw std::invalid_argument("merge_chain_run: version " + std::to_string(run[k].manifest.version) +
                                  " is not built on version " + std::to_string(run[k - 1].manifest.version));
  const Manifest& first = run.front().manifest;
  StoredVersion out;
  out.manifest = run.back().manifest;
  out.manifest.kind = first.kind;
  out.manifest.base_version = first.kind == VersionKind::Full ? out.manifest.version : first.base_version;
  out.manifest.chain_index = first.chain_index;
  // Per region: for every chunk, the newest version of the run that stored it and where its bytes are there.
  struct Source {
    std::size_t version = SIZE_MAX;
    std::uint64_t offset = 0;
  };
  std::vector<std::vector<Source>> sources;
  for (RegionRecord& r : out.manifest.regions) {
    std::vector<Source> from(r.chunk_count());
    for (std::size_t k = 0; k < run.size(); ++k) {
      const RegionRecord* in = run[k].manifest.find(r.name);
      if (!in) continue;
      if (in->chunk_count() != r.chunk_count() || in->chunk_bytes != r.chunk_bytes)
        throw std::invalid_argument("merge_chain_run: region '" + r.name + "' changes within the run");
      std::uint64_t at = in->payload_offset;
      for (std::uint32_t c : in->chunks) {
        from[c] = {k, at};
        at += in->chunk_length(c);
      }
    }
    r.chunks.clear();
    for (std::uint32_t c = 0; c < from.size(); ++c)
      if (from[c].version != SIZE_MAX) r.chunks.push_back(c);
    sources.push_back(std::move(from));
  }
  auto payload = std::make_shared<HostBytes>(out.manifest.layout_payload());
  for (std::size_t i = 0; i < out.manifest.regions.size(); ++i) {
    const RegionRecord& r = out.manifest.regions[i];
    std::uint64_t at = r.payload_offset;
    for (std::uint32_t c : r.chunks) {
      const Source& s = sources[i][c];
      std::memcpy(payload->data() + at, run[s.version].payload->data() + s.offset, r.chunk_length(c));
      at += r.chunk_length(c);
    }
  }
  out.payload = std::move(payload);
  return out;
}

}  // namespace reprise::core
