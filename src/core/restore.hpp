// Restore: read a version's differential chain back to its full version, check everything, then write the
// protected regions. Nothing is written until every chunk was read and verified, so a failed restore leaves
// protected data untouched.
#pragma once

#include <cstdint>
#include <vector>

#include "core/region.hpp"
#include "core/version_store.hpp"
#include "gpu/backend.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {

/// A version's chain cannot be followed: a base version is missing from the store.
class ChainBrokenError : public RestoreError {
 public:
  using RestoreError::RestoreError;
};

/// The versions of a chain, oldest (the full version) first, all read and checksum-verified.
struct RestoreChain {
  std::vector<StoredVersion> versions;
  const Manifest& target() const { return versions.back().manifest; }
};

/// Loads `version` and its bases down to the full version, each checked as `check` says (with the default every
/// stored chunk is digested once, here, against its version's digest). Throws CorruptCheckpointError when a
/// version is damaged, RestoreError when one is missing (naming the version that needs it).
RestoreChain load_chain(const VersionStore& store, std::uint64_t version, PayloadCheck check = PayloadCheck::Chunks);

/// Checks that every region exists in the target with the same size, layout and memory space, and that the digest
/// tables agree along the chain (a chunk no later version stores keeps its digest). Reads no payload: load_chain
/// checked the chunks. Throws RestoreError or CorruptCheckpointError.
void verify_chain(const RestoreChain& chain, const std::vector<Region>& regions);

/// Writes the chain into the regions (oldest version first, so newer chunks win). Device regions go through
/// `backend` in rounds of at most `staging_bytes`.
void apply_chain(const RestoreChain& chain, const std::vector<Region>& regions, gpu::Backend* backend,
                 std::size_t staging_bytes);

}  // namespace reprise::core
