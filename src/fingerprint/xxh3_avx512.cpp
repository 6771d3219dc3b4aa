// XXH3_64bits compiled for AVX-512 (this file alone is built with -mavx512f),
// as xxh3_avx2.cpp is for AVX2: every xxHash function inlined and static here,
// run only after xxh3.cpp has checked that the CPU (and the OS) support AVX-512.
// GCC 12's own avx512fintrin.h self-initializes its "undefined" vectors
// (__m512i __Y = __Y), which -Wmaybe-uninitialized reports wherever they are
// inlined (GCC bug 105593): a false positive, silenced for this file alone.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace dtrace {

std::uint64_t xxh3_64_avx512(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

}  // namespace dtrace
