// The restart exchange as data (PROTOCOL.md recovery steps 4-7): counts, peers, reports and the coordinator's
// items, as every process computes them from the same gathered words.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/restart_exchange.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

TEST(RestartExchange, CountsGiveEachProcessItsPeersOfOtherGroups) {
  const std::vector<int> group_of{0, 0, 1, 1};
  // Process 2 (group 1, rolled back) sent 4 to 0 and delivered 6 from 0; its restored counts are its view.
  Process p0(0, group_of), p2(2, group_of);
  const std::vector<std::uint64_t> c0 = exchange_counts(p0, false, nullptr);
  ASSERT_EQ(c0.size(), 16u) << "4 words for each rank";
  // What process 0 receives: 4 words from each process, its counts of the channel with 0.
  std::vector<std::uint64_t> received(16, 0);
  std::copy(c0.begin(), c0.begin() + 4, received.begin());
  const std::vector<std::uint64_t> from2{4, 6, 6, 4};  // 2's sent[0], delivered[0], view (delivered, sent)
  std::copy(from2.begin(), from2.end(), received.begin() + 8);
  const auto peers = peer_counts(received, group_of, 0, {2, 3});
  ASSERT_EQ(peers.size(), 2u) << "only the processes of other groups";
  EXPECT_EQ(peers[0].peer, 2);
  EXPECT_TRUE(peers[0].rolled_back);
  EXPECT_EQ(peers[0].delivered_from_me, 6u);
  EXPECT_EQ(peers[0].sent_to_me, 4u);
  EXPECT_EQ(peers[0].committed.delivered, 6u);
  EXPECT_EQ(peers[0].committed.sent, 4u);
  EXPECT_EQ(peers[1].peer, 3);
  EXPECT_THROW(peer_counts(std::vector<std::uint64_t>(15), group_of, 0, {}), ProtocolError);
}

TEST(RestartExchange, EachProcessSendsEachPeerTheCountsOfTheirChannel) {
  // p2 sent 3 messages to 0 and 1 to 1: the words for process q sit at 4 q (an all-to-all of 4 words).
  const std::vector<int> group_of{0, 0, 1, 1};
  Process p2(2, group_of);
  for (int i = 0; i < 3; ++i) p2.send(0, 0, nullptr, 0);
  p2.send(1, 0, nullptr, 0);
  const std::vector<std::uint64_t> c = exchange_counts(p2, true, nullptr);
  ASSERT_EQ(c.size(), 16u);
  EXPECT_EQ(c[0], 3u);
  EXPECT_EQ(c[3], 3u) << "a process of R: its restored counts are its view";
  EXPECT_EQ(c[4], 1u);
  EXPECT_EQ(c[8], 0u);
}

TEST(RestartExchange, ReportsRoundTripIntoTheCoordinatorsItems) {
  RecoveryWork a;
  a.phase = 3;
  a.replay_phases = {1, 2};
  a.orphan_phases = {2, 2};
  RecoveryWork b;
  b.phase = 7;
  std::vector<std::uint64_t> reports = encode_report(a);
  EXPECT_EQ(reports, (std::vector<std::uint64_t>{3, 2, 1, 2, 2, 2, 2}));
  const int second = static_cast<int>(reports.size());
  const auto rb = encode_report(b);
  reports.insert(reports.end(), rb.begin(), rb.end());
  const CoordinatorInput in = decode_reports(reports, {0, second});
  ASSERT_EQ(in.items.size(), 4u);
  EXPECT_EQ(in.items[0].process, 0);
  EXPECT_EQ(in.items[0].kind, ItemKind::Block);
  EXPECT_EQ(in.items[0].phase, 3u);
  EXPECT_EQ(in.items[2].kind, ItemKind::Replay);
  EXPECT_EQ(in.items[2].phase, 2u);
  EXPECT_EQ(in.items[3].process, 1);
  EXPECT_EQ(in.items[3].phase, 7u);
  EXPECT_EQ(in.orphan_phases, (std::vector<std::uint64_t>{2, 2}));
  // The coordinator built from them holds process 1 (phase 7) and the phase-2 replay until the orphans at 2 are
  // notified: only what is at or below the lowest outstanding orphan's phase goes.
  Coordinator c;
  c.begin(1, in.items, in.orphan_phases);
  EXPECT_EQ(c.release().size(), 2u);  // the replays at 1 and 2 (phase <= 2)
  EXPECT_TRUE(c.notify(1, 2));
  EXPECT_TRUE(c.notify(1, 2));
  EXPECT_EQ(c.release().size(), 2u);
  EXPECT_TRUE(c.done());
}

TEST(RestartExchange, ATruncatedReportIsAProtocolError) {
  EXPECT_THROW(decode_reports({3, 2, 1}, {0}), ProtocolError);
  try {
    decode_reports({3, 0, 0, 5}, {0, 4});
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("the report of rank 1 is truncated"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reprise::protocol
