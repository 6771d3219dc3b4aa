// XXH3_64bits (seed 0, default secret) at the best speed this CPU allows.
//
// Debian's libxxhash is built for baseline x86-64 (SSE2). Where the CPU has
// AVX2 or AVX-512, an inlined copy of the same function compiled for it hashes
// faster (AVX2 about twice the library's speed; AVX-512 about 1.4x AVX2's on
// data in the caches, tools/bench/RESULTS.md); the digest is the same by
// construction (xxHash's vector paths are bit-identical), and
// tests/fingerprint_test.cpp checks every implementation this CPU runs
// against the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dtrace {

std::uint64_t xxh3_64(const void* data, std::size_t bytes);

// Which implementation xxh3_64 uses: "avx512", "avx2" or "libxxhash".
const char* xxh3_implementation();

struct Xxh3Implementation {
  using Hash = std::uint64_t (*)(const void*, std::size_t);
  const char* name;
  Hash hash;
};

// The implementations this CPU runs, best first (the first is xxh3_64's).
std::span<const Xxh3Implementation> xxh3_implementations();

}  // namespace dtrace
