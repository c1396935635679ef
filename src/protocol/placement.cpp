#include "protocol/placement.hpp"

#include <hwloc.h>

#include <cstdlib>
#include <memory>
#include <sstream>

#include "reprise/errors.hpp"

namespace reprise::protocol {

int choose_gpu(const std::vector<int>& gpu_numa, int numa, int local_index) {
  if (gpu_numa.empty()) return -1;
  std::vector<int> near;
  for (int i = 0; i < static_cast<int>(gpu_numa.size()); ++i)
    if (numa >= 0 && gpu_numa[i] == numa) near.push_back(i);
  if (near.empty())
    for (int i = 0; i < static_cast<int>(gpu_numa.size()); ++i) near.push_back(i);
  return near[static_cast<std::size_t>(local_index < 0 ? 0 : local_index) % near.size()];
}

namespace {

struct Topology {
  hwloc_topology_t topo = nullptr;
  bool ok = false;
  Topology() {
    if (hwloc_topology_init(&topo) != 0) return;
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);  // PCI devices, for GPUs
    // GPUs are found by their PCI bus ids (from CUDA): only the PCI discovery is needed. The other I/O plugins
    // are slow or worse: hwloc's gl plugin probes X displays and sometimes waits 5 s (seen in a chroot,
    // 1 load in 3; it made every MPI app start and finish seconds late).
    for (const char* plugin : {"gl", "opencl", "levelzero", "cuda", "nvml", "rsmi"})
      hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
    ok = hwloc_topology_load(topo) == 0;
  }
  ~Topology() {
    if (topo) hwloc_topology_destroy(topo);
  }
};

struct Bitmap {
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  ~Bitmap() { hwloc_bitmap_free(b); }
};

int first_numa_of(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset) {
  Bitmap nodes;
  hwloc_cpuset_to_nodeset(topo, cpuset, nodes.b);
  return hwloc_bitmap_first(nodes.b);
}

}  // namespace

Placement locate(int local_index, const std::vector<std::string>& gpu_pci_bus_ids) {
  Placement p;
  Topology t;
  std::vector<int> gpu_numa(gpu_pci_bus_ids.size(), -1);
  if (t.ok) {
    Bitmap cpus;
    // An unbound process may run anywhere: then the CPU it last ran on says more than the whole machine.
    if (hwloc_get_cpubind(t.topo, cpus.b, HWLOC_CPUBIND_PROCESS) != 0 ||
        hwloc_bitmap_isequal(cpus.b, hwloc_topology_get_topology_cpuset(t.topo)))
      hwloc_get_last_cpu_location(t.topo, cpus.b, HWLOC_CPUBIND_PROCESS);
    p.numa_node = first_numa_of(t.topo, cpus.b);
    char* text = nullptr;
    if (hwloc_bitmap_asprintf(&text, cpus.b) >= 0 && text) {
      p.cpuset = text;
      std::free(text);
    }
    for (std::size_t i = 0; i < gpu_pci_bus_ids.size(); ++i) {
      hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(t.topo, gpu_pci_bus_ids[i].c_str());
      hwloc_obj_t anc = dev ? hwloc_get_non_io_ancestor_obj(t.topo, dev) : nullptr;
      if (anc && anc->cpuset) gpu_numa[i] = first_numa_of(t.topo, anc->cpuset);
    }
  }
  p.gpu = choose_gpu(gpu_numa, p.numa_node, local_index);
  if (p.gpu >= 0) p.gpu_numa_node = gpu_numa[static_cast<std::size_t>(p.gpu)];
  return p;
}

std::string replacing_env(const std::vector<int>& failed, const Layout& layout) {
  std::string out;
  for (int r : failed) {
    if (!out.empty()) out += ',';
    out += std::to_string(r) + ':' + std::to_string(layout.local_index(r));
  }
  return out;
}

Replacing parse_replacing(const std::string& value, int spawned_rank) {
  const auto bad = [&](const std::string& why) {
    return ConfigError("REPRISE_REPLACING='" + value +
                       "' (set by Reprise for the replacement processes it starts): " + why);
  };
  if (value.empty() || value.back() == ',') throw bad("an empty entry");
  std::vector<Replacing> entries;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) {
    Replacing e;
    char colon = 0;
    std::istringstream one(item);
    if (!(one >> e.rank >> colon >> e.local_index) || colon != ':' || e.rank < 0 || e.local_index < 0 ||
        !(one >> std::ws).eof())
      throw bad("'" + item + "' is not RANK:LOCAL_INDEX");
    entries.push_back(e);
  }
  if (spawned_rank < 0 || spawned_rank >= static_cast<int>(entries.size()))
    throw bad("no entry for replacement " + std::to_string(spawned_rank) + " (" + std::to_string(entries.size()) +
              " entries)");
  return entries[static_cast<std::size_t>(spawned_rank)];
}

std::vector<int> assign_spares(const std::vector<long>& failed_node, const std::vector<long>& spare_node) {
  if (spare_node.size() < failed_node.size())
    throw ConfigError("assign_spares: " + std::to_string(failed_node.size()) + " failed ranks and only " +
                      std::to_string(spare_node.size()) + " spares");
  std::vector<int> spare_of(failed_node.size(), -1);
  std::vector<bool> taken(spare_node.size(), false);
  for (std::size_t i = 0; i < failed_node.size(); ++i) {
    if (failed_node[i] == kUnknownNode) continue;
    for (std::size_t s = 0; s < spare_node.size(); ++s)
      if (!taken[s] && spare_node[s] == failed_node[i]) {
        spare_of[i] = static_cast<int>(s);
        taken[s] = true;
        break;
      }
  }
  std::size_t next = 0;
  for (int& s : spare_of) {
    if (s >= 0) continue;
    while (taken[next]) ++next;
    s = static_cast<int>(next);
    taken[next] = true;
  }
  return spare_of;
}

}  // namespace reprise::protocol
