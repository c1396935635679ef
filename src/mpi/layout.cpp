#include "mpi/layout.hpp"

#include <cstdlib>
#include <string>

#include "mpi/check.hpp"
#include "protocol/barrier_choice.hpp"
#include "reprise/errors.hpp"

namespace reprise::mpi {

TopologyConfig TopologyConfig::from_env() {
  TopologyConfig c;
  if (const char* v = std::getenv("REPRISE_GROUPS")) c.spec.groups = v;
  if (const char* v = std::getenv("REPRISE_BUDDIES")) c.spec.buddies = v;
  if (const char* v = std::getenv("REPRISE_RANKS_PER_NODE"); v && *v) {
    char* end = nullptr;
    const long k = std::strtol(v, &end, 10);
    if (*end || k < 1) throw ConfigError(std::string("REPRISE_RANKS_PER_NODE='") + v + "' must be a number >= 1");
    c.ranks_per_node = static_cast<int>(k);
  }
  if (const char* v = std::getenv("REPRISE_REPLACEMENT_NODE"); v && *v) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end || n < 0)
      throw ConfigError(std::string("REPRISE_REPLACEMENT_NODE='") + v + "' must be an emulated node number >= 0");
    if (c.ranks_per_node == 0)
      throw ConfigError(
          "REPRISE_REPLACEMENT_NODE says where replacements start on emulated nodes: it needs "
          "REPRISE_RANKS_PER_NODE (on real nodes the MPI decides where they start)");
    c.replacement_node = n;
  }
  if (const char* v = std::getenv("REPRISE_SPARE_NODES"); v && *v) {
    if (c.ranks_per_node == 0)
      throw ConfigError(
          "REPRISE_SPARE_NODES says where spare processes run on emulated nodes: it needs "
          "REPRISE_RANKS_PER_NODE (on real nodes they run where the MPI started them)");
    std::string item;
    for (const char* p = v;; ++p) {
      if (*p != ',' && *p != '\0') {
        item += *p;
        continue;
      }
      char* end = nullptr;
      const long n = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end || n < 0)
        throw ConfigError(std::string("REPRISE_SPARE_NODES='") + v + "': '" + item +
                          "' is not an emulated node number >= 0 (use n0,n1,...: one per spare)");
      c.spare_nodes.push_back(n);
      item.clear();
      if (*p == '\0') break;
    }
  }
  return c;
}

protocol::Layout discover_layout(MPI_Comm comm, const TopologyConfig& config) {
  int rank = 0, size = 0;
  REPRISE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  REPRISE_MPI_CHECK(MPI_Comm_size(comm, &size));
  if (config.ranks_per_node > 0) return protocol::make_regular_layout(size, config.ranks_per_node, config.spec);
  MPI_Comm node = MPI_COMM_NULL;
  REPRISE_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  try {
    protocol::Layout layout = layout_from_nodes(comm, node, config.spec);
    REPRISE_MPI_CHECK(MPI_Comm_free(&node));
    return layout;
  } catch (...) {
    REPRISE_MPI_DISCARD(MPI_Comm_free(&node));
    throw;
  }
}

// Nodes of K consecutive ranks (every node but the last has K, each starts at a multiple of K) are the rule, told
// by two allreduces; any other placement (e.g. ranks dealt round robin over the nodes) is a table, from an
// allgather of every rank's node key (its node's lowest rank): the one layout whose size grows with the job.
protocol::Layout layout_from_nodes(MPI_Comm comm, MPI_Comm node, const protocol::LayoutSpec& spec) {
  int rank = 0, size = 0, local = 0, local_size = 0;
  REPRISE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  REPRISE_MPI_CHECK(MPI_Comm_size(comm, &size));
  REPRISE_MPI_CHECK(MPI_Comm_rank(node, &local));
  REPRISE_MPI_CHECK(MPI_Comm_size(node, &local_size));
  int lowest = rank;
  REPRISE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, node));
  int k = local_size;
  REPRISE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &k, 1, MPI_INT, MPI_MAX, comm));
  int regular = rank == lowest + local && lowest % k == 0 && (local_size == k || lowest + local_size == size) ? 1 : 0;
  REPRISE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &regular, 1, MPI_INT, MPI_MIN, comm));
  if (regular) return protocol::make_regular_layout(size, k, spec);
  long key = lowest;
  std::vector<long> keys(static_cast<std::size_t>(size));
  REPRISE_MPI_CHECK(MPI_Allgather(&key, 1, MPI_LONG, keys.data(), 1, MPI_LONG, comm));
  return protocol::make_layout(keys, spec);
}

long own_node_key(const TopologyConfig& config, long emulated) {
  return config.ranks_per_node > 0 ? emulated : static_cast<long>(protocol::host_identity());
}

}  // namespace reprise::mpi
