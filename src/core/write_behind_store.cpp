// The persistent level off the commit path (REPRISE_DIR with a buddy): a version is put in host memory, which is
// what the commit needs, and a background thread writes it to its file (DirectoryStore: temporary file, fsync,
// rename), in the order the versions came. `written_through()` says how far the files are; the job floor follows
// it (GroupCommit), so files are released only below a version every rank has in its files.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "core/thread_name.hpp"
#include "core/version_store.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {
namespace {

class WriteBehindStore final : public VersionStore {
 public:
  WriteBehindStore(std::unique_ptr<VersionStore> files, std::size_t max_pending, std::optional<std::uint64_t> hold_from)
      : memory_(make_memory_store()), files_(std::move(files)), max_pending_(max_pending), hold_from_(hold_from) {
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
    queue_.push_back({manifest, std::move(payload), sum});
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

  std::optional<std::int64_t> written_through() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    return written_;
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
    bool remove = false;  // the file of manifest.version goes (release)
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
      Pending p = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      if (!p.remove) writing_ = p.manifest.version;
      release_after_write_ = false;
      lock.unlock();
      std::string error;
      try {
        if (p.remove)
          files_->release(p.manifest.version);
        else
          files_->put(p.manifest, p.payload, p.sum);
      } catch (const std::exception& e) {
        error = e.what();
      }
      p.payload.reset();  // (the buffer may go back to its pool)
      lock.lock();
      if (!error.empty() && error_.empty()) error_ = error;
      if (error.empty() && !p.remove && !release_after_write_) written_ = static_cast<std::int64_t>(p.manifest.version);
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
  const std::optional<std::uint64_t> hold_from_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Pending> queue_;
  std::optional<std::uint64_t> writing_;
  std::int64_t written_ = -1;  // the newest version written (all those put before it are written or released)
  bool release_after_write_ = false;
  bool busy_ = false;  // the writer is on a task it took from the queue
  bool stop_ = false;
  std::string error_;
  std::thread writer_;
};

}  // namespace

std::unique_ptr<VersionStore> make_write_behind_store(std::unique_ptr<VersionStore> files, std::size_t max_pending,
                                                      std::optional<std::uint64_t> hold_from) {
  return std::make_unique<WriteBehindStore>(std::move(files), max_pending, hold_from);
}

}  // namespace reprise::core
