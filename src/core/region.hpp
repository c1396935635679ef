#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "reprise/memory_space.hpp"

namespace reprise::core {

/// One protected buffer.
struct Region {
  std::string name;
  void* data = nullptr;
  std::size_t bytes = 0;
  MemorySpace space = MemorySpace::Host;
  std::shared_ptr<void> keepalive;  ///< e.g. the Kokkos view whose allocation this is
};

}  // namespace reprise::core
