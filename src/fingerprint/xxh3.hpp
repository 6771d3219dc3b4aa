// XXH3_64bits (seed 0, default secret) at the best speed this CPU allows.
//
// Debian's libxxhash is built for baseline x86-64 (SSE2). Where the CPU has
// AVX2, an inlined copy of the same function compiled for AVX2 hashes about
// twice as fast; the digest is the same by construction (xxHash's vector paths
// are bit-identical), and tests/fingerprint_test.cpp checks it against the library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtrace {

std::uint64_t xxh3_64(const void* data, std::size_t bytes);

// Which implementation xxh3_64 uses: "avx2" or "libxxhash".
const char* xxh3_implementation();

}  // namespace dtrace
