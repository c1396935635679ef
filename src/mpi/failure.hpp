// How the MPI runtime reads the result of an MPI call: a process failure (ULFM) becomes PeerFailure, which the
// runtime turns into a recovery (main thread) or into "link down" (background threads); any other error is an
// Error naming the MPI message.
#pragma once

#include <mpi.h>

#include <string>

#include "mpi/comm_state.hpp"  // REPRISE_HAVE_ULFM

namespace reprise::mpi {

/// Thrown inside the runtime when an MPI call reports a process failure.
struct PeerFailure {
  int rc;
};

/// MPI's text for `rc`.
std::string mpi_error(int rc);

/// MPI_ERR_PROC_FAILED, MPI_ERR_REVOKED (or PROC_FAILED_PENDING): a process of the job failed.
bool is_failure(int rc);

/// Nothing on MPI_SUCCESS; PeerFailure on a process failure; Error otherwise.
void ok(int rc);

/// A duplicate of `c` whose errors are returned (MPI_ERRORS_RETURN).
MPI_Comm dup_comm(MPI_Comm c);

/// MPIX_Comm_revoke (nothing without ULFM, or for MPI_COMM_NULL); traced with REPRISE_TRACE.
void revoke(MPI_Comm c);

}  // namespace reprise::mpi
