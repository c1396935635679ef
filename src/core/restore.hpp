// Restore: read a version's differential chain back to its full version, check everything, then write the
// protected regions. Nothing is written until every chunk was read and verified, so a failed restore leaves
// protected data untouched.
#pragma once

#include <cstdint>
#include <vector>

#include "core/region.hpp"
#include "core/version_store.hpp"
#include "core/work_pool.hpp"
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

/// Loads `version` and its bases down to the full version. Throws CorruptCheckpointError when a version is
/// damaged, RestoreError when one is missing (naming the version that needs it).
RestoreChain load_chain(const VersionStore& store, std::uint64_t version);

/// Checks that every region exists in the target with the same size, and (when `verify_data`) that every stored
/// chunk hashes to its version's digest and that the digest tables agree along the chain. Throws RestoreError or
/// CorruptCheckpointError.
void verify_chain(const RestoreChain& chain, const std::vector<Region>& regions, bool verify_data, WorkPool& pool);

/// Writes the chain into the regions (oldest version first, so newer chunks win). Device regions go through
/// `backend` in rounds of at most `staging_bytes`.
void apply_chain(const RestoreChain& chain, const std::vector<Region>& regions, gpu::Backend* backend,
                 std::size_t staging_bytes);

}  // namespace reprise::core
