// The device data path through the Backend interface, end to end, for any backend (the host twin runs it in the
// unit tests, the CUDA backend in the gpu tests): upload, digest, change some chunks, digest again,
// compare+compact, pack, download the staging, upload it elsewhere, unpack onto the old contents, compare bytes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "kernels/chunk_kernels.hpp"

namespace reprise::testing {

inline std::vector<unsigned char> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

template <class T>
std::vector<T> download(gpu::Backend& be, gpu::Stream& s, const void* dev, std::size_t count) {
  std::vector<T> out(count);
  be.copy_to_host(out.data(), dev, count * sizeof(T), s);
  be.synchronize(s);
  return out;
}

inline void fill(gpu::Backend& be, gpu::Stream& s, void* dev, std::size_t bytes, unsigned char value) {
  const std::vector<unsigned char> junk(bytes, value);
  be.copy_to_device(dev, junk.data(), bytes, s);
  be.synchronize(s);
}

/// Runs the whole path on a region of `bytes` bytes placed `misalign` bytes past an allocation's start; `dirty`
/// selects which chunks change between the two digests (every chunk when `all`, whose compaction ignores prev).
inline void expect_round_trip(gpu::Backend& be, std::size_t bytes, std::size_t chunk, std::size_t misalign,
                              const std::vector<bool>& dirty, bool all, std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << be.name() << ": bytes " << bytes << " chunk " << chunk << " misalign "
                                    << misalign << " all " << all << " seed " << seed);
  std::mt19937_64 rng(seed);
  const std::uint32_t n = static_cast<std::uint32_t>(kernels::chunk_count(bytes, chunk));
  ASSERT_EQ(dirty.size(), n);
  auto stream = be.create_stream(false);
  auto drain = be.create_stream(true);
  gpu::Stream& s = *stream;

  const std::vector<unsigned char> before = random_bytes(bytes, rng);
  std::vector<unsigned char> after = before;
  std::vector<std::uint32_t> want;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (dirty[i]) {
      const std::size_t len = kernels::chunk_length(bytes, chunk, i);
      after[std::size_t(i) * chunk + rng() % len] ^= static_cast<unsigned char>(1 + rng() % 255);
    }
    if (all || dirty[i]) want.push_back(i);
  }

  gpu::Buffer region = be.alloc_device(bytes + misalign);
  unsigned char* data = region.as<unsigned char>() + misalign;
  gpu::Buffer prev = be.alloc_device(n * 8ull), cur = be.alloc_device(n * 8ull);
  gpu::Buffer indices = be.alloc_device(n * 4ull), count = be.alloc_device(4);
  fill(be, s, indices.data(), indices.size(), 0xA5);
  fill(be, s, count.data(), 4, 0xA5);

  be.copy_to_device(data, before.data(), bytes, s);
  be.digest(data, bytes, chunk, prev.as<std::uint64_t>(), s);
  be.copy_to_device(data, after.data(), bytes, s);
  be.digest(data, bytes, chunk, cur.as<std::uint64_t>(), s);
  be.compare_compact(cur.as<std::uint64_t>(), all ? nullptr : prev.as<std::uint64_t>(), n, all,
                     indices.as<std::uint32_t>(), count.as<std::uint32_t>(), s);
  const std::uint32_t got_count = download<std::uint32_t>(be, s, count.data(), 1)[0];
  ASSERT_EQ(got_count, want.size());
  const auto got_indices = download<std::uint32_t>(be, s, indices.data(), n);
  ASSERT_EQ(std::vector<std::uint32_t>(got_indices.begin(), got_indices.begin() + got_count), want);
  for (std::uint32_t j = got_count; j < n; ++j) ASSERT_EQ(got_indices[j], 0xA5A5A5A5u) << "index slot " << j;

  // Pack on the scan stream, drain on the low-priority stream after an event, as the runtime does.
  gpu::Buffer staging = be.alloc_device(std::max<std::size_t>(1, want.size() * chunk));
  fill(be, s, staging.data(), staging.size(), 0x5A);
  be.pack(data, bytes, chunk, indices.as<std::uint32_t>(), got_count, staging.data(), s);
  auto packed = be.record(s);
  while (!be.query(*packed)) {  // as reprise::Comm's test() polls a copy (the twin: one item per query)
  }
  be.wait(*packed);  // complete: returns at once
  gpu::Buffer host = be.alloc_pinned(staging.size());
  be.copy_to_host(host.data(), staging.data(), staging.size(), *drain);
  be.synchronize(*drain);
  std::vector<unsigned char> want_staging(staging.size(), 0x5A);
  kernels::pack_host(after.data(), bytes, chunk, want.data(), static_cast<std::uint32_t>(want.size()),
                     want_staging.data());
  ASSERT_EQ(0, std::memcmp(host.data(), want_staging.data(), staging.size())) << "packed staging";

  // Restore side: the old contents, then the packed chunks unpacked onto them, in another device buffer.
  gpu::Buffer target = be.alloc_device(bytes + misalign + 16);
  fill(be, s, target.data(), target.size(), 0xC3);
  unsigned char* tdata = target.as<unsigned char>() + misalign;
  gpu::Buffer staging2 = be.alloc_device(staging.size());
  gpu::Buffer indices2 = be.alloc_device(std::max<std::size_t>(4, want.size() * 4));
  be.copy_to_device(tdata, before.data(), bytes, s);
  be.copy_to_device(staging2.data(), host.data(), staging.size(), s);
  be.copy_to_device(indices2.data(), want.data(), want.size() * 4, s);
  be.unpack(tdata, bytes, chunk, indices2.as<std::uint32_t>(), static_cast<std::uint32_t>(want.size()), staging2.data(),
            s);
  const auto restored = download<unsigned char>(be, s, target.data(), target.size());
  for (std::size_t k = 0; k < misalign; ++k) ASSERT_EQ(restored[k], 0xC3) << "byte before the region";
  for (std::size_t k = 0; k < bytes; ++k) ASSERT_EQ(restored[misalign + k], after[k]) << "region byte " << k;
  for (std::size_t k = misalign + bytes; k < restored.size(); ++k) ASSERT_EQ(restored[k], 0xC3) << "byte after";
}

/// Every k-th chunk dirty (k = 0: none), plus the last one when `last`.
inline std::vector<bool> every(std::size_t n, std::size_t k, bool last) {
  std::vector<bool> d(n, false);
  for (std::size_t i = 0; k && i < n; i += k) d[i] = true;
  if (last && n) d[n - 1] = true;
  return d;
}

}  // namespace reprise::testing
