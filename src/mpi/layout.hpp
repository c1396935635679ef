// The layout of a running MPI job: nodes from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (or emulated with
// REPRISE_RANKS_PER_NODE=k on one machine), then protocol::make_regular_layout (nodes of K consecutive ranks) or
// protocol::make_layout (any other placement) for groups and buddies.
#pragma once

#include <mpi.h>

#include <vector>

#include "protocol/topology.hpp"

namespace reprise::mpi {

struct TopologyConfig {
  protocol::LayoutSpec spec;
  int ranks_per_node = 0;  ///< > 0: emulate nodes of this many consecutive ranks
  /// >= 0 (REPRISE_REPLACEMENT_NODE, with emulated nodes only): the emulated node replacement processes start on,
  /// as after a node failure, when the MPI starts them wherever it has free slots. Default: the node of the rank
  /// replaced (a process failure on a full allocation).
  long replacement_node = -1;
  /// REPRISE_SPARE_NODES=n0,n1,... (with emulated nodes only): the emulated node each spare process runs on
  /// (REPRISE_SPARES), as on an allocation whose spares are spread over the nodes. Default: the node of its place in
  /// the launch (after the application's ranks).
  std::vector<long> spare_nodes;
  /// From REPRISE_GROUPS, REPRISE_BUDDIES and REPRISE_RANKS_PER_NODE. Throws ConfigError on bad values.
  static TopologyConfig from_env();
};

/// Collective over `comm`; every rank gets the same layout (ranks are those of `comm`). Called once, when the job
/// starts: the layout is the job's for good (a replacement takes its predecessor's place in it).
protocol::Layout discover_layout(MPI_Comm comm, const TopologyConfig& config);

/// The layout given each rank's node as a communicator (`node`: the ranks of `comm` that share its node, ranked as
/// in `comm`). Collective over `comm`. Nodes of K consecutive ranks give the layout as a rule (no table of N: two
/// allreduces); other placements gather every rank's node (docs/SCALING.md).
protocol::Layout layout_from_nodes(MPI_Comm comm, MPI_Comm node, const protocol::LayoutSpec& spec);

/// The node this process runs on, as a key equal for the processes of one node: with emulated nodes `emulated`
/// (the node of its rank, or REPRISE_REPLACEMENT_NODE for a replacement), otherwise its host name's hash.
long own_node_key(const TopologyConfig& config, long emulated);

}  // namespace reprise::mpi
