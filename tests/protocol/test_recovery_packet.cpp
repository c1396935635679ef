#include <gtest/gtest.h>

#include "protocol/recovery_packet.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

template <class T>
PerRank<T> per_rank(const std::vector<T>& values) {
  PerRank<T> v;
  for (std::size_t r = 0; r < values.size(); ++r) v.set(r, values[r]);
  return v;
}

RecoveryPacket group_packet() {
  RecoveryPacket k;
  k.layout = make_layout(emulated_node_keys(6, 2), {});
  k.plan.version = 30;
  k.plan.failed = {2, 5};
  k.plan.source = per_rank<DataSource>(
      {DataSource::Own, DataSource::Own, DataSource::Buddy, DataSource::Own, DataSource::Own, DataSource::Buddy});
  k.plan.partial = true;
  k.plan.rolled_back = {2, 3, 4, 5};
  k.plan.version_of = per_rank<std::uint64_t>({0, 0, 30, 30, 20, 20});
  k.plan.starts_over = per_rank<char>({0, 0, 0, 0, 1, 1});
  k.env = {"REPRISE_KILL=2:25,5:7:drain", "REPRISE_RANKS_PER_NODE=2", "REPRISE_X="};
  k.epoch = 3;
  k.kill_floors = {{2, 25}, {5, 12}};
  return k;
}

void expect_same(const RecoveryPacket& a, const RecoveryPacket& b) {
  EXPECT_TRUE(a.layout == b.layout);
  EXPECT_EQ(a.layout.ranks_per_node(), b.layout.ranks_per_node());
  EXPECT_EQ(a.layout.rule_buddies(), b.layout.rule_buddies());
  EXPECT_EQ(a.plan.version, b.plan.version);
  EXPECT_EQ(a.plan.from_start, b.plan.from_start);
  EXPECT_EQ(a.plan.failed, b.plan.failed);
  EXPECT_EQ(a.plan.source, b.plan.source);
  EXPECT_EQ(a.plan.partial, b.plan.partial);
  EXPECT_EQ(a.plan.rolled_back, b.plan.rolled_back);
  EXPECT_EQ(a.plan.version_of, b.plan.version_of);
  EXPECT_EQ(a.plan.starts_over, b.plan.starts_over);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.kill_floors, b.kill_floors);
}

TEST(RecoveryPacket, AGroupRollbackRoundTrips) {
  const RecoveryPacket k = group_packet();
  expect_same(decode_packet(encode_packet(k)), k);
}

TEST(RecoveryPacket, ACoordinatedRollbackAndAnExplicitLayoutRoundTrip) {
  RecoveryPacket k;
  LayoutSpec spec;
  spec.groups = "5,5,5,5";
  spec.buddies = "2,3,0,1";
  k.layout = make_layout({7, 7, 3, 3}, spec);
  k.plan.version = std::uint64_t{1} << 40;
  k.plan.from_start = true;
  k.plan.failed = {0};
  k.plan.source = per_rank<DataSource>({DataSource::Buddy, DataSource::Own, DataSource::Own, DataSource::Own});
  k.plan.rolled_back = {0, 1, 2, 3};
  k.kill_floors = {{0, 5}};
  const RecoveryPacket back = decode_packet(encode_packet(k));
  expect_same(back, k);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(back.layout.group_of(r), 0);
  EXPECT_EQ(back.layout.buddy_of(1), 3);
  EXPECT_TRUE(back.env.empty());
}

// Nodes of other shapes travel as a table, with the default buddies computed over them.
TEST(RecoveryPacket, NodesOfAnyShapeRoundTrip) {
  RecoveryPacket k;
  k.layout = make_layout({4, 9, 4, 9, 1}, {});
  ASSERT_EQ(k.layout.ranks_per_node(), 0);
  const RecoveryPacket back = decode_packet(encode_packet(k));
  expect_same(back, k);
  EXPECT_EQ(back.layout.node_of(4), 2);
  EXPECT_EQ(back.layout.buddy_of(4), 0);
}

// The packet costs the ranks it names, not the job: 2 rolled back in a job of 100,000 ranks on nodes of 2 ranks
// (the layout is its rule: a few words; the kill floors name the failed rank only).
TEST(RecoveryPacket, ThePacketIsSizedByTheRanksItRollsBack) {
  RecoveryPacket k;
  k.layout = make_regular_layout(100000, 2, {});
  k.plan.version = 40;
  k.plan.failed = {7};
  k.plan.partial = true;
  k.plan.rolled_back = {6, 7};
  k.plan.source.set(7, DataSource::Buddy);
  k.plan.version_of.set(6, 40);
  k.plan.version_of.set(7, 40);
  k.kill_floors = {{7, 40}};
  const auto words = encode_packet(k);
  EXPECT_LE(words.size(), 32u);
  const RecoveryPacket back = decode_packet(words);
  expect_same(back, k);
  EXPECT_EQ(back.plan.source[7], DataSource::Buddy);
  EXPECT_EQ(back.plan.source[8], DataSource::Own);
  EXPECT_EQ(back.plan.version_of[6], 40u);
  EXPECT_EQ(back.plan.version_of[900], 0u);
}

std::string error_of(const std::vector<std::uint64_t>& words) {
  try {
    decode_packet(words);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RecoveryPacket, AMalformedPacketIsAnErrorThatSaysWhat) {
  const std::vector<std::uint64_t> good = encode_packet(group_packet());
  for (std::size_t n = 0; n < good.size(); ++n) {  // every truncation
    const std::string e = error_of({good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)});
    EXPECT_NE(e.find("is truncated: " + std::to_string(n) + " words"), std::string::npos) << n << ": " << e;
  }
  std::vector<std::uint64_t> longer = good;
  longer.push_back(0);
  EXPECT_NE(error_of(longer).find("1 words left over"), std::string::npos);
  std::vector<std::uint64_t> foreign = good;
  foreign[0] ^= 1;
  EXPECT_NE(error_of(foreign).find("magic word"), std::string::npos);
  std::vector<std::uint64_t> bad_nodes = good;
  bad_nodes[2] = 7;  // nodes of 7 ranks in a 6-rank job
  EXPECT_NE(error_of(bad_nodes).find("the ranks per node 7 is out of range"), std::string::npos);
  RecoveryPacket listed = group_packet();
  listed.layout = make_layout(emulated_node_keys(6, 2), {"", "2,3,4,5,0,1", false});
  std::vector<std::uint64_t> bad_buddy = encode_packet(listed);
  ASSERT_EQ(bad_buddy[4], 2u);  // nodes of 2, groups of 2, then buddies as a table
  bad_buddy[5] = 6;             // rank 0's buddy: rank 6 of a 6-rank job
  EXPECT_NE(error_of(bad_buddy).find("a buddy rank 6 is out of range"), std::string::npos);
}

}  // namespace
}  // namespace reprise::protocol
