// The owner side of the buddy level: a VersionStore that keeps every version in a local store (host memory, or
// files with a persistent level) and ships it to the buddy rank through a Shipper (MPI in production, an
// in-process one in tests). A release the runtime asks for waits until the version is older than the chain of the
// group's last committed version (and, when a job floor is held, older than the chain of the job floor), so a
// rollback always finds the committed chain both here and at the buddy; versions newer than the commit are kept too
// (one of them may be the next commit).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/version_store.hpp"

namespace reprise::protocol {

/// A version on its way to the buddy while its payload is still being filled (Shipper::stream): ready() sends
/// what can go, finish() sends the rest and waits for the buddy.
class ShipStream : public core::PutStream {
 public:
  /// After finish(): the buddy acknowledged the version (false when the link is down).
  virtual bool acknowledged() const = 0;
};

/// Moves versions to the buddy. Called from the runtime's background thread.
class Shipper {
 public:
  virtual ~Shipper() = default;
  /// Sends a stored version; true once the buddy acknowledged it, false when the link is down (a failure is
  /// pending and recovery will sort out what the buddy holds).
  virtual bool ship(const core::Manifest& manifest, const core::HostBytes& payload, std::uint64_t checksum) = 0;
  /// Starts sending a version whose payload is still being filled (the drain streams it: each part goes as soon
  /// as it is in host memory). The default sends it whole with ship() at finish().
  virtual std::unique_ptr<ShipStream> stream(const core::Manifest& manifest,
                                             std::shared_ptr<const core::HostBytes> payload);
  /// Tells the buddy to drop a version.
  virtual void release(std::uint64_t version) = 0;
  /// Where the copy goes, for BuddyStore::describe ("": nowhere but the local store).
  virtual std::string where() const { return "buddy host memory"; }
};

/// No buddy: a job whose ranks all share one node, with a persistent level. The local store's files are the only
/// copy, so a version counts as acknowledged once they are written and fsync'ed (BuddyStore's put writes them
/// before it ships): the group then commits versions that are in files.
class FilesOnly final : public Shipper {
 public:
  bool ship(const core::Manifest&, const core::HostBytes&, std::uint64_t) override { return true; }
  void release(std::uint64_t) override {}
  std::string where() const override { return ""; }
};

/// One version as the protocol sees it: enough to know whether a chain is complete.
struct VersionRecord {
  std::uint64_t version = 0;
  std::uint64_t base = 0;  ///< previous version of its chain (itself for a full version)
  bool full = false;
  bool operator==(const VersionRecord& o) const { return version == o.version && base == o.base && full == o.full; }
};

/// Records of every version in `store` (from the manifests; unreadable ones are left out).
std::vector<VersionRecord> records_of(const core::VersionStore& store);
/// The versions of `records` whose whole chain (back to a full version) is present, ascending.
std::vector<std::uint64_t> complete_versions(const std::vector<VersionRecord>& records);
/// The versions of the chain that ends at `version` (full first). Throws RestoreError when a link is missing.
std::vector<std::uint64_t> chain_of(const std::vector<VersionRecord>& records, std::uint64_t version);

class BuddyStore : public core::VersionStore {
 public:
  BuddyStore(std::unique_ptr<core::VersionStore> local, std::shared_ptr<Shipper> shipper);

  std::string describe() const override;
  std::string locate(std::uint64_t version) const override;
  void put(const core::Manifest& manifest, std::shared_ptr<const core::HostBytes> payload,
           std::uint64_t payload_checksum) override;
  /// Streams the version to the buddy as its parts become ready; stores it locally at finish().
  std::unique_ptr<core::PutStream> begin_put(const core::Manifest& manifest,
                                             std::shared_ptr<const core::HostBytes> payload) override;
  std::vector<std::uint64_t> list() const override;
  core::Manifest load_manifest(std::uint64_t version) const override;
  core::StoredVersion load(std::uint64_t version, core::PayloadCheck check) const override;
  using VersionStore::load;
  void release(std::uint64_t version) override;
  std::optional<core::FilesProgress> files_progress() const override { return local_->files_progress(); }
  void set_pin_mark(std::uint64_t mark) override { local_->set_pin_mark(mark); }
  void pause_skips(bool paused) override { local_->pause_skips(paused); }
  void flush() override { local_->flush(); }
  std::size_t memory_bytes() const override { return local_->memory_bytes(); }

  /// Newest version whose whole chain the buddy acknowledged (what this rank brings to a group commit).
  std::optional<std::uint64_t> newest_acked_chain() const;
  /// `version` is committed by the group: deferred releases older than its chain happen now.
  void set_committed(std::uint64_t version);
  std::optional<std::uint64_t> committed() const;
  /// After a recovery: the buddy holds exactly the chain of `version` (re-shipped or kept); newer versions are
  /// gone everywhere (the local ones are released here: they belong to the abandoned timeline).
  void reset_after_recovery(std::uint64_t version);
  /// Versions at or after the job floor's chain stay here (`local`) and at the buddy (`buddy`) until a floor
  /// arrives that is newer (set_job_floor). Until the first floor nothing of the job floor's side is released.
  void hold_for_job(bool local, bool buddy);
  /// The job floor: every group of the job committed `version` or newer. The chain of this rank's newest version
  /// at or before it, and everything after, is kept where hold_for_job says; older versions may go.
  void set_job_floor(std::uint64_t version);
  /// After a group rollback at a survivor: the buddy holds every local version (they were re-shipped where
  /// missing); the committed version stays.
  void resync_after_recovery();
  /// After a recovery that starts the run over: no version is acknowledged or committed, every local one is
  /// dropped (the buddy drops its copies itself).
  void drop_everything();
  core::VersionStore& local() { return *local_; }

 private:
  class Put;
  struct Releases {
    std::vector<std::uint64_t> local, buddy;
  };
  bool may_release(std::uint64_t version, std::uint64_t floor_base) const;  // caller holds mutex_
  Releases take_releasable();  // requested releases that may happen now; caller holds mutex_
  void release_now(const Releases& r);

  std::unique_ptr<core::VersionStore> local_;
  std::shared_ptr<Shipper> shipper_;
  mutable std::mutex mutex_;
  std::vector<VersionRecord> acked_;
  std::optional<std::uint64_t> committed_;
  std::uint64_t committed_base_ = 0;
  // Releases the runtime asked for that have not happened yet, here and at the buddy.
  std::set<std::uint64_t> deferred_local_, deferred_buddy_;
  // Base of the chain of the job floor (UINT64_MAX: no floor held on that side; 0: none known yet).
  std::uint64_t local_floor_base_ = UINT64_MAX, buddy_floor_base_ = UINT64_MAX;
  std::optional<std::uint64_t> job_floor_;
};

}  // namespace reprise::protocol
