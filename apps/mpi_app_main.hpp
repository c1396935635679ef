// main() of the MPI applications: MPI (MPI_THREAD_MULTIPLE, which MpiRuntime needs; in an application built with
// REPRISE_WRAPPED and linked with the interposition, MPI_Init also starts the runtime) and Kokkos around `run`, the
// GPU closest to each rank (hwloc) given to Kokkos unless the command line or the environment picks one, and the
// exit paths after an error:
//  - UnrecoverableFailure (e.g. a rank and its buddy lost together): the message, then exit 3 without
//    MPI_Finalize, which would wait for the lost ranks on broken communicators;
//  - any other error (a usage or protocol error of the program): the message, then MPI_Abort, since the other
//    ranks may be waiting for this one in a collective.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reprise/errors.hpp"
#include "reprise/mpi.hpp"
#ifdef REPRISE_WRAPPED
#include <nlohmann/json.hpp>

#include "reprise/interpose.hpp"
#endif

namespace reprise::apps {

// Whether the command line or the environment chooses the device for Kokkos.
inline bool device_chosen(int argc, char** argv) {
  for (const char* v : {"KOKKOS_DEVICE_ID", "KOKKOS_MAP_DEVICE_ID_BY"})
    if (std::getenv(v)) return true;
  for (int i = 1; i < argc; ++i)
    for (const char* flag : {"--kokkos-device-id", "--kokkos-map-device-id-by", "--device-id"})
      if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) return true;
  return false;
}

// The application's configuration: group rollback (only the groups of failed ranks roll back) when its messages
// go through reprise::Comm (--messages reprise). Raw MPI messages are neither logged nor replayed, so a group could
// not roll back alone: REPRISE_ROLLBACK=group with them is refused here, at start (rank 0 says why; nullopt),
// rather than ending the job at the first failure.
inline std::optional<Config> app_config(const char* name, const std::string& messages) {
  Config config;
  config.group_rollback = messages == "reprise";
  config = Config::from_env(config);
  if (!config.group_rollback || messages == "reprise") return config;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    std::fprintf(stderr,
                 "%s: REPRISE_ROLLBACK=group needs every application message in reprise::Comm (--messages reprise): "
                 "with --messages %s the messages between groups are neither logged nor replayed, so a group cannot "
                 "roll back alone. Use --messages reprise, or REPRISE_ROLLBACK=all (every rank rolls back).\n",
                 name, messages.c_str());
  return std::nullopt;
}

inline int mpi_app_main(const char* name, int argc, char** argv, const std::function<int()>& run) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::vector<char*> args(argv, argv + argc);
  std::string device_arg;
  if (!device_chosen(argc, argv)) {
    int gpu = -1;
#ifdef REPRISE_WRAPPED
    // Linked with the interposition: MPI_Init started the runtime, which found the closest GPU (hwloc); a
    // replacement's place is that of the rank it replaces, and it says so, as closest_gpu does.
    const nlohmann::json placement = nlohmann::json::parse(wrapped_runtime().placement_json());
    gpu = placement.value("gpu", -1);
    MPI_Comm parent = MPI_COMM_NULL;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
      std::fprintf(stderr, "reprise: replacement of rank %d: takes the GPU of local index %d on its node (%s)\n",
                   placement.value("rank", -1), placement.value("local_index", -1),
                   gpu >= 0 ? ("CUDA device " + std::to_string(gpu)).c_str() : "no GPU usable here");
#else
    try {
      gpu = MpiRuntime::closest_gpu(MPI_COMM_WORLD);  // collective; -1 without GPUs
    } catch (const std::exception&) {
      // A bad layout (REPRISE_GROUPS, ...): the runtime's constructor reports it, with the usual exit path.
    }
#endif
    if (gpu >= 0) {
      device_arg = "--kokkos-device-id=" + std::to_string(gpu);
      args.push_back(device_arg.data());
    }
  }
  int kokkos_argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  Kokkos::initialize(kokkos_argc, args.data());
  int rc = 0;
  try {
    rc = run();
  } catch (const UnrecoverableFailure& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    std::fflush(nullptr);
    _exit(3);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  Kokkos::finalize();
  MPI_Finalize();
  return rc;
}

}  // namespace reprise::apps
