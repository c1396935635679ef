#include "core/format.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/thread_name.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {
namespace {

constexpr char kMagic[8] = {'R', 'E', 'P', 'R', 'I', 'S', 'E', '\0'};
constexpr std::size_t kBlock = std::size_t(4) << 20;

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
  return XXH3_64bits(data, bytes);
}

namespace {

// The payload checksum's two levels, shared by payload_checksum and PayloadChecksummer: XXH3 of each 4 MiB block
// (`at`: its offset), then XXH3 of those block checksums seeded with the payload's size.
std::uint64_t block_sum(const std::byte* payload, std::size_t bytes, std::size_t at) {
  return XXH3_64bits(payload + at, std::min(kBlock, bytes - at));
}
std::uint64_t combine_block_sums(const std::vector<std::uint64_t>& sums, std::size_t bytes) {
  return XXH3_64bits_withSeed(sums.data(), sums.size() * sizeof(std::uint64_t), bytes);
}

}  // namespace

std::uint64_t payload_checksum(const void* data, std::size_t bytes, unsigned threads) {
  const std::size_t blocks = (bytes + kBlock - 1) / kBlock;
  std::vector<std::uint64_t> sums(blocks);
  const auto* base = static_cast<const std::byte*>(data);
  auto work = [&](std::size_t first, std::size_t stride) {
    for (std::size_t b = first; b < blocks; b += stride) sums[b] = block_sum(base, bytes, b * kBlock);
  };
  threads = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(blocks)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.push_back(named_thread("reprise-sum", [&work, t, threads] { work(t, threads); }));
  work(0, threads);
  for (auto& t : pool) t.join();
  return combine_block_sums(sums, bytes);
}

PayloadChecksummer::PayloadChecksummer(const std::byte* payload, std::size_t bytes) : payload_(payload), bytes_(bytes) {
  sums_.reserve((bytes + kBlock - 1) / kBlock);
}

void PayloadChecksummer::advance(std::size_t received) {
  received = std::min(received, bytes_);
  for (std::size_t at = sums_.size() * kBlock; at < bytes_ && (at + kBlock <= received || received == bytes_);
       at += kBlock)
    sums_.push_back(block_sum(payload_, bytes_, at));
}

std::uint64_t PayloadChecksummer::value() const {
  if (sums_.size() * kBlock < bytes_)
    throw Error("PayloadChecksummer::value: the payload is not whole (" + std::to_string(sums_.size() * kBlock) +
                " of " + std::to_string(bytes_) + " bytes hashed)");
  return combine_block_sums(sums_, bytes_);
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
  if (h.format_version != kFormatVersion)
    throw CorruptCheckpointError(where, "format version " + std::to_string(h.format_version) +
                                            " is not supported by this Reprise (it reads version " +
                                            std::to_string(kFormatVersion) +
                                            "): restore it with the Reprise release that wrote it");
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

void verify_payload(const Header& header, const void* payload, const std::string& where) {
  if (payload_checksum(payload, header.payload_bytes, 2) != header.payload_checksum)
    throw CorruptCheckpointError(where, "payload checksum mismatch: checkpoint data are damaged");
}

}  // namespace reprise::core
