// The default memory budget of a rank (Config::memory_budget_bytes = 0): half the node's physical memory shared
// among the ranks on the node.
#pragma once

#include <cstddef>

namespace reprise::core {

/// Physical memory of this machine (sysconf), 0 when unknown.
std::size_t physical_memory_bytes();
/// Half of physical_memory_bytes() over `ranks_on_node` (at least 1); 0 when the memory is unknown (no budget).
std::size_t default_memory_budget(unsigned ranks_on_node);

}  // namespace reprise::core
