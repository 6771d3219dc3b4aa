#include "fingerprint/xxh3.hpp"

#include <xxhash.h>

#include <array>

namespace dtrace {

#if defined(DTRACE_XXH3_AVX512)
std::uint64_t xxh3_64_avx512(const void* data, std::size_t bytes);
#endif
#if defined(DTRACE_XXH3_AVX2)
std::uint64_t xxh3_64_avx2(const void* data, std::size_t bytes);
#endif

namespace {

std::uint64_t xxh3_64_library(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

// The implementations this CPU runs, best first; at most the three built in.
struct Runnable {
  std::array<Xxh3Implementation, 3> list{};
  std::size_t count = 0;
};

Runnable runnable() {
  Runnable r;
  const auto add = [&r](Xxh3Implementation implementation) { r.list[r.count++] = implementation; };
#if defined(DTRACE_XXH3_AVX512)
  // AVX-512F and the OS's saving of its registers (libgcc checks XCR0).
  if (__builtin_cpu_supports("avx512f")) add({"avx512", xxh3_64_avx512});
#endif
#if defined(DTRACE_XXH3_AVX2)
  if (__builtin_cpu_supports("avx2")) add({"avx2", xxh3_64_avx2});
#endif
  add({"libxxhash", xxh3_64_library});
  return r;
}

// Chosen on first use, with no namespace-scope initializer in this file, so a
// static initializer elsewhere that hashes finds it ready whatever the link order.
const Runnable& runs_here() {
  static const Runnable r = runnable();
  return r;
}

}  // namespace

std::uint64_t xxh3_64(const void* data, std::size_t bytes) {
  static const Xxh3Implementation::Hash chosen = runs_here().list[0].hash;
  return chosen(data, bytes);
}

const char* xxh3_implementation() { return runs_here().list[0].name; }

std::span<const Xxh3Implementation> xxh3_implementations() {
  return {runs_here().list.data(), runs_here().count};
}

}  // namespace dtrace
