// Where versions live. Every store keeps the same encoding (core/format.hpp) and checks it when reading back.
// Implementations: MemoryStore (this process's host memory), DirectoryStore (one file per rank per version);
// the buddy store of the distributed runtime implements this interface too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/bytes.hpp"
#include "core/manifest.hpp"

namespace reprise::core {

/// A version as read back from a store: checked manifest and payload.
struct StoredVersion {
  Manifest manifest;
  std::shared_ptr<const HostBytes> payload;
  std::string where;  ///< file path or store entry, for messages
};

/// What VersionStore::load checks of a payload (its header and manifest are checked always).
enum class PayloadCheck {
  Chunks,  ///< every stored chunk against its digest in the manifest
  None,    ///< no pass over the payload (Config::verify_restore = false)
};

/// A version being stored while its payload is still being filled (VersionStore::begin_put): a store that
/// moves versions elsewhere (the buddy level) sends each part as soon as it holds its final bytes.
class PutStream {
 public:
  virtual ~PutStream() = default;
  /// Bytes [offset, offset + bytes) of the payload hold their final content (any order, no overlaps).
  virtual void ready(std::size_t offset, std::size_t bytes) = 0;
  /// Every byte is ready: stores the version, durable as far as this store goes when it returns (as put()).
  virtual void finish(std::uint64_t payload_checksum) = 0;
  /// Payload bytes handed on so far (e.g. to the transfer to the buddy), before finish().
  virtual std::size_t handed_on() const { return 0; }
  /// Whether ready() does anything: only then does the drain report its parts one by one.
  virtual bool streams() const { return false; }
  /// `f` runs once, inside finish(), right before the version starts to count in the store's memory_bytes() (also
  /// when storing it then fails): a caller that counts the payload as its own until then (the runtime's
  /// versions_in_flight) stops there, so that no sample of both counts it twice.
  void on_stored(std::function<void()> f) { on_stored_ = std::move(f); }

 protected:
  /// For finish(): call right before the version goes where memory_bytes() counts it.
  void stored() {
    if (auto f = std::exchange(on_stored_, nullptr)) f();
  }

 private:
  std::function<void()> on_stored_;
};

/// Which fixed-size pieces of a payload can go, in order: a piece goes once every byte of it and of every piece
/// before it is ready (messages of one channel are matched in order, so pieces are sent in order).
class PieceFrontier {
 public:
  PieceFrontier(std::size_t payload_bytes, std::size_t piece);
  /// Marks [offset, offset + bytes) ready; returns how many pieces (from the first) can go now, in all.
  std::size_t add(std::size_t offset, std::size_t bytes);
  std::size_t pieces() const { return missing_.size(); }
  std::size_t piece_bytes(std::size_t piece) const;
  std::size_t piece_offset(std::size_t piece) const { return piece * piece_; }

 private:
  std::size_t payload_, piece_;
  std::vector<std::size_t> missing_;  // per piece: bytes not ready yet
  std::size_t ready_pieces_ = 0;
};

/// How far a level written in the background is (VersionStore::files_progress).
struct FilesProgress {
  /// The newest version written; every version put before it is written, skipped or released (-1: none yet).
  std::int64_t written = -1;
  /// The oldest and newest of the versions skipped (never to be written: set_pin_mark) and not released since; none:
  /// UINT64_MAX and 0. A version between `written`s of two ranks is in both ranks' files unless one skipped it.
  std::uint64_t skipped_oldest = UINT64_MAX, skipped_newest = 0;
  std::uint64_t skipped_total = 0;   ///< versions skipped since the store was made
  std::optional<std::uint64_t> pin;  ///< the pin written (set_pin_mark), while it is not released
};

class VersionStore {
 public:
  virtual ~VersionStore() = default;
  /// "host memory" or "directory /path/rank-0".
  virtual std::string describe() const = 0;
  /// Where one version lives (a file path, or the store and version), for messages.
  virtual std::string locate(std::uint64_t version) const = 0;
  /// Stores a version; it is durable (as far as this store goes) when put() returns. Replaces an existing
  /// version with the same number.
  virtual void put(const Manifest& manifest, std::shared_ptr<const HostBytes> payload,
                   std::uint64_t payload_checksum) = 0;
  /// Versions present, ascending (their content is not checked).
  virtual std::vector<std::uint64_t> list() const = 0;
  /// Header and manifest of a version, checked (no payload read). Throws CorruptCheckpointError.
  virtual Manifest load_manifest(std::uint64_t version) const = 0;
  /// A whole version, its header and manifest checked and, with PayloadCheck::Chunks, every stored chunk against
  /// its digest. Throws CorruptCheckpointError, or RestoreError when absent.
  virtual StoredVersion load(std::uint64_t version, PayloadCheck check) const = 0;
  /// load(version, PayloadCheck::Chunks).
  StoredVersion load(std::uint64_t version) const { return load(version, PayloadCheck::Chunks); }
  /// Removes a version (no-op when absent).
  virtual void release(std::uint64_t version) = 0;
  /// Starts storing a version whose payload is still being filled; `payload` stays alive and unchanged once
  /// ready. The default waits for finish() and calls put().
  virtual std::unique_ptr<PutStream> begin_put(const Manifest& manifest, std::shared_ptr<const HostBytes> payload);
  /// A store with a level written in the background (make_write_behind_store): how far that level is. Others:
  /// nullopt (a put is complete when it returns).
  virtual std::optional<FilesProgress> files_progress() const { return std::nullopt; }
  /// files_progress()'s `written`.
  std::optional<std::int64_t> written_through() const {
    const auto p = files_progress();
    return p ? std::optional<std::int64_t>(p->written) : std::nullopt;
  }
  /// The job's mark (rank 0's, with the job floor): from now on a background level may leave unwritten the
  /// versions that wait for its writer in front of a newer full version (the writer lags: the newer one takes their
  /// place in the files), except the pin, the first version at or after `mark`, which every rank writes. Only ever
  /// raised; before the first mark every version is written.
  virtual void set_pin_mark(std::uint64_t /*mark*/) {}
  /// While paused (the rank holds more than its memory budget) a background level skips nothing: put() waits for the
  /// disk beyond its pending limit again, so the checkpoints slow down to the disk instead of memory growing while
  /// the job floor lags behind the files.
  virtual void pause_skips(bool /*paused*/) {}
  /// Waits until the background level holds every version put (no-op elsewhere). Throws StoreError when it failed.
  virtual void flush() {}
  /// Host memory this store holds for its versions (payloads and heads; 0 for files).
  virtual std::size_t memory_bytes() const { return 0; }
};

std::unique_ptr<VersionStore> make_memory_store();
/// `dir`/rank-<rank>/version-<v>.reprise. Creates the directories. Throws StoreError when it cannot.
std::unique_ptr<VersionStore> make_directory_store(const std::string& dir, int rank);
/// Host memory, and `files` (make_directory_store) written by a background thread in the order the versions came:
/// put() returns once the version is in memory, and waits only when more than `max_pending` versions are not
/// written yet. list() and load() see both (after a relaunch, the files). A failed write is reported by the next
/// put() or flush() (StoreError). The destructor writes what is pending. Once the job gave a mark (set_pin_mark),
/// a writer that lags skips versions (files_progress says which). Failure injection: `hold_from` (a disk that
/// stopped responding) keeps every version from that one on unwritten, and what is queued behind it (flush() and
/// the destructor then wait for nothing held); `slow_from` (a slow disk) makes each write of a version from that one
/// on take 0.2 s longer.
std::unique_ptr<VersionStore> make_write_behind_store(std::unique_ptr<VersionStore> files, std::size_t max_pending = 2,
                                                      std::optional<std::uint64_t> hold_from = std::nullopt,
                                                      std::optional<std::uint64_t> slow_from = std::nullopt);
/// Consecutive versions of one chain (oldest first, each built on the one before) as one version with the newest's
/// number, regions and digests: every chunk any of them stored, its bytes from the newest that stored it, built on
/// the oldest's base (a full version when the oldest is). What a file writer that skips the others writes (the
/// payload is new; `where` is empty). Throws std::invalid_argument for versions that are not such a run.
StoredVersion merge_chain_run(const std::vector<StoredVersion>& run);
/// Ranks that have a rank-<r> folder in a directory store root, ascending (empty when none or no such dir).
std::vector<int> list_store_ranks(const std::string& dir);
/// The job that writes a directory store: DIR/job.reprise records its rank count (a relaunch with another count
/// would restore each rank's data into another decomposition). Absent: nullopt. A damaged record:
/// CorruptCheckpointError naming the file.
std::optional<int> read_job_ranks(const std::string& dir);
/// Writes DIR/job.reprise (complete or not at all: temporary file, fsync, rename). Throws StoreError.
void write_job_ranks(const std::string& dir, int ranks);
/// The first k for which DIR/previous-<k>/rank-<rank> does not exist (k >= 1): where set_aside() may put it.
int next_set_aside(const std::string& dir, int rank);
/// Moves DIR/rank-<rank> (every version of that rank) to DIR/previous-<k>/rank-<rank> and leaves an empty
/// DIR/rank-<rank>; returns the new folder. Nothing is deleted. Throws StoreError.
std::string set_aside(const std::string& dir, int rank, int k);
/// Moves the versions of DIR/rank-<rank> newer than `version` to DIR/previous-<k>/rank-<rank> (a relaunch that
/// restarts from `version` recomputes them: kept, they could be taken for versions of the new run). Returns them,
/// ascending. Nothing is deleted; an existing file there is never replaced (StoreError).
std::vector<std::uint64_t> set_aside_newer(const std::string& dir, int rank, int k, std::uint64_t version);
/// DIR/rank-<rank>: the folder of one rank's versions in a directory store.
std::string rank_folder(const std::string& dir, int rank);
/// Path of a version file in a directory store.
std::string version_file_path(const std::string& dir, int rank, std::uint64_t version);

}  // namespace reprise::core
