// An ordinary MPI program outside the tree, wrapped through an installed Reprise (Reprise::interpose): a ring
// exchange through MPI_Sendrecv on MPI_COMM_WORLD, an allreduce, a checkpoint. Prints `wrapped consumer ok`.
#include <mpi.h>

#include <cstdio>
#include <reprise/interpose.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  reprise::MpiRuntime& rt = reprise::wrapped_runtime();
  long value = rank;
  rt.protect("value", &value);
  long got = -1;
  MPI_Sendrecv(&value, 1, MPI_LONG, (rank + 1) % size, 0, &got, 1, MPI_LONG, (rank + size - 1) % size, 0,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  long sum = 0;
  MPI_Allreduce(&got, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  value = sum;
  rt.checkpoint(1);
  const bool ok = got == (rank + size - 1) % size && sum == static_cast<long>(size) * (size - 1) / 2;
  if (rank == 0) std::printf("wrapped consumer %s\n", ok ? "ok" : "FAILED");
  MPI_Finalize();
  return ok ? 0 : 1;
}
