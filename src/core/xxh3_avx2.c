/* XXH3-64 compiled for AVX2: this file alone is built with -mavx2 (src/CMakeLists.txt, x86-64 only), and in C, so
 * that no inline function of external linkage (as C++ headers have) is emitted here with AVX2 code that another
 * translation unit could end up calling. xxHash's own functions are static (XXH_INLINE_ALL). Called only through
 * reprise::core::xxh3_64 (src/core/xxh3.cpp), which checks that the CPU has AVX2 first. */
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t reprise_xxh3_64_avx2(const void* data, size_t bytes);

uint64_t reprise_xxh3_64_avx2(const void* data, size_t bytes) {
  return XXH3_64bits(data, bytes);
}
