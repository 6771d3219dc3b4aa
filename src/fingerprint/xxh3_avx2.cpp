// XXH3_64bits compiled for AVX2 (this file alone is built with -mavx2). Every
// xxHash function is inlined and static here, so no AVX2 code can leak into
// the rest of the program through a shared inline definition; it runs only
// after xxh3.cpp has checked that the CPU supports AVX2.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace dtrace {

std::uint64_t xxh3_64_avx2(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

}  // namespace dtrace
