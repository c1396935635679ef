// main() of the MPI applications: MPI (MPI_THREAD_MULTIPLE, which MpiRuntime needs) and Kokkos around `run`, and
// the exit paths after an error:
//  - UnrecoverableFailure (e.g. a rank and its buddy lost together): the message, then exit 3 without
//    MPI_Finalize, which would wait for the lost ranks on broken communicators;
//  - any other error (a usage or protocol error of the program): the message, then MPI_Abort, since the other
//    ranks may be waiting for this one in a collective.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <exception>
#include <functional>

#include "reprise/errors.hpp"

namespace reprise::apps {

inline int mpi_app_main(const char* name, int argc, char** argv, const std::function<int()>& run) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  Kokkos::initialize(argc, argv);
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
