// XXH3-64 with the widest vector unit of the CPU it runs on: the host digest of the format (chunks, checksums).
#pragma once

#include <cstddef>
#include <cstdint>

namespace reprise::core {

/// XXH3-64 of `bytes` bytes at `data`: the value of xxHash's XXH3_64bits, computed with AVX2 where the CPU has it
/// (x86-64; chosen once, at the first call) and with the build's baseline vector unit otherwise.
std::uint64_t xxh3_64(const void* data, std::size_t bytes);

/// The vector unit xxh3_64 uses on this CPU: "avx2" or "baseline".
const char* xxh3_unit();

}  // namespace reprise::core
