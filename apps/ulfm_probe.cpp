// reprise-ulfm-probe: does this MPI's ULFM really work? The last rank SIGKILLs itself; the survivors must see
// MPI_ERR_PROC_FAILED or MPI_ERR_REVOKED, revoke, agree, shrink, spawn a replacement and merge with it, and then
// compute on a communicator of the original size. Prints "ULFM works" and exits 0 only then. scripts/mpirun.sh
// runs it to decide whether the host's MPI can be used when Open MPI has not been built here.
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if !defined(MPIX_ERR_PROC_FAILED) || !defined(MPIX_ERR_REVOKED)
int main() {
  std::puts("ULFM missing: this MPI has no MPIX_ERR_PROC_FAILED / MPIX_ERR_REVOKED");
  return 1;
}
#else

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool is_failure(int rc) {
  int cls = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED;
}

void on_alarm(int) {
  static const char msg[] = "reprise-ulfm-probe: watchdog: recovery hangs (ULFM does not work here)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(3);
}

int child(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm parent, merged;
  MPI_Comm_get_parent(&parent);
  MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
  MPI_Intercomm_merge(parent, 1, &merged);
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
  MPI_Barrier(merged);
  MPI_Comm_free(&merged);
  MPI_Finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return child(argc, argv);
  signal(SIGALRM, on_alarm);
  alarm(90);
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) std::puts("reprise-ulfm-probe: needs at least 2 ranks");
    MPI_Finalize();
    return 2;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Barrier(MPI_COMM_WORLD);
  const int victim = size - 1;
  if (rank == victim) {
    usleep(100000);
    raise(SIGKILL);
  }
  const double t0 = now();
  int rc = MPI_SUCCESS, one = 1, sum = 0;
  while (rc == MPI_SUCCESS) rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!is_failure(rc)) {
    std::printf("rank %d: unexpected error class after the kill (rc %d)\n", rank, rc);
    return 1;
  }
  const double detected = now() - t0;
  MPIX_Comm_revoke(MPI_COMM_WORLD);
  MPI_Comm shrunk;
  if (MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk) != MPI_SUCCESS) {
    std::printf("rank %d: MPIX_Comm_shrink failed\n", rank);
    return 1;
  }
  MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
  int flag = 1;
  MPIX_Comm_agree(shrunk, &flag);
  char* cargv[] = {const_cast<char*>("--child"), nullptr};
  MPI_Comm inter, merged;
  int errcode = 0;
  rc = MPI_Comm_spawn(argv[0], cargv, 1, MPI_INFO_NULL, 0, shrunk, &inter, &errcode);
  if (rc != MPI_SUCCESS) {
    std::printf("rank %d: MPI_Comm_spawn failed\n", rank);
    return 1;
  }
  MPI_Intercomm_merge(inter, 0, &merged);
  int msize = 0;
  MPI_Comm_size(merged, &msize);
  sum = 0;
  rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
  const bool ok = rc == MPI_SUCCESS && msize == size && sum == size;
  int mrank = 0;
  MPI_Comm_rank(merged, &mrank);
  if (mrank == 0)
    std::printf("%s: %d ranks, rank %d killed, detected in %.3f s, shrunk + respawned + merged in %.3f s\n",
                ok ? "ULFM works" : "ULFM FAILED", size, victim, detected, now() - t0 - detected);
  MPI_Barrier(merged);
  MPI_Comm_free(&merged);
  MPI_Comm_free(&shrunk);
  MPI_Finalize();
  return ok ? 0 : 1;
}
#endif
