#include "mpi/check.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "reprise/errors.hpp"

namespace reprise::mpi {

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error code " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(len));
}

bool is_failure(int rc) {
  if (rc == MPI_SUCCESS) return false;
#if REPRISE_HAVE_ULFM
  int cls = rc;
  if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) return false;
  return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED
#ifdef MPIX_ERR_PROC_FAILED_PENDING
         || cls == MPIX_ERR_PROC_FAILED_PENDING
#endif
      ;
#else
  return false;
#endif
}

std::string describe(int rc, const CallSite& at) {
  std::string file = at.file;
  if (const auto slash = file.rfind("src/"); slash != std::string::npos) file = file.substr(slash);
  return std::string(at.call) + " failed at " + file + ":" + std::to_string(at.line) + ": " + mpi_error(rc);
}

void check(int rc, const CallSite& at) {
  if (rc == MPI_SUCCESS) return;
  if (is_failure(rc)) throw PeerFailure{rc, at};
  throw Error("MPI error in the Reprise runtime: " + describe(rc, at));
}

MPI_Comm dup_comm(MPI_Comm c) {
  MPI_Comm d = MPI_COMM_NULL;
  REPRISE_MPI_CHECK(MPI_Comm_dup(c, &d));
  REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN));
  return d;
}

void revoke(MPI_Comm c) {
  if (std::getenv("REPRISE_TRACE") && c != MPI_COMM_NULL) {
    int r = -1;
    REPRISE_MPI_DISCARD(MPI_Comm_rank(MPI_COMM_WORLD, &r));  // (a trace line)
    std::fprintf(stderr, "reprise: world rank %d revokes %p at %.6f\n", r, static_cast<void*>(c),
                 std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
#if REPRISE_HAVE_ULFM
  // Revoking tells the others: a communicator already revoked or broken is what this is for, whatever the result.
  if (c != MPI_COMM_NULL) REPRISE_MPI_DISCARD(MPIX_Comm_revoke(c));
#else
  (void)c;
#endif
}

}  // namespace reprise::mpi
