#include "fingerprint/xxh3.hpp"

#include <xxhash.h>

namespace dtrace {

#if defined(DTRACE_XXH3_AVX2)
std::uint64_t xxh3_64_avx2(const void* data, std::size_t bytes);
#endif

namespace {

using Hash = std::uint64_t (*)(const void*, std::size_t);

std::uint64_t xxh3_64_library(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

Hash choose() {
#if defined(DTRACE_XXH3_AVX2)
  if (__builtin_cpu_supports("avx2")) return xxh3_64_avx2;
#endif
  return xxh3_64_library;
}

const Hash chosen = choose();

}  // namespace

std::uint64_t xxh3_64(const void* data, std::size_t bytes) { return chosen(data, bytes); }

const char* xxh3_implementation() { return chosen == xxh3_64_library ? "libxxhash" : "avx2"; }

}  // namespace dtrace
