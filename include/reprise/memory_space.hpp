#pragma once

#include <cstdint>

namespace reprise {

/// Where a protected region lives: host memory (digested with XXH3 on the host) or GPU device memory
/// (digested, compacted and packed by kernels on the device).
enum class MemorySpace : std::uint8_t { Host = 0, Device = 1 };

const char* to_string(MemorySpace space);

}  // namespace reprise
