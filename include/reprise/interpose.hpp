// An ordinary MPI program wrapped by Reprise: linked with Reprise::interpose (libreprise_interpose.so, before the
// MPI library) or run with it in LD_PRELOAD, its MPI calls on MPI_COMM_WORLD and the communicators derived from it
// go through the protocol (docs/WRAPPING.md lists what is served and what is refused). MPI_Init starts the runtime;
// the program adds only what to protect, where to restore and when to checkpoint:
//
//   MPI_Init(&argc, &argv);                       // starts the runtime (a replacement process joins here)
//   reprise::MpiRuntime& rt = reprise::wrapped_runtime();
//   rt.protect(u); rt.protect("step", &step);
//   if (rt.restarted()) rt.restore();
//   ... the program's loop, with rt.checkpoint(step) every k steps ...
//   MPI_Finalize();                               // the runtime's uniform end (MpiRuntime::finish), then MPI's
//
// Rollback without catching reprise::Rollback: run the program's body through reprise::run. When its group rolls
// back, the body runs again from its top (its locals, views and requests gone with the unwinding): MPI_Init is then
// a no-op, its set-up's communicator calls (MPI_Comm_dup, MPI_Comm_split, MPI_Cart_create) are served from the
// checkpoint, and `if (rt.restarted()) rt.restore();` brings its data back; ranks of other groups never leave their
// MPI calls. Initialise Kokkos outside the body (it cannot be initialised twice):
//
//   int main(int argc, char** argv) {
//     MPI_Init(&argc, &argv);
//     Kokkos::initialize(argc, argv);
//     const int rc = reprise::run(argc, argv, solve);  // int solve(int argc, char** argv): the program as it was
//     Kokkos::finalize();
//     MPI_Finalize();
//     return rc;
//   }
#pragma once

#include <functional>

#include "reprise/mpi.hpp"

namespace reprise {

/// The runtime MPI_Init started. Throws UsageError before MPI_Init, or in a program not linked with
/// libreprise_interpose.so (then this symbol is missing at link time instead).
MpiRuntime& wrapped_runtime();

/// Runs `body(argc, argv)` and then the runtime's uniform end (MpiRuntime::finish: every rank got here), again from
/// the top of `body` after every rollback of this rank's group (a Rollback from any MPI or runtime call inside it).
/// Returns the body's result. Everything that communicates belongs inside the body; before its restore(), a body
/// run again may only create communicators, call MPI_Barrier and make calls without messages (anything else stops
/// the job with a message naming the call). An UnrecoverableFailure prints its message and exits with status 3
/// (no MPI_Finalize); another reprise::Error stops the job (MPI_Abort, status 2) with its message.
int run(int argc, char** argv, const std::function<int(int, char**)>& body);

}  // namespace reprise
