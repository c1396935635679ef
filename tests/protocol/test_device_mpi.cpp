// Whether reprise::Comm hands device buffers to MPI (protocol::choose_device_mpi) and REPRISE_CUDA_AWARE_MPI.
#include <gtest/gtest.h>

#include <cstdlib>

#include "protocol/device_mpi.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

using M = MpiCudaSupport;

TEST(DeviceMpiChoice, AutoIsDirectOnlyWithTheCudaBackendAndAnMpiThatSaysYes) {
  EXPECT_TRUE(choose_device_mpi(CudaAwareMpi::Auto, "cuda", M::Yes).direct);
  EXPECT_FALSE(choose_device_mpi(CudaAwareMpi::Auto, "cuda", M::No).direct);
  const DeviceMpiChoice unknown = choose_device_mpi(CudaAwareMpi::Auto, "cuda", M::Unknown);
  EXPECT_FALSE(unknown.direct);
  EXPECT_NE(unknown.reason.find("REPRISE_CUDA_AWARE_MPI=yes"), std::string::npos) << unknown.reason;
  // The host twin's "device" memory is host memory, but auto behaves as on a GPU whose MPI is not CUDA-aware.
  for (M m : {M::Yes, M::ThroughHost, M::No, M::Unknown})
    EXPECT_FALSE(choose_device_mpi(CudaAwareMpi::Auto, "host-twin", m).direct);
}

// Open MPI with ULFM takes device buffers, but its ob1 PML copies them through host memory: staging is faster
// (H200: 1 MiB 0.20 ms staged, 0.68 ms handed to MPI), so auto stages and says why; yes still hands them over.
TEST(DeviceMpiChoice, AutoStagesWhenTheMpiCopiesDeviceBuffersThroughHostItself) {
  const DeviceMpiChoice through = choose_device_mpi(CudaAwareMpi::Auto, "cuda", M::ThroughHost);
  EXPECT_FALSE(through.direct);
  EXPECT_NE(through.reason.find("ob1"), std::string::npos) << through.reason;
  EXPECT_NE(through.reason.find("REPRISE_CUDA_AWARE_MPI=yes hands them to MPI"), std::string::npos) << through.reason;
  EXPECT_TRUE(choose_device_mpi(CudaAwareMpi::Yes, "cuda", M::ThroughHost).direct);
}

TEST(DeviceMpiChoice, YesIsDirectUnlessTheMpiSaysItCannot) {
  EXPECT_TRUE(choose_device_mpi(CudaAwareMpi::Yes, "cuda", M::Yes).direct);
  EXPECT_TRUE(choose_device_mpi(CudaAwareMpi::Yes, "cuda", M::Unknown).direct);
  for (M m : {M::Yes, M::ThroughHost, M::No, M::Unknown})
    EXPECT_TRUE(choose_device_mpi(CudaAwareMpi::Yes, "host-twin", m).direct);
  try {
    choose_device_mpi(CudaAwareMpi::Yes, "cuda", M::No);
    ADD_FAILURE() << "REPRISE_CUDA_AWARE_MPI=yes accepted with an MPI that says it cannot take device buffers";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("does not take CUDA device buffers"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("REPRISE_CUDA_AWARE_MPI=auto or no"), std::string::npos) << e.what();
  }
}

TEST(DeviceMpiChoice, NoAlwaysStages) {
  for (const char* backend : {"cuda", "host-twin"})
    for (M m : {M::Yes, M::ThroughHost, M::No, M::Unknown})
      EXPECT_FALSE(choose_device_mpi(CudaAwareMpi::No, backend, m).direct);
}

TEST(DeviceMpiChoice, ConfigReadsTheEnvironment) {
  unsetenv("REPRISE_CUDA_AWARE_MPI");
  EXPECT_EQ(Config::from_env().cuda_aware_mpi, CudaAwareMpi::Auto);
  setenv("REPRISE_CUDA_AWARE_MPI", "yes", 1);
  EXPECT_EQ(Config::from_env().cuda_aware_mpi, CudaAwareMpi::Yes);
  setenv("REPRISE_CUDA_AWARE_MPI", "no", 1);
  EXPECT_EQ(Config::from_env().cuda_aware_mpi, CudaAwareMpi::No);
  setenv("REPRISE_CUDA_AWARE_MPI", "1", 1);
  EXPECT_THROW(Config::from_env(), ConfigError);
  unsetenv("REPRISE_CUDA_AWARE_MPI");
}

}  // namespace
}  // namespace reprise::protocol
