#include "core/xxh3.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#ifdef REPRISE_XXH3_AVX2
extern "C" std::uint64_t reprise_xxh3_64_avx2(const void* data, std::size_t bytes);  // src/core/xxh3_avx2.c
#endif

namespace reprise::core {
namespace {

using Hash = std::uint64_t (*)(const void*, std::size_t);

std::uint64_t baseline(const void* data, std::size_t bytes) {
  return XXH3_64bits(data, bytes);
}

struct Choice {
  Hash hash = &baseline;
  const char* unit = "baseline";
  Choice() {
#ifdef REPRISE_XXH3_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
      hash = &reprise_xxh3_64_avx2;
      unit = "avx2";
    }
#endif
  }
};

const Choice& choice() {
  static const Choice c;
  return c;
}

}  // namespace

std::uint64_t xxh3_64(const void* data, std::size_t bytes) {
  return choice().hash(data, bytes);
}

const char* xxh3_unit() {
  return choice().unit;
}

}  // namespace reprise::core
