#include "protocol/buddy_store.hpp"

#include <algorithm>
#include <iterator>
#include <map>

#include "reprise/errors.hpp"

namespace reprise::protocol {

std::vector<VersionRecord> records_of(const core::VersionStore& store) {
  std::vector<VersionRecord> out;
  for (std::uint64_t v : store.list()) {
    try {
      const core::Manifest m = store.load_manifest(v);
      out.push_back({v, m.base_version, m.kind == core::VersionKind::Full});
    } catch (const Error&) {
      // A damaged version is not restorable; leaving it out makes every chain through it incomplete.
    }
  }
  return out;
}

namespace {
std::map<std::uint64_t, VersionRecord> by_version(const std::vector<VersionRecord>& records) {
  std::map<std::uint64_t, VersionRecord> m;
  for (const auto& r : records) m[r.version] = r;
  return m;
}
bool walk(const std::map<std::uint64_t, VersionRecord>& m, std::uint64_t v, std::vector<std::uint64_t>* chain) {
  for (;;) {
    const auto it = m.find(v);
    if (it == m.end()) return false;
    if (chain) chain->push_back(v);
    if (it->second.full) return true;
    if (it->second.base >= v) return false;  // malformed: chains go back in time
    v = it->second.base;
  }
}
}  // namespace

std::vector<std::uint64_t> complete_versions(const std::vector<VersionRecord>& records) {
  const auto m = by_version(records);
  std::vector<std::uint64_t> out;
  for (const auto& [v, r] : m)
    if (walk(m, v, nullptr)) out.push_back(v);
  return out;
}

std::vector<std::uint64_t> chain_of(const std::vector<VersionRecord>& records, std::uint64_t version) {
  std::vector<std::uint64_t> chain;
  if (!walk(by_version(records), version, &chain))
    throw RestoreError("the chain of version " + std::to_string(version) + " is incomplete");
  std::reverse(chain.begin(), chain.end());
  return chain;
}

BuddyStore::BuddyStore(std::unique_ptr<core::VersionStore> local, std::shared_ptr<Shipper> shipper)
    : local_(std::move(local)), shipper_(std::move(shipper)) {}

std::string BuddyStore::describe() const {
  const std::string where = shipper_->where();
  return where.empty() ? local_->describe() : local_->describe() + " + " + where;
}

std::string BuddyStore::locate(std::uint64_t version) const {
  return local_->locate(version);
}

namespace {
class WholeShip final : public ShipStream {
 public:
  WholeShip(Shipper& s, const core::Manifest& m, std::shared_ptr<const core::HostBytes> payload)
      : shipper_(s), manifest_(m), payload_(std::move(payload)) {}
  void ready(std::size_t, std::size_t) override {}
  void finish(std::uint64_t checksum) override { acked_ = shipper_.ship(manifest_, *payload_, checksum); }
  bool acknowledged() const override { return acked_; }

 private:
  Shipper& shipper_;
  core::Manifest manifest_;
  std::shared_ptr<const core::HostBytes> payload_;
  bool acked_ = false;
};
}  // namespace

std::unique_ptr<ShipStream> Shipper::stream(const core::Manifest& manifest,
                                            std::shared_ptr<const core::HostBytes> payload) {
  return std::make_unique<WholeShip>(*this, manifest, std::move(payload));
}

class BuddyStore::Put final : public core::PutStream {
 public:
  Put(BuddyStore& s, const core::Manifest& m, std::shared_ptr<const core::HostBytes> payload)
      : store_(s), manifest_(m), payload_(payload), ship_(s.shipper_->stream(m, std::move(payload))) {}
  void ready(std::size_t offset, std::size_t bytes) override { ship_->ready(offset, bytes); }
  void finish(std::uint64_t checksum) override {
    // The buddy's copy first: a level written in the background (REPRISE_DIR's files) then starts on a version the
    // buddy holds, and its write does not compete with the transfer and the buddy's check for the CPU. A ship that
    // fails still leaves the version in the local store (its chain is shipped again after the repair).
    try {
      ship_->finish(checksum);
    } catch (...) {
      stored();
      store_.local_->put(manifest_, payload_, checksum);
      throw;
    }
    stored();
    store_.local_->put(manifest_, payload_, checksum);
    if (ship_->acknowledged()) {
      std::lock_guard<std::mutex> lock(store_.mutex_);
      store_.acked_.push_back({manifest_.version, manifest_.base_version, manifest_.kind == core::VersionKind::Full});
    }
  }
  std::size_t handed_on() const override { return ship_->handed_on(); }
  bool streams() const override { return ship_->streams(); }

 private:
  BuddyStore& store_;
  core::Manifest manifest_;
  std::shared_ptr<const core::HostBytes> payload_;
  std::unique_ptr<ShipStream> ship_;
};

std::unique_ptr<core::PutStream> BuddyStore::begin_put(const core::Manifest& manifest,
                                                       std::shared_ptr<const core::HostBytes> payload) {
  return std::make_unique<Put>(*this, manifest, std::move(payload));
}

void BuddyStore::put(const core::Manifest& manifest, std::shared_ptr<const core::HostBytes> payload,
                     std::uint64_t payload_checksum) {
  const std::size_t bytes = payload->size();
  auto p = begin_put(manifest, std::move(payload));
  p->ready(0, bytes);
  p->finish(payload_checksum);
}

std::vector<std::uint64_t> BuddyStore::list() const {
  return local_->list();
}

core::Manifest BuddyStore::load_manifest(std::uint64_t version) const {
  return local_->load_manifest(version);
}

core::StoredVersion BuddyStore::load(std::uint64_t version, core::PayloadCheck check) const {
  return local_->load(version, check);
}

bool BuddyStore::may_release(std::uint64_t version, std::uint64_t floor_base) const {
  return committed_ && version < committed_base_ && version < floor_base;
}

void BuddyStore::release(std::uint64_t version) {
  const auto held = local_->list();
  if (!std::binary_search(held.begin(), held.end(), version)) return;  // gone already (an abandoned timeline)
  Releases now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    deferred_local_.insert(version);
    deferred_buddy_.insert(version);
    now = take_releasable();
  }
  release_now(now);
}

BuddyStore::Releases BuddyStore::take_releasable() {
  Releases now;
  const auto take = [&](std::set<std::uint64_t>& deferred, std::uint64_t floor_base, std::vector<std::uint64_t>& out) {
    for (auto it = deferred.begin(); it != deferred.end();) {
      if (may_release(*it, floor_base)) {
        out.push_back(*it);
        it = deferred.erase(it);
      } else {
        ++it;
      }
    }
  };
  take(deferred_local_, local_floor_base_, now.local);
  take(deferred_buddy_, buddy_floor_base_, now.buddy);
  return now;
}

void BuddyStore::release_now(const Releases& r) {
  for (std::uint64_t v : r.local) local_->release(v);
  for (std::uint64_t v : r.buddy) shipper_->release(v);
  if (r.buddy.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  acked_.erase(std::remove_if(acked_.begin(), acked_.end(),
                              [&](const auto& a) {
                                return std::find(r.buddy.begin(), r.buddy.end(), a.version) != r.buddy.end();
                              }),
               acked_.end());
}

void BuddyStore::hold_for_job(bool local, bool buddy) {
  std::lock_guard<std::mutex> lock(mutex_);
  local_floor_base_ = local ? 0 : UINT64_MAX;
  buddy_floor_base_ = buddy ? 0 : UINT64_MAX;
  job_floor_.reset();
}

void BuddyStore::set_job_floor(std::uint64_t version) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (job_floor_ && version <= *job_floor_) return;  // floors only rise; a repeated or late one changes nothing
  }
  // The chain of this rank's newest complete version at or before the floor (groups take the same versions, so
  // normally the floor itself).
  std::uint64_t base = 0;
  const auto records = records_of(*local_);
  const auto complete = complete_versions(records);
  const auto it = std::upper_bound(complete.begin(), complete.end(), version);
  if (it != complete.begin()) base = chain_of(records, *std::prev(it)).front();
  Releases now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (job_floor_ && version <= *job_floor_) return;
    job_floor_ = version;
    if (local_floor_base_ != UINT64_MAX) local_floor_base_ = std::max(local_floor_base_, base);
    if (buddy_floor_base_ != UINT64_MAX) buddy_floor_base_ = std::max(buddy_floor_base_, base);
    now = take_releasable();
  }
  release_now(now);
}

std::optional<std::uint64_t> BuddyStore::newest_acked_chain() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto complete = complete_versions(acked_);
  if (complete.empty()) return std::nullopt;
  return complete.back();
}

void BuddyStore::set_committed(std::uint64_t version) {
  Releases now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (committed_ && version <= *committed_) return;  // an older commit completing late changes nothing
    std::vector<std::uint64_t> chain;
    try {
      chain = chain_of(acked_, version);
    } catch (const RestoreError&) {
      return;  // not every link is acknowledged here (yet): the commit waits for a later agreement
    }
    committed_ = version;
    committed_base_ = chain.front();
    now = take_releasable();
  }
  release_now(now);
}

std::optional<std::uint64_t> BuddyStore::committed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return committed_;
}

void BuddyStore::reset_after_recovery(std::uint64_t version) {
  const auto records = records_of(*local_);
  const auto chain = chain_of(records, version);
  // Versions newer than the restored one belong to the abandoned timeline: the buddy dropped its copies, and the
  // re-execution writes versions of the same numbers.
  for (const auto& r : records)
    if (r.version > version) local_->release(r.version);
  Releases now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    acked_.clear();
    for (const auto& r : records)
      if (std::find(chain.begin(), chain.end(), r.version) != chain.end()) acked_.push_back(r);
    committed_ = version;
    committed_base_ = chain.front();
    deferred_local_.erase(deferred_local_.upper_bound(version), deferred_local_.end());
    deferred_buddy_.erase(deferred_buddy_.upper_bound(version), deferred_buddy_.end());
    now = take_releasable();
  }
  release_now(now);
}

void BuddyStore::resync_after_recovery() {
  const auto records = records_of(*local_);
  std::lock_guard<std::mutex> lock(mutex_);
  acked_ = records;
}

void BuddyStore::drop_everything() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    acked_.clear();
    committed_.reset();
    committed_base_ = 0;
    deferred_local_.clear();
    deferred_buddy_.clear();
    if (local_floor_base_ != UINT64_MAX) local_floor_base_ = 0;  // the run starts over: floors start over too
    if (buddy_floor_base_ != UINT64_MAX) buddy_floor_base_ = 0;
    job_floor_.reset();
  }
  for (std::uint64_t v : local_->list()) local_->release(v);
}

}  // namespace reprise::protocol
