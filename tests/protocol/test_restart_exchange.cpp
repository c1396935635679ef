// The restart exchange as data (PROTOCOL.md recovery steps 4-7): counts, peers, reports and the restart floor, as
// every process computes them from the words its peers sent it and the floors the coordinator's tree brings.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "protocol/job_floor.hpp"
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

TEST(RestartExchange, EachProcessReleasesItsItemsFromTheRestartFloorAlone) {
  RecoveryWork a;  // process 0: blocked at phase 3, replays at 1 and 2, holds orphans of phases 2 and 4
  a.phase = 3;
  a.replay_phases = {1, 2};
  a.orphan_phases = {2, 4};
  RecoveryWork b;  // process 1: blocked at phase 7, past every orphan
  b.phase = 7;
  RecoveryWork d;  // process 2: blocked at phase 1, nothing else
  d.phase = 1;
  EXPECT_EQ(lowest_orphan(b), kNoOrphan);
  const std::uint64_t low = std::min({lowest_orphan(a), lowest_orphan(b), lowest_orphan(d)});  // the allreduce
  ASSERT_EQ(low, 2u);
  FirstRelease fa = first_release(0, a, low), fb = first_release(1, b, low), fd = first_release(2, d, low);
  ASSERT_EQ(fa.released.size(), 2u) << "its replays at 1 and 2 (phase <= 2)";
  EXPECT_EQ(fa.released[0].kind, ItemKind::Replay);
  ASSERT_EQ(fa.held.size(), 1u) << "its block at 3";
  EXPECT_EQ(fa.report, (std::vector<std::uint64_t>{2, 4})) << "its orphans' phases";
  EXPECT_TRUE(fb.released.empty());
  ASSERT_EQ(fb.held.size(), 1u);
  EXPECT_TRUE(fb.report.empty()) << "no orphan: no report, whatever it holds";
  ASSERT_EQ(fd.released.size(), 1u);
  EXPECT_TRUE(fd.held.empty());
  // The coordinator, from the one report, raises the floor as the orphans are notified; each process releases what
  // it holds from the floor alone: together the releases of a coordinator of every item (Coordinator::release).
  Coordinator c;
  c.begin(1, {}, fa.report);
  EXPECT_EQ(c.lowest_orphan_phase(), std::optional<std::uint64_t>(2));
  EXPECT_TRUE(c.notify(1, 2));
  const std::uint64_t four = c.lowest_orphan_phase().value_or(kNoOrphan);
  ASSERT_EQ(four, 4u) << "the orphan at 4 is still outstanding";
  const auto a_items = release_held(fa.held, four);
  ASSERT_EQ(a_items.size(), 1u) << "process 0's block at 3";
  EXPECT_EQ(a_items[0].kind, ItemKind::Block);
  EXPECT_TRUE(release_held(fb.held, four).empty()) << "7 waits for the orphan at 4";
  EXPECT_TRUE(c.notify(1, 4));
  EXPECT_TRUE(c.done());
  const std::uint64_t last = c.lowest_orphan_phase().value_or(kNoOrphan);
  ASSERT_EQ(last, kNoOrphan);
  const auto b_items = release_held(fb.held, last);
  ASSERT_EQ(b_items.size(), 1u);
  EXPECT_EQ(b_items[0].process, 1);
  EXPECT_EQ(b_items[0].phase, 7u);
  // No orphan anywhere: every item goes at once, nobody reports, nothing waits for a floor.
  RecoveryWork e;
  e.phase = 3;
  const FirstRelease all = first_release(0, e, kNoOrphan);
  EXPECT_EQ(all.released.size(), 1u);
  EXPECT_TRUE(all.held.empty());
  EXPECT_TRUE(all.report.empty());
}

TEST(RestartExchange, AFloorReleasesTheHeldItemsAtOrBelowItInOrder) {
  std::vector<Coordinator::Item> held{{0, ItemKind::Replay, 5}, {0, ItemKind::Block, 9}, {0, ItemKind::Replay, 4}};
  const auto now = release_held(held, 5);
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(now[0].phase, 5u);
  EXPECT_EQ(now[1].phase, 4u);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].kind, ItemKind::Block);
  EXPECT_TRUE(release_held(held, 8).empty());
  EXPECT_EQ(release_held(held, 9).size(), 1u);
}

// The floor reaches every process once from the coordinator, whichever rank that is, and no process passes it to
// more than kFloorFanIn others: the coordinator sends at most 8 messages per rise at any job size.
TEST(RestartExchange, TheFloorsTreeReachesEveryProcessOnceFromTheCoordinator) {
  for (int ranks : {2, 9, 100, 1000}) {
    for (int root : {0, 1, ranks / 2, ranks - 1}) {
      std::vector<int> heard(static_cast<std::size_t>(ranks), 0);
      std::vector<int> frontier{root};
      heard[static_cast<std::size_t>(root)] = 1;
      std::size_t depth = 0;
      while (!frontier.empty() && depth < 64) {
        std::vector<int> next;
        for (int r : frontier) {
          const auto children = restart_floor_children(r, ranks, root);
          EXPECT_LE(children.size(), static_cast<std::size_t>(kFloorFanIn));
          for (int c : children) {
            ASSERT_GE(c, 0);
            ASSERT_LT(c, ranks);
            ++heard[static_cast<std::size_t>(c)];
            next.push_back(c);
          }
        }
        frontier = std::move(next);
        ++depth;
      }
      EXPECT_EQ(std::count(heard.begin(), heard.end(), 1), ranks) << ranks << " ranks from " << root;
      EXPECT_LE(depth, 5u) << "ceil(log8 N) hops, and one more to find no child";
    }
  }
}

}  // namespace
}  // namespace reprise::protocol
