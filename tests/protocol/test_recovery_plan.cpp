// The recovery plan: from what every survivor holds, the version each group rolls back to and who fetches what
// from whom; the unrecoverable patterns with their messages.
#include <gtest/gtest.h>

#include <set>

#include "protocol/recovery_plan.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

// 8 ranks, 2 per node: buddies 0->2, 1->3, ..., 6->0, 7->1.
Layout eight() {
  return make_layout(emulated_node_keys(8, 2), {});
}

Holdings holdings_all(const std::vector<VersionRecord>& records) {
  Holdings h;
  for (int r = 0; r < 8; ++r) h[r].own = h[r].at_buddy = records;
  return h;
}

std::string unrecoverable(const std::vector<int>& failed, const Holdings& h, bool files) {
  try {
    plan_recovery(eight(), failed, h, files);
  } catch (const UnrecoverableFailure& e) {
    return e.what();
  }
  return "";
}

TEST(RecoveryPlan, FailedRankComesFromItsBuddyAtTheNewestCommonVersion) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[3].own = {};                // rank 3 failed: nothing of its own
  h[5].own = {{10, 10, true}};  // a survivor that never stored 20
  const RecoveryPlan p = plan_recovery(eight(), {3}, h, false);
  EXPECT_EQ(p.version, 10u);
  EXPECT_EQ(p.failed, (std::vector<int>{3}));
  EXPECT_EQ(p.source[3], DataSource::Buddy);
  EXPECT_EQ(p.source[5], DataSource::Own);
  EXPECT_EQ(p.rolled_back.size(), 8u);
}

TEST(RecoveryPlan, OwnerAndBuddyLostWithoutFilesIsUnrecoverableAndNamesThem) {
  auto h = holdings_all({{10, 10, true}});
  h[0].own = {};
  h[0].at_buddy = {};  // rank 0's buddy, rank 2, failed too
  h[2].own = {};
  const std::string e = unrecoverable({0, 2}, h, false);
  EXPECT_NE(e.find("ranks 0 and 2"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 and its buddy rank 2 were lost together"), std::string::npos) << e;
  EXPECT_NE(e.find("REPRISE_DIR"), std::string::npos) << e;
}

TEST(RecoveryPlan, OwnerAndBuddyLostWithFilesComesFromTheFiles) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[0].at_buddy = {};                            // buddy 2 failed
  h[0].own = {{10, 10, true}, {20, 10, false}};  // rank 0's files, read by a survivor
  h[2].own = {};
  const RecoveryPlan p = plan_recovery(eight(), {0, 2}, h, true);
  EXPECT_EQ(p.version, 20u);
  EXPECT_EQ(p.source[0], DataSource::Own);
  EXPECT_EQ(p.source[2], DataSource::Buddy);
}

TEST(RecoveryPlan, IncompleteChainsAreNotRestorable) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}, {30, 20, false}});
  h[4].own = {};
  h[4].at_buddy = {{10, 10, true}, {30, 20, false}};  // 20 never reached rank 4's buddy
  EXPECT_EQ(plan_recovery(eight(), {4}, h, false).version, 10u);
}

TEST(RecoveryPlan, NoCommonVersionIsUnrecoverable) {
  auto h = holdings_all({{10, 10, true}});
  h[1].own = {{20, 20, true}};
  const std::string e = unrecoverable({6}, h, false);
  EXPECT_NE(e.find("unrecoverable failure of rank 6: no version is restorable on every rank (rank 0: 10..10; rank 1: "
                   "20..20; rank 2: 10..10"),
            std::string::npos)
      << e;
  // A relaunch (no failed rank) says what it is itself.
  const std::string relaunch = unrecoverable({}, h, true);
  EXPECT_EQ(relaunch.rfind("no version is restorable on every rank (rank 0: 10..10; rank 1: 20..20", 0), 0u)
      << relaunch;
}

TEST(RecoveryPlan, FailureBeforeAnyCheckpointReachedTheBuddyStartsOver) {
  // Rank 5's buddy (7) survived and holds nothing of it: rank 5's group never committed, so every rank starts
  // over from its initial state, even though the other ranks hold version 10 locally.
  auto h = holdings_all({{10, 10, true}});
  h[5].own = {};
  h[5].at_buddy = {};
  const RecoveryPlan p = plan_recovery(eight(), {5}, h, false);
  EXPECT_TRUE(p.from_start);
  EXPECT_EQ(p.rolled_back.size(), 8u);
  // An incomplete chain at the buddy counts as nothing.
  h[5].at_buddy = {{20, 10, false}};
  EXPECT_TRUE(plan_recovery(eight(), {5}, h, false).from_start);
  // With a version at the buddy, the normal plan.
  h[5].at_buddy = {{10, 10, true}};
  const RecoveryPlan q = plan_recovery(eight(), {5}, h, false);
  EXPECT_FALSE(q.from_start);
  EXPECT_EQ(q.version, 10u);
  EXPECT_EQ(q.source[5], DataSource::Buddy);
}

TEST(RecoveryPlan, OwnerAndBuddyLostTogetherStartsOverOnlyWhenAnotherFailedRankNeverCommitted) {
  // 0 and its buddy 2 are lost with their data; 5 never committed. Starting over loses nothing committed, so the
  // plan starts over rather than failing the job.
  auto h = holdings_all({{10, 10, true}});
  for (int r : {0, 2, 5}) h[static_cast<std::size_t>(r)].own = {};
  h[0].at_buddy = {};  // its buddy 2 failed
  h[5].at_buddy = {};
  EXPECT_TRUE(plan_recovery(eight(), {0, 2, 5}, h, false).from_start);
  h[5].at_buddy = {{10, 10, true}};
  const std::string e = unrecoverable({0, 2, 5}, h, false);
  EXPECT_NE(e.find("rank 0 and its buddy rank 2 were lost together"), std::string::npos) << e;
}

// Group rollback: each group with a failed rank is planned alone; the others do not roll back.
TEST(GroupRecoveryPlan, OnlyTheFailedGroupRollsBackToItsOwnNewestVersion) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[5].own = {};                                      // rank 5 (group 2 = ranks 4, 5) failed
  h[5].at_buddy = {{10, 10, true}, {20, 10, false}};  // its buddy (7) holds 10 and 20
  h[1].own = {{10, 10, true}};                        // group 0 never took 20: it does not matter here
  const RecoveryPlan p = plan_group_recovery(eight(), {5}, h, false);
  EXPECT_TRUE(p.partial);
  EXPECT_EQ(p.rolled_back, (std::vector<int>{4, 5}));
  EXPECT_EQ(p.version_of[4], 20u);
  EXPECT_EQ(p.version_of[5], 20u);
  EXPECT_EQ(p.source[5], DataSource::Buddy);
  EXPECT_EQ(p.source[4], DataSource::Own);
  EXPECT_FALSE(p.starts_over[5]);
  // The same holdings with every rank rolling back: group 0 limits the common version to 10.
  EXPECT_EQ(plan_recovery(eight(), {5}, h, false).version, 10u);
}

TEST(GroupRecoveryPlan, GroupsArePlannedAloneAndOnlyANeverCommittedGroupStartsOver) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[2].own = {};
  h[2].at_buddy = {{10, 10, true}};  // group 1: 20 never reached rank 2's buddy -> version 10
  h[6].own = {};
  h[6].at_buddy = {};  // group 3: nothing of rank 6 at its surviving buddy -> starts over
  const RecoveryPlan p = plan_group_recovery(eight(), {6, 2}, h, false);
  EXPECT_EQ(p.failed, (std::vector<int>{2, 6}));
  EXPECT_EQ(p.rolled_back, (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(p.version_of[2], 10u);
  EXPECT_EQ(p.version_of[3], 10u);
  EXPECT_FALSE(p.starts_over[3]);
  EXPECT_TRUE(p.starts_over[6]);
  EXPECT_TRUE(p.starts_over[7]);
  EXPECT_FALSE(p.from_start);  // the job as a whole does not start over
}

TEST(GroupRecoveryPlan, AGroupStillReexecutingRollsBackAgain) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[7].own = {};
  h[7].at_buddy = {{10, 10, true}, {20, 10, false}};
  h[2].own = {{10, 10, true}};  // group 1 (ranks 2, 3) rolled back earlier, to 10, and re-executes
  h[3].own = {{10, 10, true}};
  const RecoveryPlan p = plan_group_recovery(eight(), {7}, h, false, {1});
  EXPECT_EQ(p.rolled_back, (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(p.version_of[2], 10u);  // its own newest version again
  EXPECT_EQ(p.version_of[6], 20u);
  EXPECT_FALSE(p.starts_over[2]);
  // A re-executing group that committed nothing since it started over starts over again (nothing is lost).
  h[2].own = h[2].at_buddy = {};
  h[3].own = {{10, 10, true}};  // drained here, not yet at rank 2: never committed
  h[3].at_buddy = {};
  const RecoveryPlan q = plan_group_recovery(eight(), {7}, h, false, {1});
  EXPECT_TRUE(q.starts_over[2]);
  EXPECT_TRUE(q.starts_over[3]);
  EXPECT_FALSE(q.starts_over[6]);
}

// A failure during the data phase of a recovery: the replacement of rank 2 (group 1) had not got its chain back
// from its buddy (rank 4) when rank 7 failed. Group 1 rolls back again (it was still recovering); rank 2's chain
// comes from its buddy again, the other member's from its own store.
TEST(GroupRecoveryPlan, AnInterruptedReplacementGetsItsChainFromItsBuddyAgain) {
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[2].own = {{10, 10, true}};  // only part of its chain arrived
  h[2].replacing = true;
  h[7].own = {};
  const RecoveryPlan p = plan_group_recovery(eight(), {7}, h, false, {1});
  EXPECT_EQ(p.rolled_back, (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(p.version_of[2], 20u);
  EXPECT_EQ(p.source[2], DataSource::Buddy);  // alive, but it lacks 20
  EXPECT_EQ(p.source[3], DataSource::Own);
  EXPECT_EQ(p.source[7], DataSource::Buddy);
  EXPECT_FALSE(p.starts_over[2]);
  // The same with every rank rolling back.
  const RecoveryPlan q = plan_recovery(eight(), {7}, h, false);
  EXPECT_EQ(q.version, 20u);
  EXPECT_EQ(q.source[2], DataSource::Buddy);
  EXPECT_EQ(q.source[0], DataSource::Own);
}

// The message of plan_group_recovery's UnrecoverableFailure ("" when it plans).
std::string group_unrecoverable(const std::vector<int>& failed, const Holdings& h, bool files,
                                const std::set<int>& also) {
  try {
    (void)plan_group_recovery(eight(), failed, h, files, also);
  } catch (const UnrecoverableFailure& e) {
    return e.what();
  }
  return "";
}

// The replacement of rank 2 had received nothing yet when its buddy, rank 4, failed (group 1 rolls back again).
Holdings replacement_without_its_chain() {
  auto h = holdings_all({{10, 10, true}});
  h[2].own = {};
  h[2].replacing = true;
  h[2].at_buddy = {};
  h[4].own = {};
  return h;
}

TEST(GroupRecoveryPlan, AReplacementWhoseBuddyFailedBeforeItGotItsChainIsUnrecoverable) {
  auto h = replacement_without_its_chain();
  const std::string lost = group_unrecoverable({4}, h, false, {1});
  EXPECT_NE(lost.find("replacement rank 2 had not got its checkpoints back when its buddy rank 4 failed"),
            std::string::npos)
      << lost;
  EXPECT_NE(lost.find("REPRISE_DIR"), std::string::npos) << lost;
  // With a persistent level, rank 2's files (reported as its own records) bring it back.
  h[2].own = {{10, 10, true}};
  const RecoveryPlan p = plan_group_recovery(eight(), {4}, h, true, {1});
  EXPECT_EQ(p.version_of[2], 10u);
  EXPECT_EQ(p.source[2], DataSource::Own);
}

// The same replacement with a persistent level whose files hold nothing of rank 2 yet (written behind the commit,
// and rank 2 died before its writer got to them): read by a survivor, they prove that nobody relies on a version of
// rank 2, so its group starts over (rank 4's group restores from rank 4's buddy as usual); unread, they prove
// nothing.
TEST(GroupRecoveryPlan, AnInterruptedReplacementWithNothingInItsFilesStartsOverWhenTheyWereRead) {
  auto h = replacement_without_its_chain();
  h[2].files_read = true;
  const RecoveryPlan p = plan_group_recovery(eight(), {4}, h, true, {1});
  EXPECT_EQ(p.rolled_back, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_TRUE(p.starts_over[2]);
  EXPECT_TRUE(p.starts_over[3]);
  EXPECT_FALSE(p.starts_over[4]);
  EXPECT_EQ(p.version_of[4], 10u);
  EXPECT_EQ(p.source[4], DataSource::Buddy);
  h[2].files_read = false;  // files that were not read prove nothing
  const std::string lost = group_unrecoverable({4}, h, true, {1});
  EXPECT_NE(lost.find("replacement rank 2 had not got its checkpoints back when its buddy rank 4 failed and rank 2 "
                      "has no intact file either"),
            std::string::npos)
      << lost;
}

TEST(GroupRecoveryPlan, AFailedRankWhoseBuddyIsAnInterruptedReplacementIsLost) {
  // Rank 0 failed; its buddy (rank 2) is a replacement that had not received rank 0's versions again: its empty
  // copy proves nothing, so rank 0's data are lost (not "never committed").
  auto h = holdings_all({{10, 10, true}});
  h[2].replacing = true;
  h[0].own = {};
  h[0].at_buddy = {};
  try {
    (void)plan_group_recovery(eight(), {0}, h, false, {1});
    FAIL() << "expected UnrecoverableFailure";
  } catch (const UnrecoverableFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 failed before its buddy rank 2, a replacement, got its checkpoints"),
              std::string::npos)
        << e.what();
  }
  // The same with a buddy that is not recovering: rank 0's group never committed and starts over.
  h[2].replacing = false;
  EXPECT_TRUE(plan_group_recovery(eight(), {0}, h, false, {1}).starts_over[0]);
}

TEST(GroupRecoveryPlan, OwnerAndBuddyLostTogetherIsStillUnrecoverable) {
  auto h = holdings_all({{10, 10, true}});
  h[0].own = {};
  h[0].at_buddy = {};  // rank 0's buddy, rank 2, failed too
  h[2].own = {};
  try {
    (void)plan_group_recovery(eight(), {0, 2}, h, false);
    FAIL() << "expected UnrecoverableFailure";
  } catch (const UnrecoverableFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 and its buddy rank 2 were lost together"), std::string::npos)
        << e.what();
  }
}

// Rank 0 and its buddy rank 2 killed before rank 0's files held anything (a loaded machine: its first version not
// yet acknowledged, or not yet written behind its commit): rank 0's files, read by a survivor, hold nothing. Every
// version anybody relies on is in the files (no view, no job floor passes them), so its group starts over, the
// others' plans as usual. Unread files (a folder the survivor cannot reach) prove nothing: unrecoverable.
TEST(GroupRecoveryPlan, OwnerAndBuddyLostBeforeAnyCommitStartOverWhenTheFilesProveIt) {
  auto h = holdings_all({{10, 10, true}});
  h[0].own = {};
  h[0].at_buddy = {};
  // (rank 1 holds its version 10, acknowledged by its buddy; rank 0's was not: the group never committed it)
  h[0].files_read = true;
  h[2].own = {};  // rank 2's buddy, rank 4, holds its version 10
  const RecoveryPlan p = plan_group_recovery(eight(), {0, 2}, h, true);
  EXPECT_EQ(p.rolled_back, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(p.starts_over[0]);
  EXPECT_TRUE(p.starts_over[1]);
  EXPECT_FALSE(p.starts_over[2]);
  EXPECT_EQ(p.version_of[2], 10u);
  h[0].files_read = false;
  try {
    (void)plan_group_recovery(eight(), {0, 2}, h, true);
    FAIL() << "files that were not read proved something";
  } catch (const UnrecoverableFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 and its buddy rank 2 were lost together and rank 0 has no intact "
                                         "file either"),
              std::string::npos)
        << e.what();
  }
}

// What the survivors exchange for a group rollback: the records of the rolled-back groups' members only.
Holdings of_rolled_back_groups(Holdings h, const std::vector<int>& failed, const std::set<int>& also) {
  const Layout layout = eight();
  const std::set<int> groups = rolled_back_groups(layout, failed, also);
  for (int r = 0; r < layout.size(); ++r)
    if (!groups.count(layout.group_of(r))) {
      h[r].own = {{99, 99, true}};  // (whatever the other ranks hold: nobody reports it)
      h[r].at_buddy.clear();
      h[r].files_read = false;
    }
  return h;
}

TEST(GroupRecoveryPlan, NeedsOnlyTheRecordsOfTheGroupsItRollsBack) {
  EXPECT_EQ(rolled_back_groups(eight(), {7, 6}, {1}), (std::set<int>{1, 3}));
  EXPECT_EQ(rolled_back_groups(eight(), {0}, {}), (std::set<int>{0}));
  struct Case {
    std::vector<int> failed;
    std::set<int> also;
    Holdings h;
  };
  std::vector<Case> cases;
  auto h = holdings_all({{10, 10, true}, {20, 10, false}});
  h[7].own = {};
  h[0].own = {{10, 10, true}};  // outside the rolled-back groups
  cases.push_back({{7}, {}, h});
  h[2].own = {{10, 10, true}};  // group 1 re-executes
  h[3].own = {{10, 10, true}};
  cases.push_back({{7}, {1}, h});
  h[2].replacing = true;  // an interrupted replacement of group 1
  cases.push_back({{7}, {1}, h});
  auto never = holdings_all({{10, 10, true}});
  never[6].own = never[6].at_buddy = never[7].own = never[7].at_buddy = {};  // group 3 never committed
  never[2].own = {};
  cases.push_back({{6, 2}, {}, never});
  for (const Case& c : cases) {
    const RecoveryPlan all = plan_group_recovery(eight(), c.failed, c.h, false, c.also);
    const RecoveryPlan some =
        plan_group_recovery(eight(), c.failed, of_rolled_back_groups(c.h, c.failed, c.also), false, c.also);
    EXPECT_EQ(some.rolled_back, all.rolled_back);
    EXPECT_EQ(some.version_of, all.version_of);
    EXPECT_EQ(some.starts_over, all.starts_over);
    EXPECT_EQ(some.source, all.source);
  }
}

TEST(Holdings, FlattenedRecordsComeBackPerRankAndSource) {
  std::vector<std::uint64_t> all;
  append_records(all, 3, {{10, 10, true}, {20, 10, false}}, RecordSource::Own);
  append_records(all, 3, {{10, 10, true}}, RecordSource::AtBuddy);
  append_records(all, 5, {}, RecordSource::FilesRead);  // read, empty
  append_records(all, 6, {{30, 30, true}}, RecordSource::FilesRead);
  append_records(all, 3, {{20, 10, false}}, RecordSource::Own);  // reported twice: counts once
  append_records(all, 9, {{10, 10, true}}, RecordSource::Own);   // not a rank of this job: ignored
  const Holdings h = holdings_from(all, 8);
  ASSERT_EQ(h.size(), 3u);  // the ranks reported, not the job's
  EXPECT_TRUE(holdings_of(h, 0).own.empty());
  EXPECT_EQ(h.at(3).own, (std::vector<VersionRecord>{{10, 10, true}, {20, 10, false}}));
  EXPECT_EQ(h.at(3).at_buddy, (std::vector<VersionRecord>{{10, 10, true}}));
  EXPECT_FALSE(h.at(3).files_read);
  EXPECT_TRUE(h.at(5).files_read);
  EXPECT_TRUE(h.at(5).own.empty());
  EXPECT_TRUE(h.at(6).files_read);
  EXPECT_EQ(h.at(6).own, (std::vector<VersionRecord>{{30, 30, true}}));
}

}  // namespace
}  // namespace reprise::protocol
