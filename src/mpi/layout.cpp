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
  if (config.ranks_per_node > 0)
    return protocol::make_layout(protocol::emulated_node_keys(size, config.ranks_per_node), config.spec);
  // A node's key is the lowest rank among the ranks sharing its memory.
  MPI_Comm node;
  REPRISE_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int lowest = rank;
  REPRISE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, node));
  REPRISE_MPI_CHECK(MPI_Comm_free(&node));
  long key = lowest;
  std::vector<long> keys(static_cast<std::size_t>(size));
  REPRISE_MPI_CHECK(MPI_Allgather(&key, 1, MPI_LONG, keys.data(), 1, MPI_LONG, comm));
  return protocol::make_layout(keys, config.spec);
}

long own_node_key(const TopologyConfig& config, long emulated) {
  return config.ranks_per_node > 0 ? emulated : static_cast<long>(protocol::host_identity());
}

}  // namespace reprise::mpi
