#include "core/format.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/thread_name.hpp"
#include "core/xxh3.hpp"
#include "kernels/chunk_kernels.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {
namespace {

constexpr char kMagic[8] = {'R', 'E', 'P', 'R', 'I', 'S', 'E', '\0'};

template <class T>
void store_at(std::byte* p, std::size_t off, T v) {
  std::memcpy(p + off, &v, sizeof(T));
}
template <class T>
T load_at(const std::byte* p, std::size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

}  // namespace

std::uint64_t checksum64(const void* data, std::size_t bytes) {
  return xxh3_64(data, bytes);
}

std::uint64_t chunk_digest(gpu::DigestKind kind, const void* data, std::size_t bytes) {
  return kind == gpu::DigestKind::Xxh3 ? xxh3_64(data, bytes) : kernels::lanes64(data, bytes);
}

namespace {

// The stored chunks of a manifest, in payload order.
std::vector<PayloadChecker::Chunk> stored_chunks(const Manifest& m) {
  std::vector<PayloadChecker::Chunk> out;
  for (std::uint32_t k = 0; k < m.regions.size(); ++k) {
    const RegionRecord& r = m.regions[k];
    std::size_t at = r.payload_offset;
    for (std::uint32_t c : r.chunks) {
      const std::size_t n = r.chunk_length(c);
      out.push_back({at, n, r.digests[c], r.digest_kind, k, c});
      at += n;
    }
  }
  return out;
}

std::string damaged(const Manifest& m, const PayloadChecker::Chunk& c) {
  return "payload checksum mismatch: chunk " + std::to_string(c.index) + " of region '" + m.regions[c.region].name +
         "' (payload bytes " + std::to_string(c.offset) + " to " + std::to_string(c.offset + c.bytes) +
         ") does not match its digest: checkpoint data are damaged";
}

bool intact(const std::byte* payload, const PayloadChecker::Chunk& c) {
  return chunk_digest(c.kind, payload + c.offset, c.bytes) == c.digest;
}

}  // namespace

std::uint64_t payload_checksum(const Manifest& m) {
  std::vector<std::uint64_t> digests;
  for (const RegionRecord& r : m.regions)
    for (std::uint32_t c : r.chunks) digests.push_back(r.digests[c]);
  return XXH3_64bits_withSeed(digests.data(), digests.size() * sizeof(std::uint64_t), m.payload_bytes());
}

PayloadChecker::PayloadChecker(const Manifest& manifest, const std::byte* payload)
    : manifest_(manifest), payload_(payload), chunks_(stored_chunks(manifest)) {}

void PayloadChecker::advance(std::size_t received) {
  for (; next_ < chunks_.size() && chunks_[next_].offset + chunks_[next_].bytes <= received; ++next_)
    if (damage_.empty() && !intact(payload_, chunks_[next_])) damage_ = damaged(manifest_, chunks_[next_]);
}

std::vector<std::byte> encode_head(const Manifest& manifest, std::uint64_t payload_sum) {
  const std::vector<std::byte> m = encode_manifest(manifest);
  std::vector<std::byte> out(kHeaderBytes + m.size());
  std::byte* h = out.data();
  std::memcpy(h, kMagic, 8);
  store_at<std::uint32_t>(h, 8, kFormatVersion);
  store_at<std::uint32_t>(h, 12, kHeaderBytes);
  store_at<std::uint64_t>(h, 16, m.size());
  store_at<std::uint64_t>(h, 24, manifest.payload_bytes());
  store_at<std::uint64_t>(h, 32, checksum64(m.data(), m.size()));
  store_at<std::uint64_t>(h, 40, payload_sum);
  store_at<std::uint64_t>(h, 48, manifest.version);
  store_at<std::uint64_t>(h, 56, checksum64(h, 56));
  std::memcpy(h + kHeaderBytes, m.data(), m.size());
  return out;
}

Header decode_header(const std::byte* p, std::size_t bytes, const std::string& where, std::uint64_t file_bytes) {
  if (bytes < kHeaderBytes)
    throw CorruptCheckpointError(where, "truncated: " + std::to_string(bytes) + " bytes, the header alone needs " +
                                            std::to_string(kHeaderBytes));
  if (std::memcmp(p, kMagic, 8) != 0) throw CorruptCheckpointError(where, "not a Reprise checkpoint (bad magic bytes)");
  Header h;
  h.format_version = load_at<std::uint32_t>(p, 8);
  if (h.format_version < kOldestFormatVersion || h.format_version > kFormatVersion)
    throw CorruptCheckpointError(
        where, "format version " + std::to_string(h.format_version) +
                   " is not supported by this Reprise (it reads versions " + std::to_string(kOldestFormatVersion) +
                   " to " + std::to_string(kFormatVersion) + "): restore it with the Reprise release that wrote it");
  if (load_at<std::uint64_t>(p, 56) != checksum64(p, 56))
    throw CorruptCheckpointError(where, "header checksum mismatch: the header is damaged");
  if (load_at<std::uint32_t>(p, 12) != kHeaderBytes) throw CorruptCheckpointError(where, "unexpected header size");
  h.manifest_bytes = load_at<std::uint64_t>(p, 16);
  h.payload_bytes = load_at<std::uint64_t>(p, 24);
  h.manifest_checksum = load_at<std::uint64_t>(p, 32);
  h.payload_checksum = load_at<std::uint64_t>(p, 40);
  h.version = load_at<std::uint64_t>(p, 48);
  if (file_bytes != UINT64_MAX && file_bytes != h.total_bytes())
    throw CorruptCheckpointError(where, (file_bytes < h.total_bytes() ? "truncated: " : "oversized: ") +
                                            std::to_string(file_bytes) + " bytes, the header announces " +
                                            std::to_string(h.total_bytes()));
  return h;
}

Manifest decode_head_manifest(const Header& header, const std::byte* manifest_bytes, const std::string& where) {
  if (checksum64(manifest_bytes, header.manifest_bytes) != header.manifest_checksum)
    throw CorruptCheckpointError(where, "manifest checksum mismatch: the manifest is damaged");
  Manifest m = decode_manifest(manifest_bytes, header.manifest_bytes, where);
  if (m.version != header.version) throw CorruptCheckpointError(where, "header and manifest disagree on the version");
  if (m.payload_bytes() != header.payload_bytes)
    throw CorruptCheckpointError(where, "header and manifest disagree on the payload size");
  return m;
}

void verify_payload(const Header& header, const Manifest& manifest, const void* payload, const std::string& where,
                    unsigned threads) {
  if (header.payload_checksum != payload_checksum(manifest))
    throw CorruptCheckpointError(where,
                                 "payload checksum mismatch: the header's does not follow from the manifest's "
                                 "chunk digests: the checkpoint is damaged");
  const std::vector<PayloadChecker::Chunk> chunks = stored_chunks(manifest);
  const auto* base = static_cast<const std::byte*>(payload);
  std::atomic<std::size_t> first_bad{SIZE_MAX};
  auto work = [&](std::size_t first, std::size_t stride) {
    for (std::size_t k = first; k < chunks.size() && k < first_bad.load(std::memory_order_relaxed); k += stride)
      if (!intact(base, chunks[k])) {
        std::size_t bad = first_bad.load();
        while (k < bad && !first_bad.compare_exchange_weak(bad, k)) {
        }
      }
  };
  threads = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(std::min<std::size_t>(chunks.size(), 64))));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.push_back(named_thread("reprise-check", [&work, t, threads] { work(t, threads); }));
  work(0, threads);
  for (auto& t : pool) t.join();
  if (first_bad != SIZE_MAX) throw CorruptCheckpointError(where, damaged(manifest, chunks[first_bad]));
}

}  // namespace reprise::core
