// The layout of a running MPI job: nodes from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (or emulated with
// REPRISE_RANKS_PER_NODE=k on one machine), then coord::make_layout for groups and buddies.
#pragma once

#include <mpi.h>

#include "coord/topology.hpp"

namespace reprise::coord {

struct TopologyConfig {
  LayoutSpec spec;
  int ranks_per_node = 0;  ///< > 0: emulate nodes of this many consecutive ranks
  /// From REPRISE_GROUPS, REPRISE_BUDDIES and REPRISE_RANKS_PER_NODE. Throws ConfigError on bad values.
  static TopologyConfig from_env();
};

/// Collective over `comm`; every rank gets the same layout (ranks are those of `comm`).
Layout discover_layout(MPI_Comm comm, const TopologyConfig& config);

}  // namespace reprise::coord
