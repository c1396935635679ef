// Where a rank runs: its NUMA node and the CUDA device closest to it (hwloc; GPUs located through their PCI bus
// ids). MpiRuntime::placement_json() reports it (the apps print and record every rank's), and
// MpiRuntime::closest_gpu() gives the GPU choice to applications before they pick a device (the apps' main() passes
// it to Kokkos as --kokkos-device-id unless the command line or KOKKOS_DEVICE_ID / KOKKOS_MAP_DEVICE_ID_BY chose).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "protocol/topology.hpp"

namespace reprise::protocol {

struct Placement {
  int numa_node = -1;  ///< -1 when hwloc cannot tell
  std::string cpuset;  ///< hwloc's text form of the CPUs the process is bound to (or last ran on)
  int gpu = -1;        ///< CUDA device index; -1 without GPUs
  int gpu_numa_node = -1;
};

/// The GPU for the `local_index`-th rank of a node that runs on NUMA node `numa`: among the GPUs attached to that
/// NUMA node (all GPUs when none is, or when `numa` is unknown), the (local_index mod count)-th. -1 without GPUs.
/// `gpu_numa[i]` is the NUMA node of CUDA device i (-1 unknown).
int choose_gpu(const std::vector<int>& gpu_numa, int numa, int local_index);

/// The calling process's placement. `gpu_pci_bus_ids` are the CUDA devices' PCI bus ids in device order
/// (gpu::cuda_pci_bus_ids()). Never throws: what hwloc cannot tell stays -1.
Placement locate(int local_index, const std::vector<std::string>& gpu_pci_bus_ids);

/// A replacement process learns which rank it replaces only when it joins the survivors, after the application
/// chose its GPU. So the survivors start replacements with REPRISE_REPLACING="RANK:LOCAL_INDEX,..." in their
/// environment, one entry per replacement in the order of their ranks in the spawned world (the failed ranks,
/// ascending), and MpiRuntime::closest_gpu() picks the GPU of the replaced rank's local index: on the replaced
/// rank's node, the GPU its death freed (instead of device 0, which another rank there uses).
std::string replacing_env(const std::vector<int>& failed, const Layout& layout);
/// The entry of the `spawned_rank`-th replacement in a REPRISE_REPLACING value: {replaced rank, its local index}.
/// Throws ConfigError naming the problem when the value is malformed or has no such entry.
struct Replacing {
  int rank = -1;
  int local_index = -1;
};
Replacing parse_replacing(const std::string& value, int spawned_rank);

/// Which spare process takes each failed rank's place (REPRISE_SPARES): for failed rank i (in the recovery's order),
/// the index of its spare. First, in that order, each failed rank gets the lowest unassigned spare that runs on its
/// node (`failed_node[i]`, the node where the rank ran; kUnknownNode: none matches), the place its death freed; then
/// the others get the lowest unassigned spares. Needs at least as many spares as failed ranks (else ConfigError).
constexpr long kUnknownNode = -(1L << 62);
std::vector<int> assign_spares(const std::vector<long>& failed_node, const std::vector<long>& spare_node);

}  // namespace reprise::protocol
