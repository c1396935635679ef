// REPRISE_KILL: the failure-injection orders the MPI tests use (rank:step[:point]).
#include <gtest/gtest.h>

#include "protocol/failure_injection.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

TEST(FailureInjection, ParsesEntriesAndPoints) {
  const auto k = parse_kill_spec("3:40,5:100:drain,0:7:recovery");
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[0].rank, 3);
  EXPECT_EQ(k[0].step, 40u);
  EXPECT_EQ(k[0].point, KillPoint::Compute);
  EXPECT_EQ(k[1].point, KillPoint::Drain);
  EXPECT_EQ(k[2].point, KillPoint::Recovery);
  EXPECT_TRUE(kill_due(k, 5, 100, KillPoint::Drain));
  EXPECT_FALSE(kill_due(k, 5, 100, KillPoint::Compute));
  EXPECT_FALSE(kill_due(k, 3, 41, KillPoint::Compute));
  // A recovery order fires in the first recovery at or after its step, whatever step the failure hit.
  EXPECT_FALSE(kill_due(k, 0, 6, KillPoint::Recovery));
  EXPECT_TRUE(kill_due(k, 0, 7, KillPoint::Recovery));
  EXPECT_TRUE(kill_due(k, 0, 25, KillPoint::Recovery));
  EXPECT_TRUE(parse_kill_spec("").empty());
  EXPECT_EQ(parse_kill_spec("2:10:stall_files")[0].point, KillPoint::StallFiles);
  EXPECT_EQ(parse_kill_spec("2:10:slow_files")[0].point, KillPoint::SlowFiles);
  // The points inside a recovery (its data phase, the restart exchange) behave the same way.
  const auto r = parse_kill_spec("2:12:transfer,4:30:exchange");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].point, KillPoint::Transfer);
  EXPECT_EQ(r[1].point, KillPoint::Exchange);
  EXPECT_TRUE(kill_due(r, 2, 25, KillPoint::Transfer));
  EXPECT_FALSE(kill_due(r, 2, 25, KillPoint::Exchange));
  EXPECT_FALSE(kill_due(r, 4, 29, KillPoint::Exchange));
  EXPECT_TRUE(kill_due(r, 4, 31, KillPoint::Exchange));
  EXPECT_STREQ(to_string(KillPoint::Transfer), "transfer");
  EXPECT_STREQ(to_string(KillPoint::Exchange), "exchange");
  const auto stall = parse_kill_spec("2:25:stall");
  ASSERT_EQ(stall.size(), 1u);
  EXPECT_EQ(stall[0].point, KillPoint::Stall);
  EXPECT_TRUE(kill_due(stall, 2, 26, KillPoint::Stall));
  EXPECT_FALSE(kill_due(stall, 2, 24, KillPoint::Stall));
  EXPECT_STREQ(to_string(KillPoint::Stall), "stall");
  const auto stall_spawn = parse_kill_spec("2:25:stall_spawn");  // in the first recovery from step 25 on
  ASSERT_EQ(stall_spawn.size(), 1u);
  EXPECT_EQ(stall_spawn[0].point, KillPoint::StallSpawn);
  EXPECT_TRUE(kill_due(stall_spawn, 2, 27, KillPoint::StallSpawn));
  EXPECT_FALSE(kill_due(stall_spawn, 2, 27, KillPoint::Stall));
  EXPECT_STREQ(to_string(KillPoint::StallSpawn), "stall_spawn");
  const auto join = parse_kill_spec("1:0:join");  // every replacement of rank 1 dies as it joins
  ASSERT_EQ(join.size(), 1u);
  EXPECT_EQ(join[0].point, KillPoint::Join);
  EXPECT_TRUE(kill_due(join, 1, 25, KillPoint::Join));
  EXPECT_TRUE(kill_due(join, 1, 40, KillPoint::Join));
  EXPECT_FALSE(kill_due(join, 2, 25, KillPoint::Join));
  EXPECT_STREQ(to_string(KillPoint::Join), "join");
  const auto collective = parse_kill_spec("3:15:collective");  // as rank 3 enters a served collective of step 15
  ASSERT_EQ(collective.size(), 1u);
  EXPECT_EQ(collective[0].point, KillPoint::Collective);
  EXPECT_TRUE(kill_due(collective, 3, 15, KillPoint::Collective));
  EXPECT_FALSE(kill_due(collective, 3, 16, KillPoint::Collective));
  EXPECT_FALSE(kill_due(collective, 3, 15, KillPoint::Compute));
  EXPECT_STREQ(to_string(KillPoint::Collective), "collective");
}

// The orders a process that reaches the job's end alive did not carry out: its rank's killing orders, above the
// floor its predecessors fired up to (a replacement), and neither the stalls nor the file writers' points.
TEST(FailureInjection, UnfiredOrdersAreThisRanksKillingOrdersAboveItsFloor) {
  const auto orders =
      parse_kill_spec("3:15:collective,3:33,1:20:drain,3:5:stall_files,3:7:slow_files,3:9:stall,3:2:join");
  const auto first = unfired_orders(orders, 3, std::nullopt);  // a process of the job's start
  ASSERT_EQ(first.size(), 2U);
  EXPECT_EQ(to_string(first[0]), "3:15:collective");
  EXPECT_EQ(to_string(first[1]), "3:33:compute");
  const auto replacement = unfired_orders(orders, 3, 15);  // its predecessor died at 15
  ASSERT_EQ(replacement.size(), 1U);
  EXPECT_EQ(replacement[0].step, 33U);
  EXPECT_TRUE(unfired_orders(orders, 3, 33).empty());
  EXPECT_EQ(unfired_orders(orders, 1, std::nullopt).size(), 1U);
  EXPECT_TRUE(unfired_orders(orders, 2, std::nullopt).empty());
  // A step-0 order is fired by a process of the job's start only: a replacement's floor is at least 0.
  EXPECT_EQ(unfired_orders(parse_kill_spec("2:0:recovery"), 2, std::nullopt).size(), 1U);
  EXPECT_TRUE(unfired_orders(parse_kill_spec("2:0:recovery"), 2, 0).empty());
}

TEST(FailureInjection, RejectsMalformedEntries) {
  for (const char* bad : {"3", "x:4", "3:-1", "3:4:explode", "3:4:drain:extra", "-1:5"})
    EXPECT_THROW(parse_kill_spec(bad), ConfigError) << bad;
}

TEST(FailureInjection, RankListsNameRanksOnly) {
  EXPECT_TRUE(rank_listed("REPRISE_KILL_SPARE", "1,3,4,7", 4));
  EXPECT_TRUE(rank_listed("REPRISE_KILL_SPARE", "12,", 12));
  EXPECT_FALSE(rank_listed("REPRISE_KILL_SPARE", "1,3,4,7", 2));
  EXPECT_FALSE(rank_listed("REPRISE_KILL_SPARE", "12", 1));  // (not a substring match)
  EXPECT_FALSE(rank_listed("REPRISE_KILL_SPARE", "", 0));
  for (const char* bad : {"1,x", "-1", "3:4", "2 ", ",1"}) {
    try {
      rank_listed("REPRISE_FALSE_AGREEMENT", bad, 1);
      ADD_FAILURE() << bad << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("REPRISE_FALSE_AGREEMENT: '"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace reprise::protocol
