// How the MPI runtime reads the result of an MPI call. Every MPI call in src/mpi goes through one of these:
//   REPRISE_MPI_CHECK(call)    MPI_SUCCESS: nothing; a process failure (ULFM): PeerFailure, which the runtime turns
//                              into a recovery (main thread) or into "link down" (background threads); any other
//                              error: reprise::Error naming the call, the file and the line.
//   REPRISE_COMM_CHECK(call)   inside reprise::Comm (CommState): CommHost::check_mpi, the same reading, except that
//                              a failure starts the repair at once (and a spurious wake-up is repeated by the caller).
//   REPRISE_MPI_DISCARD(call)  clean-up whose result changes nothing (freeing a request or a communicator of an
//                              epoch a failure ended, cancelling an abandoned receive, a query used as a hint).
//   an `rc` tested in place    where the code does something else for each result (a repair attempt that may
//                              fail, a spurious wake-up to repeat): the comment there says what.
#pragma once

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#if defined(MPIX_ERR_PROC_FAILED) && defined(MPIX_ERR_REVOKED)
#define REPRISE_HAVE_ULFM 1
#else
#define REPRISE_HAVE_ULFM 0
#endif

#include <string>

namespace reprise::mpi {

/// Where an MPI call was made, for messages.
struct CallSite {
  const char* call;
  const char* file;
  int line;
};

/// Thrown inside the runtime when an MPI call reports a process failure.
struct PeerFailure {
  int rc;
  CallSite at;
};

/// MPI's text for `rc`.
std::string mpi_error(int rc);

/// MPI_ERR_PROC_FAILED, MPI_ERR_REVOKED (or PROC_FAILED_PENDING): a process of the job failed.
bool is_failure(int rc);

/// "MPI_Foo(...) failed at file:line: <MPI's text>".
std::string describe(int rc, const CallSite& at);

/// Nothing on MPI_SUCCESS; PeerFailure on a process failure; Error (describe()) otherwise.
void check(int rc, const CallSite& at);

/// A duplicate of `c` whose errors are returned (MPI_ERRORS_RETURN).
MPI_Comm dup_comm(MPI_Comm c);

/// MPIX_Comm_revoke (nothing without ULFM, or for MPI_COMM_NULL); traced with REPRISE_TRACE.
void revoke(MPI_Comm c);

}  // namespace reprise::mpi

#define REPRISE_MPI_SITE(call) (::reprise::mpi::CallSite{#call, __FILE__, __LINE__})
#define REPRISE_MPI_CHECK(call) ::reprise::mpi::check((call), REPRISE_MPI_SITE(call))
#define REPRISE_MPI_DISCARD(call) static_cast<void>(call)
