// Alignments the data path relies on, named once.
#pragma once

#include <cstddef>

namespace reprise::gpu {

/// Device allocations and the start of every packed segment in a staging buffer: cudaMalloc's alignment, so the
/// pack and unpack kernels and the D2H copies of a segment start on it (and the host twin behaves alike).
constexpr std::size_t kDeviceAlign = 256;
/// A logged payload's start in its log segment: payload copies (memcpy, D2H into pinned memory) start aligned.
constexpr std::size_t kPayloadAlign = 16;
/// Host buffers of versions: a cache line, so parallel digests and packs never share one.
constexpr std::size_t kCacheLine = 64;

/// `bytes` rounded up to a multiple of `alignment`.
constexpr std::size_t align_up(std::size_t bytes, std::size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace reprise::gpu
