// The checkpoint encoding shared by every store: a 64-byte header, the manifest, the payload.
// See docs/FORMAT.md for the byte layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/manifest.hpp"

namespace reprise::core {

// 2: the payload checksum is the stored chunks' digests; 3: a full version may leave chunks out (they read as zeros,
// digest 0). Version 2 files are read too (each is a version 3 file whose full versions store every chunk).
constexpr std::uint32_t kFormatVersion = 3;
constexpr std::uint32_t kOldestFormatVersion = 2;
constexpr std::size_t kHeaderBytes = 64;

struct Header {
  std::uint32_t format_version = kFormatVersion;
  std::uint64_t manifest_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t manifest_checksum = 0;
  std::uint64_t payload_checksum = 0;
  std::uint64_t version = 0;
  std::uint64_t total_bytes() const { return kHeaderBytes + manifest_bytes + payload_bytes; }
};

/// XXH3-64 of a byte range (the checksum of the format).
std::uint64_t checksum64(const void* data, std::size_t bytes);
/// The digest of one chunk of `kind`: XXH3-64 (host regions) or Lanes64 (device regions, kernels/chunk_kernels.hpp).
std::uint64_t chunk_digest(gpu::DigestKind kind, const void* data, std::size_t bytes);

/// The payload checksum of the format: XXH3-64, seeded with the payload's size, of the digests the manifest
/// gives the chunks the payload stores, in payload order. The owner reads it off its manifest (its chunks were
/// digested where they live, on the device for device regions): no pass over the payload. A reader checks the
/// payload by digesting each stored chunk (verify_payload, PayloadChecker), which covers the whole path from the
/// digest: the pack, the device-to-host copy, the transfer, the file.
std::uint64_t payload_checksum(const Manifest& manifest);

/// Checks a payload that arrives in order, chunk by chunk as its bytes come: each stored chunk is digested once it
/// is whole, while it is still in the cache, and compared with the manifest's digest.
class PayloadChecker {
 public:
  PayloadChecker(const Manifest& manifest, const std::byte* payload);
  /// The payload's first `received` bytes are in place (non-decreasing).
  void advance(std::size_t received);
  /// Every chunk checked (advance(payload size) was called).
  bool whole() const { return next_ == chunks_.size(); }
  /// Empty while every chunk checked so far matched its digest; else what was damaged (the first such chunk).
  const std::string& damage() const { return damage_; }

  struct Chunk {
    std::size_t offset, bytes;
    std::uint64_t digest;
    gpu::DigestKind kind;
    std::uint32_t region, index;
  };

 private:
  const Manifest& manifest_;
  const std::byte* payload_;
  std::vector<Chunk> chunks_;  // the stored chunks, in payload order
  std::size_t next_ = 0;
  std::string damage_;
};

/// Header + manifest bytes, ready to be followed by the payload.
std::vector<std::byte> encode_head(const Manifest& manifest, std::uint64_t payload_checksum);
/// Validates magic, format version and header checksum. `file_bytes` (when known) is checked against the sizes
/// the header announces. Throws CorruptCheckpointError naming `where`.
Header decode_header(const std::byte* data, std::size_t bytes, const std::string& where,
                     std::uint64_t file_bytes = UINT64_MAX);
/// Decodes the manifest that follows a header, checking its checksum and its agreement with the header.
Manifest decode_head_manifest(const Header& header, const std::byte* manifest_bytes, const std::string& where);
/// Checks the payload: the header's checksum is the manifest's (payload_checksum), and every stored chunk matches
/// its digest (`threads` threads). Throws CorruptCheckpointError naming `where` and the first damaged chunk.
void verify_payload(const Header& header, const Manifest& manifest, const void* payload, const std::string& where,
                    unsigned threads = 2);

}  // namespace reprise::core
