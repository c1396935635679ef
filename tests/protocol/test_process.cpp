// The protocol core (src/protocol/process) on its own, then driven by the in-process simulator
// (protocol_sim.hpp) through hand-made scenarios from the papers and thousands of random programs and failures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "protocol/process.hpp"
#include "protocol/protocol_sim.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

std::uint64_t word(const Process::Outgoing& m) {
  std::uint64_t w = 0;
  std::memcpy(&w, m.payload.data(), sizeof w);
  return w;
}

// Groups: {0, 1} and {2}.
const std::vector<int> kTwoGroups = {0, 0, 1};

TEST(Protocol, PhaseGrowsOnlyAcrossGroups) {
  Process p0(0, kTwoGroups), p1(1, kTwoGroups), p2(2, kTwoGroups);
  std::uint64_t x = 7;
  const auto a = p2.send(0, 0, &x, 8);  // inter-group, phase 0
  EXPECT_TRUE(a.logged);
  EXPECT_EQ(a.header.seq, 1u);
  p0.deliver(2, a.header);
  EXPECT_EQ(p0.phase(), 1u) << "a message from another group: phase = its phase + 1";
  const auto b = p0.send(1, 0, &x, 8);  // intra-group
  EXPECT_FALSE(b.logged) << "intra-group messages are not logged";
  EXPECT_EQ(b.header.phase, 1u);
  p1.deliver(0, b.header);
  EXPECT_EQ(p1.phase(), 1u) << "from the same group: phase = max(phase, its phase)";
  p1.raise_phase(3);
  EXPECT_EQ(p1.phase(), 3u);
  p1.raise_phase(2);
  EXPECT_EQ(p1.phase(), 3u);
}

TEST(Protocol, DuplicatesAreDroppedAndGapsHeld) {
  Process p0(0, kTwoGroups), p2(2, kTwoGroups);
  std::uint64_t x = 1;
  const auto m1 = p2.send(0, 0, &x, 8), m2 = p2.send(0, 0, &x, 8);
  EXPECT_EQ(p0.arrival(2, m2.header), Process::Arrival::Early);
  EXPECT_THROW(p0.deliver(2, m2.header), ProtocolError);
  EXPECT_EQ(p0.arrival(2, m1.header), Process::Arrival::Deliver);
  p0.deliver(2, m1.header);
  EXPECT_EQ(p0.arrival(2, m1.header), Process::Arrival::Duplicate);
  p0.deliver(2, m2.header);
  EXPECT_EQ(p0.delivered(2), 2u);
}

TEST(Protocol, CommittedViewReleasesLogAndOrphanRecords) {
  Process p0(0, kTwoGroups), p2(2, kTwoGroups);
  for (std::uint64_t i = 1; i <= 4; ++i) p0.deliver(2, p2.send(0, 0, &i, 8).header);
  EXPECT_EQ(p2.log().live_entries(), 4u);
  EXPECT_TRUE(p0.orphan_phase(2, 3).has_value());
  p2.apply_view(0, View{3, 0});  // p0's group committed having delivered 3 from p2
  EXPECT_EQ(p2.log().live_entries(), 1u);
  EXPECT_NE(p2.log().find(0, 4), nullptr);
  p0.apply_view(2, View{0, 2});  // p2's group committed having sent 2 to p0
  EXPECT_FALSE(p0.orphan_phase(2, 2).has_value());
  EXPECT_TRUE(p0.orphan_phase(2, 3).has_value());
}

TEST(Protocol, CaptureAndRestoreIncludeTheLogSnapshot) {
  Process p2(2, kTwoGroups);
  std::uint64_t x = 11;
  p2.send(0, 0, &x, 8);
  const Capture c = p2.capture();
  x = 12;
  p2.send(0, 0, &x, 8);
  p2.raise_phase(5);
  p2.restore(c);
  EXPECT_EQ(p2.sent(0), 1u);
  EXPECT_EQ(p2.phase(), 0u);
  EXPECT_EQ(p2.log().live_entries(), 1u);
  // Re-executing the second send logs it again with the same seq.
  const auto again = p2.send(0, 0, &x, 8);
  EXPECT_EQ(again.header.seq, 2u);
  EXPECT_TRUE(again.logged);
}

TEST(Protocol, RecoveryReplaysBothWaysAndSuppressesOrphans) {
  // p2 (group 1) rolls back to a capture where it had sent 1 and delivered 1 from p0; meanwhile p0 delivered 3
  // from p2 and sent 4 to it. p0 owes p2 seqs 2..4; p2 owes p0 nothing (p0 delivered all it sent) and seqs 2..3
  // it re-executes are orphans (p0 delivered them).
  Process p0(0, kTwoGroups), p2(2, kTwoGroups);
  std::uint64_t x = 0;
  p2.deliver(0, p0.send(2, 0, &x, 8).header);
  p0.deliver(2, p2.send(0, 0, &x, 8).header);
  const Capture c2 = p2.capture();
  for (int i = 0; i < 3; ++i) p0.send(2, 0, &x, 8);
  for (int i = 0; i < 2; ++i) p0.deliver(2, p2.send(0, 0, &x, 8).header);
  p2.restore(c2);
  const auto w0 = p0.recover(false, {PeerCounts{2, true, p2.delivered(0), p2.sent(0), View{1, 1}}}, true);
  const auto w2 = p2.recover(true, {PeerCounts{0, false, p0.delivered(2), p0.sent(2), View{}}}, true);
  EXPECT_EQ(w0.replays.at(2), (std::vector<std::uint64_t>{2, 3, 4}));
  EXPECT_EQ(w0.orphan_phases.size(), 2u) << "p0 holds p2's seqs 2 and 3, which p2 will re-execute";
  EXPECT_TRUE(w2.replays.empty());
  EXPECT_TRUE(p0.send_blocked());
  EXPECT_TRUE(p2.blocked());
  EXPECT_TRUE(p0.ready(2).empty()) << "replays wait for the coordinator";
  // p2 got p0's seq 1 at phase 0 (p2: phase 1), p0 got p2's seq 1 at phase 1 (p0: phase 2), then sent 2..4.
  EXPECT_EQ(w0.replay_phases, (std::set<std::uint64_t>{2}));
  p0.release(ItemKind::Replay, 1);
  EXPECT_TRUE(p0.ready(2).empty()) << "released only up to phase 1";
  p0.release(ItemKind::Replay, 2);
  EXPECT_EQ(p0.ready(2).size(), 3u);
  EXPECT_TRUE(p2.reexecuting()) << "blocked until the coordinator's release";
  p2.release(ItemKind::Block, 0);
  EXPECT_TRUE(p2.reexecuting()) << "p0 has p2's seqs 2 and 3: p2 runs again where it had been";
  EXPECT_FALSE(p0.reexecuting()) << "p0 did not roll back";
  EXPECT_TRUE(p2.send(0, 0, &x, 8).orphan);
  EXPECT_TRUE(p2.reexecuting());
  EXPECT_TRUE(p2.send(0, 0, &x, 8).orphan);
  EXPECT_FALSE(p2.reexecuting()) << "past the last message p0 had: new ground";
  EXPECT_FALSE(p2.send(0, 0, &x, 8).orphan) << "seq 4 was never delivered: a real send";
}

TEST(Protocol, NewMessagesWaitBehindReplays) {
  Process p0(0, kTwoGroups), p2(2, kTwoGroups);
  for (std::uint64_t i = 1; i <= 2; ++i) p0.send(2, 0, &i, 8);
  p0.recover(false, {PeerCounts{2, true, 0, 0, View{}}}, true);
  std::uint64_t three = 3;
  const auto s = p0.send(2, 0, &three, 8);
  ASSERT_TRUE(p0.has_queue(2));
  p0.queue_new(2, s.header, 0, &three, 8);
  EXPECT_TRUE(p0.ready(2).empty());
  p0.release(ItemKind::Replay, 0);
  const auto out = p0.ready(2);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].replay && out[1].replay && !out[2].replay);
  EXPECT_EQ(word(out[0]), 1u);
  EXPECT_EQ(word(out[2]), 3u);
  EXPECT_EQ(out[2].header.seq, 3u);
}

// A survivor computes and receives while orphans are outstanding, so its phase may pass the restart floor: a new
// message to another group at a phase above the floor waits until the floor reaches it (a rolled-back receiver's
// receive from any rank would otherwise take it before its re-execution reached the orphan that precedes it
// causally; found with interpose_any_source_any_tag_across_checkpoints_* killed at a checkpoint). To its own group
// it goes at once; with no floor (no recovery, or every orphan notified) nothing waits.
TEST(Protocol, NewMessagesAboveTheRestartFloorWait) {
  Process p0(0, kTwoGroups), p2(2, kTwoGroups);
  std::uint64_t x = 5;
  const auto a = p2.send(0, 0, &x, 8);
  p0.deliver(2, a.header);
  p0.raise_phase(7);
  EXPECT_FALSE(p0.new_send_held(2, 7)) << "no floor: nothing waits";
  p0.limit_new_sends(4);
  EXPECT_TRUE(p0.new_send_held(2, 7)) << "phase 7 over floor 4, to another group";
  EXPECT_FALSE(p0.new_send_held(1, 7)) << "to its own group it goes";
  EXPECT_FALSE(p0.new_send_held(2, 4)) << "at the floor it goes";
  const auto s = p0.send(2, 0, &x, 8);
  EXPECT_EQ(s.header.phase, 7u);
  p0.queue_new(2, s.header, 0, &x, 8);
  EXPECT_TRUE(p0.ready(2).empty()) << "held while the floor is 4";
  EXPECT_TRUE(p0.awaiting_release());
  p0.limit_new_sends(6);
  EXPECT_TRUE(p0.ready(2).empty()) << "still below its phase";
  p0.limit_new_sends(7);
  const auto out = p0.ready(2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].replay);
  EXPECT_EQ(out[0].header.seq, s.header.seq);
  p0.limit_new_sends(~std::uint64_t{0});
  EXPECT_FALSE(p0.awaiting_release());
}

TEST(Protocol, OwedEntryMissingFromTheLogIsAnError) {
  Process p0(0, kTwoGroups);
  std::uint64_t x = 0;
  p0.send(2, 0, &x, 8);
  p0.send(2, 0, &x, 8);
  p0.apply_view(2, View{2, 0});  // GC'd: p2's group committed having delivered both
  // ... yet p2 claims it delivered none: its data came from somewhere older than its committed version.
  EXPECT_THROW(p0.recover(false, {PeerCounts{2, true, 0, 0, View{}}}, true), ProtocolError);
}

// Seed 000, Figures 1-2: m7 (phase 2) must not be replayed before m3's notification (an orphan at phase 1);
// m1 (phase 0) goes at once.
TEST(ProtocolCoordinator, ReleasesInPhaseOrderAfterNotifications) {
  Coordinator c;
  c.begin(1, {{0, ItemKind::Replay, 0}, {4, ItemKind::Replay, 2}, {2, ItemKind::Block, 1}, {3, ItemKind::Block, 2}},
          {1});
  auto first = c.release();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].process, 0);
  EXPECT_EQ(first[1].process, 2) << "an item at the orphan's own phase is not held back";
  EXPECT_FALSE(c.done());
  EXPECT_FALSE(c.notify(0, 1)) << "a stale epoch's Notify is ignored";
  EXPECT_TRUE(c.release().empty());
  EXPECT_TRUE(c.notify(1, 1));
  const auto second = c.release();
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].phase, 2u);
  EXPECT_TRUE(c.done());
  EXPECT_THROW(c.notify(1, 1), ProtocolError) << "a Notify matching no orphan";
}

// ---- the simulator ----------------------------------------------------------------------------------------------

using sim::Op;
using sim::Program;
using sim::Sim;

Op S(int d) {
  return Op{'S', d, {}, 0};
}
Op R(int s) {
  return Op{'R', s, {}, 0};
}
Op A(std::vector<int> s) {
  return Op{'A', -1, std::move(s), 0};
}
Op C(std::uint64_t v) {
  return Op{'C', -1, {}, v};
}

// Runs `prog` without failure and with `setup` injecting failures, for `seeds` delay schedules; returns the
// problems of the first bad schedule (empty: every schedule matched the failure-free run).
std::vector<std::string> run_demo(const Program& prog, int seeds, const std::function<void(Sim&, const Sim&)>& setup) {
  for (int sd = 0; sd < seeds; ++sd) {
    Sim ref(prog, static_cast<std::uint64_t>(sd));
    ref.run();
    EXPECT_TRUE(ref.check(ref).empty());
    Sim s(prog, static_cast<std::uint64_t>(sd) + 1, &ref);
    setup(s, ref);
    s.run();
    auto res = s.check(ref);
    if (s.failures() == 0) res.push_back("no failure was injected");
    if (!res.empty()) {
      res.insert(res.begin(), "schedule " + std::to_string(sd));
      return res;
    }
  }
  return {};
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// Seed 000 Figures 1-2 as in the model: G0={p0} G1={p1,p2,p3} G2={p4}, a wildcard receive at p2 (m2 then m8);
// p3 fails at the end and G1 rolls back to its start.
TEST(ProtocolSim, SeedZeroFigureOneWithWildcardReceive) {
  Program p{{0, 1, 1, 1, 2}, {{S(1)}, {R(0), S(2)}, {A({1, 3}), S(4), A({1, 3})}, {R(4), S(2)}, {R(2), S(3)}}};
  const auto res = run_demo(p, 300, [](Sim& s, const Sim& ref) { s.fail_at(ref.now() + 50, {3}); });
  EXPECT_TRUE(res.empty()) << join(res);
}

// Seed 000 section 5.2 (Figures 1-2): 8 processes in 3 groups, G1={p0,p1,p2} G2={p3,p4,p5} G3={p6,p7}. m1
// (p0->p3) and m7 (p7->p5) are logged inter-group messages, m3 (p4->p6) becomes an orphan when G2 rolls back; m3
// depends on m1 (through m2) and m7 on m3 (through m4). p4 receives m2 and m8 with wildcard receives, so replaying
// m7 before m3's notification would let m8 overtake m2. p5 fails at the end: m1 is replayed at once, m7 only after
// the re-executed m3 was notified to the coordinator.
TEST(ProtocolSim, SeedZeroFigureOneEightProcessesThreeGroups) {
  Program p{{0, 0, 0, 1, 1, 1, 2, 2},
            {{S(3)},                        // p0: m1
             {S(2)},                        // p1: intra-group traffic in G1
             {R(1)},                        // p2
             {R(0), S(4)},                  // p3: m1, then m2
             {A({3, 5}), S(6), A({3, 5})},  // p4: m2, m3, m8
             {R(7), S(4)},                  // p5: m7, then m8
             {R(4), S(7)},                  // p6: m3, then m4
             {R(6), S(5)}}};                // p7: m4, then m7
  const auto res = run_demo(p, 300, [](Sim& s, const Sim& ref) { s.fail_at(ref.now() + 50, {5}); });
  EXPECT_TRUE(res.empty()) << join(res);
}

// The model's barrier case: G0={p0,p1} G1={p2}. Without the barrier taking the group's maximum phase, a
// rolled-back member waits for an orphan only re-sent after a barrier it must join.
TEST(ProtocolSim, BarrierTakesTheGroupMaximumPhase) {
  Program p{{0, 0, 1}, {{R(2), C(1), C(2)}, {C(1), C(2), S(2)}, {S(0), R(1)}}};
  const auto res = run_demo(p, 300, [](Sim& s, const Sim&) {
    s.on_barrier = [](Sim& x, int g, std::uint64_t v) {
      if (g == 0 && v == 2 && x.failures() == 0) x.fail_at(x.now() + 2.4, {0});
    };
  });
  EXPECT_TRUE(res.empty()) << join(res);
}

// Four singleton groups; p0 and p1 fail together: rolled-back senders owe survivors from their restored log.
TEST(ProtocolSim, RolledBackSendersReplayFromTheirSnapshot) {
  Program p{{0, 1, 2, 3}, {{S(1), R(3), C(1)}, {R(0), S(2)}, {S(3), R(1)}, {R(2), S(0)}}};
  const auto res = run_demo(p, 300, [](Sim& s, const Sim& ref) { s.fail_at(ref.now() + 50, {0, 1}); });
  EXPECT_TRUE(res.empty()) << join(res);
}

// The model's orphan-record case: p2 fails (its replacement restores its orphan record from the capture), later
// p0 fails and p2 must count p0's orphan.
TEST(ProtocolSim, OrphanRecordIsPartOfTheCapture) {
  Program p{{0, 0, 1, 1}, {{S(2), S(1)}, {R(0)}, {R(0), C(1), S(3)}, {C(1), R(2)}}};
  const auto res = run_demo(p, 300, [](Sim& s, const Sim& ref) {
    s.fail_at(ref.now() + 50, {2});
    s.fail_at(ref.now() + 100, {0});
  });
  EXPECT_TRUE(res.empty()) << join(res);
}

// ---- golden scenarios from seeds 001 and 003 (HC3I, Monnet et al.): the same executions under HydEE ----------
// HC3I rolls other clusters back in cascade (communication-induced checkpoints, rollback alerts); HydEE confines
// the rollback to the failed group: survivors replay what it had not delivered at its committed version, and its
// re-executed sends that survivors already hold are suppressed (orphans, notified to the coordinator).

using MsgId = Sim::MsgId;
struct Golden {
  std::vector<std::set<int>> rolled_back;  // one set per failure
  std::vector<MsgId> replays, orphans, duplicates;
};

// Runs `prog` under `seeds` delay schedules with `setup`'s failures: every run must match the failure-free one and
// roll back, replay and suppress exactly what `want` says (each message once, in any order).
std::string run_golden(const Program& prog, int seeds, const std::function<void(Sim&, const Sim&)>& setup,
                       const Golden& want) {
  auto sorted = [](std::vector<MsgId> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  auto show = [](const std::vector<MsgId>& v) {
    std::string s;
    for (const auto& [a, b, q] : v) s += " P" + std::to_string(a) + "->P" + std::to_string(b) + "#" + std::to_string(q);
    return s.empty() ? std::string(" none") : s;
  };
  for (int sd = 0; sd < seeds; ++sd) {
    Sim ref(prog, static_cast<std::uint64_t>(sd));
    ref.run();
    Sim s(prog, static_cast<std::uint64_t>(sd) + 1, &ref);
    setup(s, ref);
    s.run();
    std::string bad = join(s.check(ref));
    auto sets = [](const std::vector<std::set<int>>& v) {
      std::string s;
      for (const auto& r : v) {
        s += " {";
        for (int x : r) s += " P" + std::to_string(x);
        s += " }";
      }
      return s;
    };
    if (s.rolled_back_sets() != want.rolled_back)
      bad += "rolled back" + sets(s.rolled_back_sets()) + " (expected" + sets(want.rolled_back) + ")\n";
    const std::pair<const char*, std::pair<std::vector<MsgId>, std::vector<MsgId>>> journals[] = {
        {"replays", {s.replay_journal(), want.replays}},
        {"orphans", {s.orphan_journal(), want.orphans}},
        {"duplicates", {s.duplicate_journal(), want.duplicates}}};
    for (const auto& [what, got_want] : journals)
      if (sorted(got_want.first) != sorted(got_want.second))
        bad += std::string(what) + ":" + show(sorted(got_want.first)) + " (expected" + show(sorted(got_want.second)) +
               ")\n";
    if (!bad.empty()) return "schedule " + std::to_string(sd) + ": " + bad;
  }
  return "";
}

// Seed 001, Figure 4 (three clusters): m1, m2 C1->C2 delivered before C2's checkpoint, then m3 C2->C3, m4 C1->C3,
// m5 C3->C1; a node of C2 fails. HC3I rolls C3 back (m3 would be a ghost), then C1 (m5), and C1 re-sends m4.
// Here C1 = {p0}, C2 = {p1, p2}, C3 = {p3}: only C2 rolls back; m3 is an orphan (p3 keeps it, p1's re-execution
// does not send it again), nothing is replayed (C2's checkpoint holds m1 and m2), and C2's intra-group message is
// simply sent again.
TEST(ProtocolGolden, SeedOneFigureFourOnlyTheFailedClusterRollsBack) {
  Program p{{0, 1, 1, 2},
            {{S(1), S(1), S(3), R(3)},        // p0: m1, m2, m4, m5
             {R(0), R(0), C(1), S(3), S(2)},  // p1: m1, m2, checkpoint, m3, intra-group
             {C(1), R(1)},                    // p2
             {R(1), R(0), S(0)}}};            // p3: m3, m4, m5
  const std::string bad = run_golden(
      p, 100, [](Sim& s, const Sim& ref) { s.fail_at(ref.now() + 50, {2}); }, Golden{{{1, 2}}, {}, {{1, 3, 1}}, {}});
  EXPECT_TRUE(bad.empty()) << bad;
}

// Seed 003, Figure 3.11: site 2 never sent to site 1; m1 and m2 (site 1 -> site 2) were taken into account after
// site 2's checkpoint; a node of site 2 fails. Site 1 does not roll back and replays both. Here site 1 = {p0},
// site 2 = {p1, p2}; a variant with m1 delivered before the checkpoint replays only m2.
TEST(ProtocolGolden, SeedThreeFigureElevenSurvivorsReplayWhatTheCheckpointLacks) {
  const auto fail_p1 = [](Sim& s, const Sim& ref) { s.fail_at(ref.now() + 50, {1}); };
  Program after{{0, 1, 1}, {{S(1), S(1)}, {C(1), R(0), R(0)}, {C(1)}}};
  std::string bad = run_golden(after, 100, fail_p1, Golden{{{1, 2}}, {{0, 1, 1}, {0, 1, 2}}, {}, {}});
  EXPECT_TRUE(bad.empty()) << bad;
  Program between{{0, 1, 1}, {{S(1), S(1)}, {R(0), C(1), R(0)}, {C(1)}}};
  bad = run_golden(between, 100, fail_p1, Golden{{{1, 2}}, {{0, 1, 2}}, {}, {}});
  EXPECT_TRUE(bad.empty()) << bad;
}

// Seed 003, Figures 3.12 and 3.13: three sites; site 1 exchanges with site 2, sends m4 to site 3 and receives m5
// from it. Site 3 fails (3.12): HC3I rolls site 1 back too (m5 would be a ghost) and site 1 re-sends m4. Then site
// 2 fails (3.13): HC3I rolls every site back. Here site 1 = {p0}, site 2 = {p1}, site 3 = {p2, p3}: each failure
// rolls back its own site only; m4 is replayed and m5 suppressed as an orphan, then p0's message to p1 is
// replayed and p1's answer suppressed.
TEST(ProtocolGolden, SeedThreeFiguresTwelveThirteenNoCascade) {
  Program p{{0, 1, 2, 2},
            {{S(1), R(1), S(2), R(2)},  // p0: to site 2, its answer, m4, m5
             {R(0), S(0)},              // p1
             {C(1), R(0), S(0)},        // p2: checkpoint, m4, m5
             {C(1)}}};                  // p3
  std::string bad = run_golden(
      p, 100, [](Sim& s, const Sim& ref) { s.fail_at(ref.now() + 50, {3}); },
      Golden{{{2, 3}}, {{0, 2, 1}}, {{2, 0, 1}}, {}});
  EXPECT_TRUE(bad.empty()) << "figure 3.12: " << bad;
  bad = run_golden(
      p, 100,
      [](Sim& s, const Sim& ref) {
        s.fail_at(ref.now() + 50, {3});
        s.fail_at(ref.now() + 100, {1});
      },
      Golden{{{2, 3}, {1}}, {{0, 2, 1}, {0, 1, 1}}, {{2, 0, 1}, {1, 0, 1}}, {}});
  EXPECT_TRUE(bad.empty()) << "figure 3.13: " << bad;
}

// Random send-deterministic programs (6-9 processes, 2-4 groups, ring/stencil/random/intra/cross rounds, lagged
// inter-group receives, random group checkpoints) under every failure scenario of the model.
enum class Scenario { Single, Double, Sequential, DuringRecovery, BeforeCommit, AfterCommit };
const char* name(Scenario s) {
  const char* n[] = {"single", "double", "sequential", "during-recovery", "before-commit", "after-commit"};
  return n[static_cast<int>(s)];
}

void inject(Sim& s, std::mt19937_64& rng, Scenario scen, double T) {
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  const int N = static_cast<int>(s.P.size());
  auto any = [&] { return std::uniform_int_distribution<int>(0, N - 1)(rng); };
  auto other = [&](int a) {
    std::vector<int> c;
    for (int i = 0; i < N; ++i)
      if (s.P[static_cast<std::size_t>(i)].core->group() != s.P[static_cast<std::size_t>(a)].core->group())
        c.push_back(i);
    return c[std::uniform_int_distribution<std::size_t>(0, c.size() - 1)(rng)];
  };
  switch (scen) {
    case Scenario::Single:
      s.fail_at(uni(0, T), {any()});
      break;
    case Scenario::Double: {
      const int a = any();
      s.fail_at(uni(0, T), {a, other(a)});
      break;
    }
    case Scenario::Sequential: {
      const int a = any();
      const double t1 = uni(0, T * .7);
      s.fail_at(t1, {a});
      s.fail_at(t1 + uni(2, std::max(2.001, T * .5)), {other(a)});
      break;
    }
    case Scenario::DuringRecovery: {
      s.fail_at(uni(0, T), {any()});
      const int second = any();
      const double delay = uni(0.01, 3);
      s.on_recovery = [second, delay](Sim& x) {
        if (x.failures() == 1) x.fail_at(x.now() + delay, {second});
      };
      break;
    }
    case Scenario::BeforeCommit:
    case Scenario::AfterCommit: {
      const int target = std::uniform_int_distribution<int>(1, 3)(rng);
      const bool before = scen == Scenario::BeforeCommit;
      auto count = std::make_shared<int>(0);
      const double r = uni(0, 1), d = before ? uni(0, 0.5) : 1e-6;
      const int who_any = any();
      auto hook = [=](Sim& x, int g, std::uint64_t) {
        if (++*count == target && x.failures() == 0) {
          const auto& m = x.members()[static_cast<std::size_t>(g)];
          const int victim = r < .7 ? m[static_cast<std::size_t>(who_any) % m.size()] : who_any;
          x.fail_at(x.now() + d, {victim});
        }
      };
      (before ? s.on_barrier : s.on_commit) = hook;
      break;
    }
  }
}

TEST(ProtocolSim, RandomProgramsAndFailuresMatchTheFailureFreeRun) {
  const int seeds = 400;  // per scenario; 2400 programs, each run without and with failures
  std::size_t total = 0, replayed = 0, rollbacks = 0, skipped = 0;
  for (Scenario scen : {Scenario::Single, Scenario::Double, Scenario::Sequential, Scenario::DuringRecovery,
                        Scenario::BeforeCommit, Scenario::AfterCommit}) {
    int runs = 0, bad = 0;
    std::string first;
    for (int sd = 0; sd < seeds; ++sd) {
      std::mt19937_64 rng(static_cast<std::uint64_t>(sd) * 7919 + static_cast<std::uint64_t>(scen));
      const int N = std::uniform_int_distribution<int>(6, 9)(rng);
      const int G = std::uniform_int_distribution<int>(2, std::min(4, N / 2))(rng);
      const int rounds = std::uniform_int_distribution<int>(5, 12)(rng);
      const Program prog = sim::generate(rng, N, G, rounds);
      Sim ref(prog, static_cast<std::uint64_t>(sd));
      ref.run();
      ASSERT_TRUE(ref.check(ref).empty()) << "failure-free run of seed " << sd;
      ASSERT_EQ(ref.stale_log_entries(), 0u) << "the log keeps entries every receiver's commit covers";
      Sim s(prog, static_cast<std::uint64_t>(sd) + 100003, &ref);
      inject(s, rng, scen, ref.now());
      s.run();
      if (s.failures() == 0) continue;
      ++runs;
      replayed += s.replayed();
      skipped += s.skipped();
      rollbacks += s.rollbacks();
      auto res = s.check(ref);
      if (const std::size_t stale = s.stale_log_entries())  // invariant 5, once every view has arrived
        res.push_back(std::to_string(stale) + " log entries covered by their receiver's committed view");
      if (!res.empty() && bad++ == 0)
        first = "seed " + std::to_string(sd) + " (" + std::to_string(prog.size()) + " steps): " + join(res);
    }
    total += static_cast<std::size_t>(runs);
    std::printf("%-16s runs %d bad %d\n", name(scen), runs, bad);
    EXPECT_EQ(bad, 0) << name(scen) << ": " << first;
    EXPECT_GT(runs, seeds / 2) << "most programs must see a failure";
  }
  std::printf(
      "%zu runs with failures, %zu messages replayed, %zu re-executed sends skipped (their rolled-back "
      "receivers had them), %zu process rollbacks\n",
      total, replayed, skipped, rollbacks);
  EXPECT_GT(skipped, 0u) << "the programs must exercise re-executed sends between two rolled-back groups";
}

}  // namespace
}  // namespace reprise::protocol
