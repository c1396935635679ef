#include <gtest/gtest.h>

#include <cstring>

#include "core/format.hpp"
#include "core/manifest.hpp"
#include "reprise/errors.hpp"
#include "support/test_support.hpp"

namespace reprise::core {
namespace {

Manifest sample_manifest() {
  Manifest m;
  m.rank = 3;
  m.version = 42;
  m.kind = VersionKind::Differential;
  m.base_version = 40;
  m.chain_index = 2;
  m.created_unix = 1.7e9;
  RegionRecord a;
  a.name = "u";
  a.bytes = 1000;
  a.chunk_bytes = 256;
  a.digests = {1, 2, 3, 4};
  a.chunks = {1, 3};
  RegionRecord b;
  b.name = "step";
  b.bytes = 8;
  b.chunk_bytes = 256;
  b.space = MemorySpace::Device;
  b.digest_kind = gpu::DigestKind::Lanes64;
  b.digests = {9};
  b.chunks = {0};
  m.regions = {a, b};
  m.layout_payload();
  return m;
}

TEST(Format, ManifestRoundTrips) {
  const Manifest m = sample_manifest();
  EXPECT_EQ(m.payload_bytes(), 256u + (1000 - 768) + 8);
  const auto bytes = encode_manifest(m);
  const Manifest d = decode_manifest(bytes.data(), bytes.size(), "test");
  EXPECT_EQ(d.version, 42u);
  EXPECT_EQ(d.base_version, 40u);
  EXPECT_EQ(d.chain_index, 2u);
  ASSERT_EQ(d.regions.size(), 2u);
  EXPECT_EQ(d.regions[0].chunks, (std::vector<std::uint32_t>{1, 3}));
  EXPECT_EQ(d.regions[1].space, MemorySpace::Device);
  EXPECT_EQ(d.regions[1].digest_kind, gpu::DigestKind::Lanes64);
  EXPECT_EQ(d.regions[1].payload_offset, 256u + 232u);
}

TEST(Format, EveryTruncationOfAManifestIsRejected) {
  const auto bytes = encode_manifest(sample_manifest());
  for (std::size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(decode_manifest(bytes.data(), n, "cut"), CorruptCheckpointError) << "length " << n;
}

TEST(Format, HeaderChecksAndNamesTheFile) {
  const Manifest m = sample_manifest();
  auto head = encode_head(m, 77);
  const Header h = decode_header(head.data(), head.size(), "f.reprise", head.size() + m.payload_bytes());
  EXPECT_EQ(h.payload_checksum, 77u);
  EXPECT_EQ(decode_head_manifest(h, head.data() + kHeaderBytes, "f.reprise").version, 42u);

  for (std::size_t off : {0ul, 20ul, 33ul, 47ul, 60ul}) {
    auto bad = head;
    bad[off] ^= std::byte{0x10};
    try {
      decode_header(bad.data(), bad.size(), "f.reprise", bad.size() + m.payload_bytes());
      FAIL() << "flip at " << off << " not detected";
    } catch (const CorruptCheckpointError& e) {
      EXPECT_EQ(e.where(), "f.reprise");
    }
  }
  // Truncated file: the header announces more than the file has.
  EXPECT_THROW(decode_header(head.data(), head.size(), "f", head.size() + m.payload_bytes() - 1),
               CorruptCheckpointError);
  EXPECT_THROW(decode_header(head.data(), 10, "f"), CorruptCheckpointError);
  // Damaged manifest behind a sound header.
  auto bad = head;
  bad[kHeaderBytes + 5] ^= std::byte{1};
  const Header hb = decode_header(bad.data(), bad.size(), "f");
  EXPECT_THROW(decode_head_manifest(hb, bad.data() + kHeaderBytes, "f"), CorruptCheckpointError);
}

TEST(Format, UnknownFormatVersionIsReportedAsSuch) {
  auto head = encode_head(sample_manifest(), 0);
  const std::uint32_t future = kFormatVersion + 1;
  std::memcpy(head.data() + 8, &future, 4);
  try {
    decode_header(head.data(), head.size(), "f");
    FAIL();
  } catch (const CorruptCheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("format version " + std::to_string(future)), std::string::npos) << e.what();
  }
}

// A manifest and its payload: a host region (XXH3 digests) whose chunks 1, 2 and 5 (the last, partial) are stored,
// and a device region (Lanes64) stored whole, with the digests of the bytes the payload holds.
struct Version {
  Manifest manifest;
  std::vector<std::byte> payload;
};
Version sample_version(std::uint64_t seed) {
  Version v;
  RegionRecord a;
  a.name = "u";
  a.bytes = 5 * 4096 + 100;
  a.chunk_bytes = 4096;
  a.digests.assign(6, 7);  // the chunks not stored: digests of earlier versions
  a.chunks = {1, 2, 5};
  RegionRecord b;
  b.name = "d";
  b.bytes = 3 * 4096;
  b.chunk_bytes = 4096;
  b.space = MemorySpace::Device;
  b.digest_kind = gpu::DigestKind::Lanes64;
  b.digests.assign(3, 0);
  b.chunks = {0, 1, 2};
  v.manifest.regions = {a, b};
  v.payload.resize(v.manifest.layout_payload());
  test::fill_random(v.payload.data(), v.payload.size(), seed);
  for (RegionRecord& r : v.manifest.regions) {
    std::size_t at = r.payload_offset;
    for (std::uint32_t c : r.chunks) {
      r.digests[c] = chunk_digest(r.digest_kind, v.payload.data() + at, r.chunk_length(c));
      at += r.chunk_length(c);
    }
  }
  return v;
}

// The payload checksum is read off the manifest: it follows every stored chunk's digest and the payload's size, and
// not the digests of chunks the version does not store.
TEST(Format, PayloadChecksumFollowsTheStoredChunksDigests) {
  const Version v = sample_version(1);
  const std::uint64_t sum = payload_checksum(v.manifest);
  Manifest m = v.manifest;
  m.regions[0].digests[0] ^= 1;  // not stored
  EXPECT_EQ(payload_checksum(m), sum);
  m.regions[1].digests[2] ^= 1;
  EXPECT_NE(payload_checksum(m), sum);
  m = v.manifest;
  m.regions[0].chunks = {1, 2};
  m.layout_payload();
  EXPECT_NE(payload_checksum(m), sum);
}

// verify_payload digests every stored chunk (XXH3 or Lanes64, as its region says) and names the first damaged one.
TEST(Format, VerifyPayloadNamesTheDamagedChunk) {
  Version v = sample_version(2);
  Header h;
  h.payload_bytes = v.payload.size();
  h.payload_checksum = payload_checksum(v.manifest);
  for (unsigned threads : {1u, 2u, 5u}) EXPECT_NO_THROW(verify_payload(h, v.manifest, v.payload.data(), "v", threads));
  const std::size_t in_u5 = 2 * 4096 + 50, in_d1 = v.manifest.regions[1].payload_offset + 4096 + 9;
  for (const auto& [at, what] : {std::pair{in_u5, std::string("chunk 5 of region 'u' (payload bytes 8192 to 8292)")},
                                 std::pair{in_d1, std::string("chunk 1 of region 'd'")}}) {
    v.payload[at] ^= std::byte{4};
    for (unsigned threads : {1u, 2u, 5u}) {
      try {
        verify_payload(h, v.manifest, v.payload.data(), "v", threads);
        ADD_FAILURE() << "a flipped bit at " << at << " passed";
      } catch (const CorruptCheckpointError& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      }
    }
    v.payload[at] ^= std::byte{4};
  }
  Header wrong = h;
  wrong.payload_checksum ^= 1;
  EXPECT_THROW(verify_payload(wrong, v.manifest, v.payload.data(), "v"), CorruptCheckpointError);
}

// The buddy checks a version chunk by chunk as it arrives: whatever the pieces, what a whole pass finds.
TEST(Format, PayloadCheckerOfAPayloadThatArrivesInPieces) {
  Version v = sample_version(3);
  const std::size_t bytes = v.payload.size();
  for (const std::size_t flip : {SIZE_MAX, std::size_t{4096 + 1}, bytes - 1}) {
    if (flip != SIZE_MAX) v.payload[flip] ^= std::byte{1};
    for (const std::size_t piece : {std::size_t{1}, std::size_t{1000}, std::size_t{4096}, bytes}) {
      PayloadChecker check(v.manifest, v.payload.data());
      for (std::size_t at = 0; at < bytes;) {
        at = std::min(bytes, at + piece);
        check.advance(at);
      }
      EXPECT_TRUE(check.whole());
      EXPECT_EQ(check.damage().empty(), flip == SIZE_MAX) << "flip at " << flip << ", pieces of " << piece;
    }
    PayloadChecker part(v.manifest, v.payload.data());
    part.advance(bytes - 1);
    EXPECT_FALSE(part.whole()) << "the last chunk is not whole yet";
    if (flip != SIZE_MAX) v.payload[flip] ^= std::byte{1};
  }
}

}  // namespace
}  // namespace reprise::core
