#include "mpi/failure.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "reprise/errors.hpp"

namespace reprise::mpi {

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<std::size_t>(len));
}

bool is_failure(int rc) {
  if (rc == MPI_SUCCESS) return false;
#if REPRISE_HAVE_ULFM
  int cls = rc;
  MPI_Error_class(rc, &cls);
  return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED
#ifdef MPIX_ERR_PROC_FAILED_PENDING
         || cls == MPIX_ERR_PROC_FAILED_PENDING
#endif
      ;
#else
  return false;
#endif
}

void ok(int rc) {
  if (rc == MPI_SUCCESS) return;
  if (is_failure(rc)) throw PeerFailure{rc};
  throw Error("MPI error in the Reprise runtime: " + mpi_error(rc));
}

MPI_Comm dup_comm(MPI_Comm c) {
  MPI_Comm d = MPI_COMM_NULL;
  ok(MPI_Comm_dup(c, &d));
  MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
  return d;
}

void revoke(MPI_Comm c) {
  if (std::getenv("REPRISE_TRACE") && c != MPI_COMM_NULL) {
    int r = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    std::fprintf(stderr, "reprise: world rank %d revokes %p at %.6f\n", r, static_cast<void*>(c),
                 std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
#if REPRISE_HAVE_ULFM
  if (c != MPI_COMM_NULL) MPIX_Comm_revoke(c);
#else
  (void)c;
#endif
}

}  // namespace reprise::mpi
