// The checkpoint encoding shared by every store: a 64-byte header, the manifest, the payload.
// See docs/FORMAT.md for the byte layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/manifest.hpp"

namespace reprise::core {

constexpr std::uint32_t kFormatVersion = 1;
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
/// XXH3-64 of a large range computed with `threads` threads over fixed 4 MiB blocks, then of the block
/// checksums: the payload checksum of the format (same result whatever the thread count).
std::uint64_t payload_checksum(const void* data, std::size_t bytes, unsigned threads = 1);

/// payload_checksum of a payload that arrives in order, block by block as its bytes come: each 4 MiB block is
/// hashed once it is whole, while it is still in the cache, instead of in one pass over the whole payload after it.
class PayloadChecksummer {
 public:
  PayloadChecksummer(const std::byte* payload, std::size_t bytes);
  /// The payload's first `received` bytes are in place (non-decreasing).
  void advance(std::size_t received);
  /// Once advance(bytes) was called: what payload_checksum(payload, bytes) gives.
  std::uint64_t value() const;

 private:
  const std::byte* payload_;
  std::size_t bytes_;
  std::vector<std::uint64_t> sums_;  // of the whole blocks so far
};

/// Header + manifest bytes, ready to be followed by the payload.
std::vector<std::byte> encode_head(const Manifest& manifest, std::uint64_t payload_checksum);
/// Validates magic, format version and header checksum. `file_bytes` (when known) is checked against the sizes
/// the header announces. Throws CorruptCheckpointError naming `where`.
Header decode_header(const std::byte* data, std::size_t bytes, const std::string& where,
                     std::uint64_t file_bytes = UINT64_MAX);
/// Decodes the manifest that follows a header, checking its checksum and its agreement with the header.
Manifest decode_head_manifest(const Header& header, const std::byte* manifest_bytes, const std::string& where);
/// Checks the payload checksum.
void verify_payload(const Header& header, const void* payload, const std::string& where);

}  // namespace reprise::core
