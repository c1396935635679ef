// A program written for Reprise outside the tree, built against an installed Reprise (Reprise::mpi): MpiRuntime
// on MPI_COMM_WORLD, a ring exchange and an allreduce through reprise::Comm, a checkpoint, the uniform end.
// Prints `mpi consumer ok`.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <reprise/mpi.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  bool ok = false;
  {
    reprise::MpiRuntime rt(MPI_COMM_WORLD);
    reprise::Comm& comm = rt.messages();
    const int rank = rt.rank(), size = rt.size();
    long value = rank;
    rt.protect("value", &value);
    long got = -1;
    comm.sendrecv(&value, sizeof value, (rank + 1) % size, 0, &got, sizeof got, (rank + size - 1) % size, 0);
    const std::int64_t sum = comm.allreduce(static_cast<std::int64_t>(got), reprise::Comm::Op::Sum);
    value = static_cast<long>(sum);
    rt.checkpoint(1);
    rt.finish();
    ok = got == (rank + size - 1) % size && sum == static_cast<std::int64_t>(size) * (size - 1) / 2;
    if (rank == 0) std::printf("mpi consumer %s\n", ok ? "ok" : "FAILED");
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
