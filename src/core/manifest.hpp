// A version's manifest: which regions it holds, the full digest table of each region, and which chunks its
// payload carries. The payload is the concatenation, region by region in manifest order, of the stored chunks
// in ascending chunk order (the last chunk of a region may be partial).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "reprise/memory_space.hpp"

namespace reprise::core {

enum class VersionKind : std::uint8_t { Full = 0, Differential = 1 };
const char* to_string(VersionKind kind);

struct RegionRecord {
  std::string name;
  std::uint64_t bytes = 0;
  MemorySpace space = MemorySpace::Host;
  gpu::DigestKind digest_kind = gpu::DigestKind::Xxh3;
  std::uint32_t chunk_bytes = 0;
  std::vector<std::uint64_t> digests;  ///< digest of every chunk of the region at this version
  /// Chunks stored in this version, ascending. A full version may leave chunks out: they read as zeros, and their
  /// digest is 0 (a runtime region's room, protect_deferred); a differential one stores those that changed.
  std::vector<std::uint32_t> chunks;
  std::uint64_t payload_offset = 0;  ///< where this region's chunks start in the payload

  std::uint64_t chunk_count() const { return digests.size(); }
  std::uint64_t chunk_length(std::uint32_t index) const;
  std::uint64_t stored_bytes() const;  ///< sum of the stored chunks' lengths
};

struct Manifest {
  std::uint32_t rank = 0;
  std::uint64_t version = 0;
  VersionKind kind = VersionKind::Full;
  std::uint64_t base_version = 0;  ///< previous version of the chain (== version for a full one)
  std::uint32_t chain_index = 0;   ///< 0 for a full version, k for the k-th differential after it
  double created_unix = 0;
  std::vector<RegionRecord> regions;

  std::uint64_t payload_bytes() const;
  std::uint64_t protected_bytes() const;
  const RegionRecord* find(const std::string& name) const;
  /// Assigns payload offsets in region order; returns the payload size.
  std::uint64_t layout_payload();
};

/// Binary encoding (little-endian, see docs/FORMAT.md). decode throws CorruptCheckpointError naming `where`.
std::vector<std::byte> encode_manifest(const Manifest& manifest);
Manifest decode_manifest(const std::byte* data, std::size_t bytes, const std::string& where);

}  // namespace reprise::core
