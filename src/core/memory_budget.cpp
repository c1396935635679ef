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

std::size_t log_segment_bytes(const Config& cfg) {
  constexpr std::size_t kLeast = std::size_t{64} << 10, kMost = std::size_t{1} << 20;
  if (cfg.log_segment_bytes != 0) return cfg.log_segment_bytes;
  if (cfg.memory_budget_bytes == 0) return kMost;
  return std::clamp(cfg.memory_budget_bytes / 64, kLeast, kMost);
}

}  // namespace reprise::core
