// reprise-mpi-layout-check: every rank discovers the job's layout (REPRISE_RANKS_PER_NODE, REPRISE_GROUPS,
// REPRISE_BUDDIES), and the ranks check they agree and that every buddy is on another node. A layout that cannot
// work (one node, bad spec) must give the same clear error on every rank and a non-zero exit.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "mpi/layout.hpp"
#include "reprise/errors.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int status = 0;
  try {
    const auto layout = reprise::mpi::discover_layout(MPI_COMM_WORLD, reprise::mpi::TopologyConfig::from_env());
    // Same layout everywhere: compare every rank's tables with rank 0's.
    std::vector<int> mine;
    for (const auto* t : {&layout.node_of, &layout.group_of, &layout.buddy_of})
      mine.insert(mine.end(), t->begin(), t->end());
    std::vector<int> root = mine;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_INT, 0, MPI_COMM_WORLD);
    bool ok = root == mine;
    for (int r = 0; r < size; ++r) ok = ok && layout.node_of[layout.buddy_of[r]] != layout.node_of[r];
    // Every rank holds as many wards as it has... at least one when the nodes are the same size.
    int all_ok = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("%s: %d ranks, %d nodes, %d groups; buddies", all_ok ? "layout ok" : "LAYOUT MISMATCH", size,
                  layout.nodes(), layout.groups());
      for (int r = 0; r < size; ++r) std::printf(" %d->%d", r, layout.buddy_of[r]);
      std::printf("\n");
    }
    status = all_ok ? 0 : 1;
  } catch (const reprise::Error& e) {
    if (rank == 0) std::printf("reprise: %s\n", e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
