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
#pragma once

#include "reprise/mpi.hpp"

namespace reprise {

/// The runtime MPI_Init started. Throws UsageError before MPI_Init, or in a program not linked with
/// libreprise_interpose.so (then this symbol is missing at link time instead).
MpiRuntime& wrapped_runtime();

}  // namespace reprise
