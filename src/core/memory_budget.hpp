// The default memory budget of a rank (Config::memory_budget_bytes = 0): half the node's physical memory shared
// among the ranks on the node.
#pragma once

#include <cstddef>

#include "reprise/config.hpp"

namespace reprise::core {

/// Physical memory of this machine (sysconf), 0 when unknown.
std::size_t physical_memory_bytes();
/// Half of physical_memory_bytes() over `ranks_on_node` (at least 1); 0 when the memory is unknown (no budget).
std::size_t default_memory_budget(unsigned ranks_on_node);

/// The message log's segment size for `cfg` (Config::log_segment_bytes): as set, else a 64th of an explicit
/// memory budget between 64 KiB and 1 MiB, else 1 MiB.
std::size_t log_segment_bytes(const Config& cfg);

}  // namespace reprise::core
