// Blocking MPI operations done as their non-blocking forms completed by polling MPI_Test.
//
// Why: Open MPI (5.0.7, ULFM) wakes every *blocked* wait of a process with MPI_ERR_REVOKED or
// MPI_ERR_PROC_FAILED whenever the process learns of a failure or of a revoked communicator anywhere, also when
// the blocked operation involves neither (e.g. a late notice of a failure the job has already recovered from).
// A blocked MPI_Recv or MPI_Allgather then fails although its peers are alive and its communicator intact; a
// collective that fails at one rank and completes at the others cannot be repeated. Polling MPI_Test only asks
// about the request itself, so these calls fail only for their own reasons. Used for everything the runtime
// does after a repair, and by its background threads.
#pragma once

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <chrono>
#include <optional>
#include <thread>

namespace reprise::mpi::polled {

/// How many processes of `comm` ULFM knows to have failed (0 without ULFM).
inline int failed_in(MPI_Comm comm) {
  int n = 0;
#if defined(MPIX_ERR_PROC_FAILED) && defined(MPIX_ERR_REVOKED)
  MPI_Group failed = MPI_GROUP_NULL;
  if (MPIX_Comm_get_failed(comm, &failed) == MPI_SUCCESS && failed != MPI_GROUP_NULL) {  // (else: none known)
    if (MPI_Group_size(failed, &n) != MPI_SUCCESS) n = 0;
    static_cast<void>(MPI_Group_free(&failed));  // (a local group: nothing to do about an error)
  }
#else
  (void)comm;
#endif
  return n;
}

/// The result of a collective on `comm`. Open MPI 5.0.7's non-blocking collectives (libnbc) report a collective
/// that lost a member as MPI_ERR_OTHER ("Error in NBC_Start_round() (-1)"), not as MPI_ERR_PROC_FAILED (a stress
/// run saw it in a recovery's collective; the job then aborted). Another error class on a communicator where ULFM
/// finds a failed process or a revocation within 2 s (its notice may lag the transport's error) is that failure.
inline int collective_result(int rc, MPI_Comm comm) {
#if defined(MPIX_ERR_PROC_FAILED) && defined(MPIX_ERR_REVOKED)
  if (rc == MPI_SUCCESS) return rc;
  int cls = rc;
  if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) return rc;
  if (cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED) return rc;
  for (int i = 0; i < 400; ++i) {
    int revoked = 0;
    if (MPIX_Comm_is_revoked(comm, &revoked) == MPI_SUCCESS && revoked) return MPIX_ERR_REVOKED;
    if (failed_in(comm) > 0) return MPIX_ERR_PROC_FAILED;
    int flag = 0;  // progress, so that the runtime's notice of a failure is received
    static_cast<void>(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE));  // (progress only)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
#else
  (void)comm;
#endif
  return rc;
}

/// Completes `r` by polling (a short sleep after many idle polls, so a long wait costs little CPU).
inline int wait(MPI_Request& r, MPI_Status* st = MPI_STATUS_IGNORE) {
  for (unsigned spin = 0;; ++spin) {
    int flag = 0;
    const int rc = MPI_Test(&r, &flag, st);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (spin > 2000) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

inline int send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(buf, count, type, dest, tag, comm, &r);
  return rc != MPI_SUCCESS ? rc : wait(r);
}

inline int recv(void* buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status* st) {
  MPI_Request r = MPI_REQUEST_NULL;
  int rc = MPI_Irecv(buf, count, type, src, tag, comm, &r);
  if (rc != MPI_SUCCESS) return rc;
  rc = wait(r, st);
  // ULFM leaves a receive from MPI_ANY_SOURCE active when it fails (MPIX_ERR_PROC_FAILED_PENDING): it could still
  // complete into `buf` after this call returned. Cancel and free it. (Other failed requests are freed by MPI.)
  if (rc != MPI_SUCCESS && r != MPI_REQUEST_NULL) {  // (the call fails with `rc` either way)
    static_cast<void>(MPI_Cancel(&r));
    static_cast<void>(MPI_Request_free(&r));
  }
  return rc;
}

inline int probe(int src, int tag, MPI_Comm comm, MPI_Status* st) {
  for (unsigned spin = 0;; ++spin) {
    int flag = 0;
    const int rc = MPI_Iprobe(src, tag, comm, &flag, st);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (spin > 2000) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

inline int allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                     MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, &r);
  return collective_result(rc != MPI_SUCCESS ? rc : wait(r), comm);
}

inline int allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts,
                      const int* displs, MPI_Datatype rtype, MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, &r);
  return collective_result(rc != MPI_SUCCESS ? rc : wait(r), comm);
}

inline int allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Iallreduce(sbuf, rbuf, count, type, op, comm, &r);
  return collective_result(rc != MPI_SUCCESS ? rc : wait(r), comm);
}

inline int exscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Iexscan(sbuf, rbuf, count, type, op, comm, &r);
  return collective_result(rc != MPI_SUCCESS ? rc : wait(r), comm);
}

/// MPIX_Comm_agree, polled: the AND of every live member's `mine`, the same at every member; nullopt when a
/// process failed meanwhile (or without ULFM: there is nothing to agree about then, and true is returned).
inline std::optional<bool> agreement(MPI_Comm comm, bool mine) {
#if defined(MPIX_ERR_PROC_FAILED) && defined(MPIX_ERR_REVOKED)
  int flag = mine ? 1 : 0;
  MPI_Request r = MPI_REQUEST_NULL;
  int rc = MPIX_Comm_iagree(comm, &flag, &r);
  if (rc == MPI_SUCCESS) rc = wait(r);
  if (rc != MPI_SUCCESS) return std::nullopt;
  return flag == 1;
#else
  (void)comm;
  return mine;
#endif
}

inline int bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Ibcast(buf, count, type, root, comm, &r);
  return collective_result(rc != MPI_SUCCESS ? rc : wait(r), comm);
}

}  // namespace reprise::mpi::polled
