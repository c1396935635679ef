// Versions kept in this process's host memory, encoded exactly as on disk (header + manifest bytes), with the
// payload shared, not copied.
#include <map>
#include <mutex>

#include "core/format.hpp"
#include "core/version_store.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {
namespace {

class MemoryStore final : public VersionStore {
 public:
  std::string describe() const override { return "host memory"; }
  std::string locate(std::uint64_t version) const override {
    return "host-memory store, version " + std::to_string(version);
  }

  void put(const Manifest& manifest, std::shared_ptr<const HostBytes> payload, std::uint64_t sum) override {
    Entry e{encode_head(manifest, sum), std::move(payload)};
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[manifest.version] = std::move(e);
  }

  std::vector<std::uint64_t> list() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::uint64_t> out;
    for (const auto& [v, e] : entries_) out.push_back(v);
    return out;
  }

  Manifest load_manifest(std::uint64_t version) const override {
    const Entry e = get(version);
    const std::string where = locate(version);
    const Header h = decode_header(e.head.data(), e.head.size(), where, e.head.size() + e.payload->size());
    return decode_head_manifest(h, e.head.data() + kHeaderBytes, where);
  }

  StoredVersion load(std::uint64_t version, PayloadCheck check) const override {
    const Entry e = get(version);
    const std::string where = locate(version);
    const Header h = decode_header(e.head.data(), e.head.size(), where, e.head.size() + e.payload->size());
    StoredVersion out{decode_head_manifest(h, e.head.data() + kHeaderBytes, where), e.payload, where};
    if (check == PayloadCheck::Chunks) verify_payload(h, out.manifest, e.payload->data(), where);
    return out;
  }

  void release(std::uint64_t version) override {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.erase(version);
  }

  std::size_t memory_bytes() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    // (pinned payloads are the pinned arena's memory, counted there)
    for (const auto& [v, e] : entries_) n += e.head.size() + (e.payload->pinned() ? 0 : e.payload->touched());
    return n;
  }

 private:
  struct Entry {
    std::vector<std::byte> head;
    std::shared_ptr<const HostBytes> payload;
  };
  Entry get(std::uint64_t version) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(version);
    if (it == entries_.end())
      throw RestoreError("version " + std::to_string(version) + " is not in the host-memory store");
    return Entry{it->second.head, it->second.payload};
  }

  mutable std::mutex mutex_;
  std::map<std::uint64_t, Entry> entries_;
};

}  // namespace

std::unique_ptr<VersionStore> make_memory_store() {
  return std::make_unique<MemoryStore>();
}

}  // namespace reprise::core
