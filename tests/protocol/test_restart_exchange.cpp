// The restart exchange as data (PROTOCOL.md recovery steps 4-7): counts, peers, reports and the coordinator's
// items, as every process computes them from the words its peers sent it and the gathered reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "protocol/restart_exchange.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

TEST(RestartExchange, CountsGiveEachProcessItsPeersOfOtherGroups) {
  const std::vector<int> group_of{0, 0, 1, 1};
  // Group 1 rolled back. Process 2 sent 4 to 0 and delivered 6 from 0; its restored counts are its view.
  Process p0(0, group_of);
  p0.send(2, 0, nullptr, 0);
  const std::set<int> R{2, 3};
  const std::vector<ChannelWords> mine = exchange_counts(p0, R, nullptr);
  ASSERT_EQ(mine.size(), 1u) << "words for the channel it has with R, none for 1 (its group) or 3 (no channel)";
  EXPECT_EQ(mine[0].peer, 2);
  const std::vector<ChannelWords> received{{2, {4, 6, 6, 4}}};  // 2's sent[0], delivered[0], view (delivered, sent)
  const auto peers = peer_counts(p0, received, mine, R);
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].peer, 2);
  EXPECT_TRUE(peers[0].rolled_back);
  EXPECT_EQ(peers[0].delivered_from_me, 6u);
  EXPECT_EQ(peers[0].sent_to_me, 4u);
  EXPECT_EQ(peers[0].committed.delivered, 6u);
  EXPECT_EQ(peers[0].committed.sent, 4u);
  // 3 sent words although 0 has none for it (its restored view of the channel: 1 delivered), 2 sent none: both
  // appear, 2 with zeros.
  const auto both = peer_counts(p0, {{3, {0, 0, 1, 0}}}, mine, R);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].peer, 2);
  EXPECT_EQ(both[0].delivered_from_me, 0u) << "2 sent nothing: zeros";
  EXPECT_EQ(both[1].peer, 3);
  EXPECT_EQ(both[1].committed.delivered, 1u);
}

TEST(RestartExchange, WordsFromWhereNoneCanComeAreAProtocolError) {
  const std::vector<int> group_of{0, 0, 1, 1, 2};
  Process p0(0, group_of);
  const std::set<int> R{2, 3};
  EXPECT_THROW(peer_counts(p0, {{1, {1, 0, 0, 0}}}, {}, R), ProtocolError) << "its own group";
  EXPECT_THROW(peer_counts(p0, {{4, {1, 0, 0, 0}}}, {}, R), ProtocolError) << "two survivors";
  EXPECT_THROW(peer_counts(p0, {{7, {1, 0, 0, 0}}}, {}, R), ProtocolError) << "no such process";
  EXPECT_THROW(peer_counts(p0, {{2, {1, 0, 0, 0}}, {2, {1, 0, 0, 0}}}, {}, R), ProtocolError) << "twice";
}

TEST(RestartExchange, EachProcessSendsOnlyTheChannelsThatRHas) {
  // p2 (rolled back) sent 3 messages to 0 and 1 to 1, none to 4: words for 0 and 1, none for 3 (its group) or 4.
  const std::vector<int> group_of{0, 0, 1, 1, 2};
  Process p2(2, group_of);
  for (int i = 0; i < 3; ++i) p2.send(0, 0, nullptr, 0);
  p2.send(1, 0, nullptr, 0);
  p2.send(3, 0, nullptr, 0);
  const std::vector<ChannelWords> c = exchange_counts(p2, {2, 3}, nullptr);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].peer, 0);
  EXPECT_EQ(c[0].words[0], 3u);
  EXPECT_EQ(c[0].words[3], 3u) << "a process of R: its restored counts are its view";
  EXPECT_EQ(c[1].peer, 1);
  EXPECT_EQ(c[1].words[0], 1u);
  // A survivor tells R only: its channel with 4 (another survivor) stays out of the exchange.
  Process p0(0, group_of);
  p0.send(2, 0, nullptr, 0);
  p0.send(4, 0, nullptr, 0);
  const std::vector<ChannelWords> s = exchange_counts(p0, {2, 3}, nullptr);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].peer, 2);
  EXPECT_EQ(s[0].words[2], 0u) << "no announced commit: no view";
}

TEST(RestartExchange, EachProcessReleasesItsFirstItemsAndReportsOnlyTheRest) {
  RecoveryWork a;  // process 0: blocked at phase 3, replays at 1 and 2, holds two orphans of phase 2
  a.phase = 3;
  a.replay_phases = {1, 2};
  a.orphan_phases = {2, 2};
  RecoveryWork b;  // process 1: blocked at phase 7
  b.phase = 7;
  RecoveryWork d;  // process 2: blocked at phase 1, nothing else
  d.phase = 1;
  EXPECT_EQ(lowest_orphan(b), kNoOrphan);
  const std::uint64_t low = std::min({lowest_orphan(a), lowest_orphan(b), lowest_orphan(d)});  // the allreduce
  ASSERT_EQ(low, 2u);
  const FirstRelease fa = first_release(0, a, low), fb = first_release(1, b, low), fd = first_release(2, d, low);
  ASSERT_EQ(fa.released.size(), 2u) << "its replays at 1 and 2 (phase <= 2)";
  EXPECT_EQ(fa.released[0].kind, ItemKind::Replay);
  EXPECT_EQ(fa.report, (std::vector<std::uint64_t>{1, 0, 3, 2, 2, 2})) << "its block at 3 and its two orphans";
  EXPECT_TRUE(fb.released.empty());
  EXPECT_EQ(fb.report, (std::vector<std::uint64_t>{1, 0, 7, 0}));
  ASSERT_EQ(fd.released.size(), 1u);
  EXPECT_TRUE(fd.report.empty()) << "nothing left for the coordinator: no message";
  // The coordinator, from the two reports, holds the rest until the orphans at 2 are notified: together the same
  // releases as a coordinator of every item (Coordinator::release's rule).
  CoordinatorInput in;
  decode_report(0, fa.report, in);
  decode_report(1, fb.report, in);
  ASSERT_EQ(in.items.size(), 2u);
  EXPECT_EQ(in.items[1].process, 1);
  EXPECT_EQ(in.items[1].phase, 7u);
  EXPECT_EQ(in.orphan_phases, (std::vector<std::uint64_t>{2, 2}));
  Coordinator c;
  c.begin(1, in.items, in.orphan_phases);
  EXPECT_TRUE(c.release().empty()) << "what was releasable went at once, at the processes";
  EXPECT_TRUE(c.notify(1, 2));
  EXPECT_TRUE(c.release().empty()) << "one orphan at 2 is still outstanding";
  EXPECT_TRUE(c.notify(1, 2));
  EXPECT_EQ(c.release().size(), 2u);
  EXPECT_TRUE(c.done());
  // No orphan anywhere: every item goes at once and nobody reports.
  RecoveryWork e;
  e.phase = 3;
  const FirstRelease all = first_release(0, e, kNoOrphan);
  EXPECT_EQ(all.released.size(), 1u);
  EXPECT_TRUE(all.report.empty());
}

TEST(RestartExchange, AMalformedReportIsAProtocolError) {
  CoordinatorInput in;
  EXPECT_THROW(decode_report(0, {2, 0, 3}, in), ProtocolError) << "truncated";
  EXPECT_THROW(decode_report(0, {1, 5, 3, 0}, in), ProtocolError) << "no such kind";
  EXPECT_THROW(decode_report(0, {0, 0, 9}, in), ProtocolError) << "words past its end";
  try {
    decode_report(4, {1, 0}, in);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("the report of rank 4 is truncated"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reprise::protocol
