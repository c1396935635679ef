#include "core/memory_budget.hpp"

#include <unistd.h>

#include <algorithm>

namespace reprise::core {

std::size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

std::size_t default_memory_budget(unsigned ranks_on_node) {
  return physical_memory_bytes() / 2 / std::max(1u, ranks_on_node);
}

}  // namespace reprise::core
