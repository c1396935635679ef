#include "coord/buddy_store.hpp"

#include <algorithm>
#include <map>

#include "reprise/errors.hpp"

namespace reprise::coord {

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
  return local_->describe() + " + buddy host memory";
}

std::string BuddyStore::locate(std::uint64_t version) const {
  return local_->locate(version);
}

void BuddyStore::put(const core::Manifest& manifest, std::shared_ptr<const core::HostBytes> payload,
                     std::uint64_t payload_checksum) {
  local_->put(manifest, payload, payload_checksum);
  if (shipper_->ship(manifest, *payload, payload_checksum)) {
    std::lock_guard<std::mutex> lock(mutex_);
    acked_.push_back({manifest.version, manifest.base_version, manifest.kind == core::VersionKind::Full});
  }
}

std::vector<std::uint64_t> BuddyStore::list() const {
  return local_->list();
}

core::Manifest BuddyStore::load_manifest(std::uint64_t version) const {
  return local_->load_manifest(version);
}

core::StoredVersion BuddyStore::load(std::uint64_t version) const {
  return local_->load(version);
}

bool BuddyStore::needed_by_commit(std::uint64_t version) const {
  return committed_ && version >= committed_base_ && version <= *committed_;
}

void BuddyStore::release(std::uint64_t version) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (needed_by_commit(version)) {
      deferred_.insert(version);
      return;
    }
  }
  release_now(version);
}

void BuddyStore::release_now(std::uint64_t version) {
  local_->release(version);
  shipper_->release(version);
  std::lock_guard<std::mutex> lock(mutex_);
  acked_.erase(std::remove_if(acked_.begin(), acked_.end(), [&](const auto& r) { return r.version == version; }),
               acked_.end());
}

std::optional<std::uint64_t> BuddyStore::newest_acked_chain() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto complete = complete_versions(acked_);
  if (complete.empty()) return std::nullopt;
  return complete.back();
}

void BuddyStore::set_committed(std::uint64_t version) {
  std::vector<std::uint64_t> now;
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
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      if (!needed_by_commit(*it)) {
        now.push_back(*it);
        it = deferred_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (std::uint64_t v : now) release_now(v);
}

std::optional<std::uint64_t> BuddyStore::committed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return committed_;
}

void BuddyStore::reset_after_recovery(std::uint64_t version) {
  const auto records = records_of(*local_);
  const auto chain = chain_of(records, version);
  std::vector<std::uint64_t> now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    acked_.clear();
    for (const auto& r : records)
      if (std::find(chain.begin(), chain.end(), r.version) != chain.end()) acked_.push_back(r);
    committed_ = version;
    committed_base_ = chain.front();
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      if (!needed_by_commit(*it)) {
        now.push_back(*it);
        it = deferred_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (std::uint64_t v : now) release_now(v);
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
    deferred_.clear();
  }
  for (std::uint64_t v : local_->list()) local_->release(v);
}

}  // namespace reprise::coord
