// The group barrier choice (MPI or NCCL) from the members' devices.
#include <gtest/gtest.h>

#include "protocol/barrier_choice.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

const std::vector<int> kMembers = {4, 5};
std::vector<MemberDevice> own_gpus() {
  return {{1, "0000:17:00.0"}, {1, "0000:65:00.0"}};
}

TEST(GroupBarrierChoice, MpiWhenAskedWhateverTheDevices) {
  EXPECT_EQ(choose_group_barrier(GroupBarrierKind::Mpi, "", kMembers, own_gpus()).kind, GroupBarrierKind::Mpi);
}

TEST(GroupBarrierChoice, NcclWhenEveryMemberHasItsOwnGpu) {
  for (auto wanted : {GroupBarrierKind::Nccl, GroupBarrierKind::Auto})
    EXPECT_EQ(choose_group_barrier(wanted, "", kMembers, own_gpus()).kind, GroupBarrierKind::Nccl);
  // The same bus id on two machines is two GPUs.
  const std::vector<MemberDevice> two_hosts = {{1, "0000:17:00.0"}, {2, "0000:17:00.0"}};
  EXPECT_EQ(choose_group_barrier(GroupBarrierKind::Auto, "", kMembers, two_hosts).kind, GroupBarrierKind::Nccl);
}

TEST(GroupBarrierChoice, AutoFallsBackToMpiAndSaysWhy) {
  const std::vector<MemberDevice> shared = {{1, "0000:17:00.0"}, {1, "0000:17:00.0"}};
  const std::vector<MemberDevice> none = {{1, "0000:17:00.0"}, {1, ""}};
  struct Case {
    std::string nccl_problem;
    std::vector<MemberDevice> devices;
    const char* reason;
  };
  for (const Case& c : {Case{"libnccl.so.2 cannot be loaded", own_gpus(), "libnccl.so.2 cannot be loaded"},
                        Case{"", shared, "ranks 4 and 5 share the GPU"}, Case{"", none, "rank 5 has no GPU"}}) {
    const BarrierChoice ch = choose_group_barrier(GroupBarrierKind::Auto, c.nccl_problem, kMembers, c.devices);
    EXPECT_EQ(ch.kind, GroupBarrierKind::Mpi);
    EXPECT_NE(ch.reason.find(c.reason), std::string::npos) << ch.reason;
    try {
      choose_group_barrier(GroupBarrierKind::Nccl, c.nccl_problem, kMembers, c.devices);
      ADD_FAILURE() << "REPRISE_GROUP_BARRIER=nccl accepted: " << c.reason;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("REPRISE_GROUP_BARRIER=mpi"), std::string::npos) << e.what();
    }
  }
}

TEST(GroupBarrierChoice, RejectsMismatchedInput) {
  EXPECT_THROW(choose_group_barrier(GroupBarrierKind::Auto, "", {1, 2, 3}, own_gpus()), UsageError);
}

TEST(GroupBarrierChoice, ConfigReadsTheEnvironment) {
  setenv("REPRISE_GROUP_BARRIER", "auto", 1);
  EXPECT_EQ(Config::from_env().group_barrier, GroupBarrierKind::Auto);
  setenv("REPRISE_GROUP_BARRIER", "nccl", 1);
  EXPECT_EQ(Config::from_env().group_barrier, GroupBarrierKind::Nccl);
  setenv("REPRISE_GROUP_BARRIER", "gloo", 1);
  EXPECT_THROW(Config::from_env(), ConfigError);
  unsetenv("REPRISE_GROUP_BARRIER");
  EXPECT_EQ(Config::from_env().group_barrier, GroupBarrierKind::Mpi);
}

}  // namespace
}  // namespace reprise::protocol
