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
