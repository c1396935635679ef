#include "core/restore.hpp"

#include <algorithm>
#include <cstring>

#include "core/format.hpp"
#include "kernels/chunk_kernels.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {

RestoreChain load_chain(const VersionStore& store, std::uint64_t version, PayloadCheck check) {
  std::vector<StoredVersion> newest_first;
  std::uint64_t v = version;
  for (;;) {
    StoredVersion sv;
    try {
      sv = store.load(v, check);
    } catch (const RestoreError& e) {
      if (v == version) throw;
      throw ChainBrokenError("version " + std::to_string(version) + " cannot be restored: its chain needs version " +
                             std::to_string(v) + ", which is missing (" + e.what() + ")");
    }
    const Manifest& m = sv.manifest;
    if (m.version != v) throw CorruptCheckpointError(sv.where, "holds version " + std::to_string(m.version));
    const bool full = m.kind == VersionKind::Full;
    const std::uint64_t base = m.base_version;
    if (!full && base >= v)
      throw CorruptCheckpointError(sv.where, "differential version whose base is not older than itself");
    if (!newest_first.empty() && newest_first.back().manifest.chain_index != m.chain_index + 1)
      throw CorruptCheckpointError(sv.where, "chain position does not follow from the version built on it");
    newest_first.push_back(std::move(sv));
    if (full) break;
    v = base;
  }
  RestoreChain chain;
  chain.versions.assign(std::make_move_iterator(newest_first.rbegin()), std::make_move_iterator(newest_first.rend()));
  return chain;
}

void verify_chain(const RestoreChain& chain, const std::vector<Region>& regions) {
  const Manifest& target = chain.target();
  const std::string& target_where = chain.versions.back().where;
  for (const Region& region : regions) {
    const RegionRecord* rec = target.find(region.name);
    if (!rec) {
      std::string names;
      for (const auto& r : target.regions) names += (names.empty() ? "" : ", ") + ("'" + r.name + "'");
      throw RestoreError("region '" + region.name + "' is protected but version " + std::to_string(target.version) +
                         " (" + target_where + ") has no such region (it has " + names +
                         "): protect the same regions as the run that wrote it");
    }
    if (rec->bytes != region.bytes)
      throw RestoreError("region '" + region.name + "' is " + std::to_string(region.bytes) + " bytes now but version " +
                         std::to_string(target.version) + " (" + target_where + ") stored " +
                         std::to_string(rec->bytes) +
                         " bytes: protect a view of the same size and layout before restoring");
    if (rec->space != region.space)
      throw RestoreError("region '" + region.name + "' is in " + to_string(region.space) + " memory now but version " +
                         std::to_string(target.version) + " stored it from " + to_string(rec->space) + " memory");
    // Every version of the chain must describe the region the same way.
    for (const StoredVersion& sv : chain.versions) {
      const RegionRecord* r = sv.manifest.find(region.name);
      if (!r || r->bytes != rec->bytes || r->chunk_bytes != rec->chunk_bytes || r->digest_kind != rec->digest_kind)
        throw CorruptCheckpointError(sv.where, "region '" + region.name + "' differs from the version built on it");
    }
    // A chunk no later version stores must keep its digest down to the target.
    std::vector<std::uint64_t> expected = chain.versions.front().manifest.find(region.name)->digests;
    for (std::size_t k = 1; k < chain.versions.size(); ++k) {
      const StoredVersion& sv = chain.versions[k];
      const RegionRecord* r = sv.manifest.find(region.name);
      std::vector<bool> stored(expected.size(), false);
      for (auto c : r->chunks) stored[c] = true;
      for (std::size_t i = 0; i < expected.size(); ++i)
        if (!stored[i] && r->digests[i] != expected[i])
          throw CorruptCheckpointError(sv.where, "region '" + region.name + "' chunk " + std::to_string(i) +
                                                     " changed without being stored: the chain is inconsistent");
      expected = r->digests;
    }
  }
}

namespace {

// The chunks of a full version's region that it leaves out (they read as zeros).
std::vector<std::uint32_t> left_out(const RegionRecord& r) {
  std::vector<std::uint32_t> out;
  std::size_t k = 0;
  for (std::uint32_t c = 0; c < r.chunk_count(); ++c) {
    if (k < r.chunks.size() && r.chunks[k] == c)
      ++k;
    else
      out.push_back(c);
  }
  return out;
}

}  // namespace

void apply_chain(const RestoreChain& chain, const std::vector<Region>& regions, gpu::Backend* backend,
                 std::size_t staging_bytes) {
  std::unique_ptr<gpu::Stream> stream;
  gpu::Buffer staging, indices;
  std::vector<std::byte> zeros;
  // Writes `chunks` of a device region from `src` (their bytes one after the other; `zero`: zeros, not `src`), in
  // rounds of whole chunks that fit the staging budget.
  const auto to_device = [&](const Region& region, const RegionRecord& r, const std::vector<std::uint32_t>& chunks,
                             const std::byte* src, bool zero) {
    if (!backend) throw RestoreError("region '" + region.name + "' is in device memory but no device backend");
    if (!stream) stream = backend->create_stream(false);
    const std::size_t per_round = std::max<std::size_t>(1, staging_bytes / r.chunk_bytes);
    const std::size_t round = std::min(per_round, chunks.size());
    if (round == 0) return;
    if (staging.size() < round * r.chunk_bytes) staging = backend->alloc_device(round * r.chunk_bytes);
    if (indices.size() < round * sizeof(std::uint32_t)) indices = backend->alloc_device(round * sizeof(std::uint32_t));
    if (zero && zeros.size() < round * r.chunk_bytes) zeros.assign(round * r.chunk_bytes, std::byte{0});
    for (std::size_t j = 0; j < chunks.size(); j += round) {
      const std::size_t n = std::min(round, chunks.size() - j);
      std::size_t bytes = 0;
      for (std::size_t k = j; k < j + n; ++k) bytes += r.chunk_length(chunks[k]);
      backend->copy_to_device(staging.data(), zero ? zeros.data() : src + j * r.chunk_bytes, bytes, *stream);
      backend->copy_to_device(indices.data(), chunks.data() + j, n * sizeof(std::uint32_t), *stream);
      backend->unpack(region.data, region.bytes, r.chunk_bytes, indices.as<std::uint32_t>(),
                      static_cast<std::uint32_t>(n), staging.data(), *stream);
      backend->synchronize(*stream);
    }
  };
  for (const Region& region : regions) {
    for (const StoredVersion& sv : chain.versions) {
      const RegionRecord* r = sv.manifest.find(region.name);
      const std::byte* src = sv.payload->data() + r->payload_offset;
      // The chunks a full version leaves out are zeros (docs/FORMAT.md), whatever the region held.
      const std::vector<std::uint32_t> zero =
          sv.manifest.kind == VersionKind::Full ? left_out(*r) : std::vector<std::uint32_t>{};
      if (region.space == MemorySpace::Host) {
        for (std::uint32_t c : zero)
          std::memset(static_cast<std::byte*>(region.data) + std::size_t{c} * r->chunk_bytes, 0, r->chunk_length(c));
        kernels::unpack_host(region.data, region.bytes, r->chunk_bytes, r->chunks.data(),
                             static_cast<std::uint32_t>(r->chunks.size()), src);
        continue;
      }
      to_device(region, *r, zero, nullptr, true);
      to_device(region, *r, r->chunks, src, false);
    }
  }
}

}  // namespace reprise::core
