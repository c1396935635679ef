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
    EXPECT_NE(std::string(e.what()).find("format version 2"), std::string::npos) << e.what();
  }
}

TEST(Format, PayloadChecksumDoesNotDependOnThreads) {
  std::vector<char> data(9 << 20);
  test::fill_random(data.data(), data.size(), 1);
  const auto one = payload_checksum(data.data(), data.size(), 1);
  EXPECT_EQ(one, payload_checksum(data.data(), data.size(), 2));
  EXPECT_EQ(one, payload_checksum(data.data(), data.size(), 5));
  data[5 << 20] ^= 1;
  EXPECT_NE(one, payload_checksum(data.data(), data.size(), 2));
  EXPECT_NE(payload_checksum(data.data(), 0, 1), payload_checksum(data.data(), 1, 1));
}

// The buddy hashes a version piece by piece as it arrives: whatever the pieces, the same checksum as in one pass.
TEST(Format, PayloadChecksumOfAPayloadThatArrivesInPieces) {
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4} << 20, (std::size_t{9} << 20) + 3}) {
    std::vector<std::byte> data(bytes);
    test::fill_random(data.data(), data.size(), 2);
    const std::uint64_t whole = payload_checksum(data.data(), bytes);
    for (const std::size_t piece : {std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{3} << 20}) {
      PayloadChecksummer sum(data.data(), bytes);
      for (std::size_t at = 0; at < bytes;) {
        at = std::min(bytes, at + piece);
        sum.advance(at);
      }
      sum.advance(bytes);
      EXPECT_EQ(sum.value(), whole) << bytes << " bytes in pieces of " << piece;
    }
    if (bytes > 1) {
      PayloadChecksummer part(data.data(), bytes);
      part.advance(bytes - 1);
      EXPECT_THROW(part.value(), Error) << "a payload not whole has no checksum yet";
    }
  }
}

}  // namespace
}  // namespace reprise::core
