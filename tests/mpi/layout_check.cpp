// reprise-mpi-layout-check: every rank discovers the job's layout (REPRISE_RANKS_PER_NODE, REPRISE_GROUPS,
// REPRISE_BUDDIES), and the ranks check they agree and that every buddy is on another node. A layout that cannot
// work (one node, bad spec) must give the same clear error on every rank and a non-zero exit.
// LAYOUT_CHECK_NODES=blocks:K or round-robin:M (this program's own) gives the ranks nodes by MPI_Comm_split instead
// (consecutive blocks of K; rank r on node r mod M), through the path real nodes take (mpi::layout_from_nodes):
// the first is a rule, the second a table.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
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
    const auto topology = reprise::mpi::TopologyConfig::from_env();
    reprise::protocol::Layout layout;
    const char* nodes = std::getenv("LAYOUT_CHECK_NODES");
    int blocks = 0, modulo = 0;
    if (nodes &&
        (std::sscanf(nodes, "blocks:%d", &blocks) == 1 || std::sscanf(nodes, "round-robin:%d", &modulo) == 1)) {
      MPI_Comm node = MPI_COMM_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, blocks > 0 ? rank / blocks : rank % modulo, rank, &node);
      layout = reprise::mpi::layout_from_nodes(MPI_COMM_WORLD, node, topology.spec);
      MPI_Comm_free(&node);
    } else {
      layout = reprise::mpi::discover_layout(MPI_COMM_WORLD, topology);
    }
    // Same layout everywhere: compare every rank's view of every rank with rank 0's.
    std::vector<int> mine;
    for (int r = 0; r < size; ++r)
      mine.insert(mine.end(), {layout.node_of(r), layout.local_index(r), layout.group_of(r), layout.buddy_of(r)});
    std::vector<int> root = mine;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_INT, 0, MPI_COMM_WORLD);
    bool ok = root == mine;
    for (int r = 0; r < size; ++r) ok = ok && layout.node_of(layout.buddy_of(r)) != layout.node_of(r);
    for (int r = 0; r < size; ++r) {  // each rank is among its buddy's wards
      const auto wards = layout.wards_of(layout.buddy_of(r));
      ok = ok && std::find(wards.begin(), wards.end(), r) != wards.end();
    }
    // Every rank holds as many wards as it has... at least one when the nodes are the same size.
    int all_ok = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("%s: %d ranks, %d nodes, %d groups (%s, %zu bytes of tables); buddies",
                  all_ok ? "layout ok" : "LAYOUT MISMATCH", size, layout.nodes(), layout.groups(),
                  layout.ranks_per_node() > 0 ? "nodes by rule" : "nodes by table", layout.table_bytes());
      for (int r = 0; r < size; ++r) std::printf(" %d->%d", r, layout.buddy_of(r));
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
