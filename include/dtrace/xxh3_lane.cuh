// XXH3-64 (seed 0, default secret) taken apart into the steps a GPU runs in
// parallel, in one header that nvcc compiles for the device and g++ for the host.
//
// Why this exists: the GPU fingerprint must equal the CPU one bit for bit
// (dtrace-fp(5), FINGERPRINT). Keeping every piece of arithmetic here, and only the thread
// mapping in cuda/, lets the CPU test suite prove the GPU's arithmetic against
// libxxhash without a GPU (tests/xxh3_lane_test.cpp).
//
// How XXH3's long-input path (len > 240) decomposes. The input is read as
// stripes of 64 bytes = 8 lanes of u64; 16 stripes make a block. Each stripe
// updates the 8 accumulators:
//     acc[i]   += lo32(w[i] ^ key[s+i]) * hi32(w[i] ^ key[s+i])
//     acc[i^1] += w[i]
// Both are plain additions mod 2^64, so a block's contribution to lane i,
//     delta[i] = sum_s product(w_s[i]) + sum_s w_s[i^1],
// does not depend on the accumulators and every block's delta can be computed
// at once, by as many threads as there are words. Only the scramble after each
// full block is sequential and nonlinear: acc = scramble(acc + delta). That
// chain is 8 independent lanes of a few integer operations per block, cheap
// next to reading the block. We call each unit of the chain a *group*: the full
// blocks, then one last group of the remaining whole stripes plus the final
// stripe (the last 64 bytes, with its own secret offset), which is not
// scrambled. The 8 accumulators are then merged pairwise.
//
// Inputs of 0..240 bytes take XXH3's short paths, which one thread computes.
//
// Loads: the GPU cannot read a u64 at an address that is not a multiple of 8,
// and tensors may start anywhere. Every data load therefore reads the aligned
// words holding the wanted bytes and shifts them together; it only ever reads
// aligned words that contain at least one wanted byte, so it never touches a
// page the input does not touch. The same code runs on the host, so the CPU
// tests at unaligned offsets prove it too.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define DTRACE_HD __host__ __device__
#else
#define DTRACE_HD
#endif

// Loops over a thread's 4 stripes unroll on the device, so their arrays stay in
// registers; g++ would warn about the unknown pragma.
#if defined(__CUDA_ARCH__)
#define DTRACE_UNROLL _Pragma("unroll")
#else
#define DTRACE_UNROLL
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "xxh3_lane.cuh assembles little-endian words by shifting; port it before building big-endian"
#endif

namespace dtrace::xxh3 {

using u8 = unsigned char;
using u32 = uint32_t;
using u64 = uint64_t;

inline constexpr u64 kPrime32_1 = 0x9E3779B1U;
inline constexpr u64 kPrime32_2 = 0x85EBCA77U;
inline constexpr u64 kPrime32_3 = 0xC2B2AE3DU;
inline constexpr u64 kPrime64_1 = 0x9E3779B185EBCA87ULL;
inline constexpr u64 kPrime64_2 = 0xC2B2AE3D27D4EB4FULL;
inline constexpr u64 kPrime64_3 = 0x165667B19E3779F9ULL;
inline constexpr u64 kPrime64_4 = 0x85EBCA77C2B2AE63ULL;
inline constexpr u64 kPrime64_5 = 0x27D4EB2F165667C5ULL;

inline constexpr size_t kLanes = 8;
inline constexpr size_t kStripeBytes = 64;
inline constexpr size_t kStripesPerBlock = 16;  // (192 - 64) / 8 for the default secret
inline constexpr size_t kBlockBytes = kStripeBytes * kStripesPerBlock;
inline constexpr size_t kSecretBytes = 192;
inline constexpr size_t kShortMax = 240;  // XXH3_MIDSIZE_MAX

// Secret offsets of the long path (xxhash.h: secretSize - 64, - 7, + 11).
inline constexpr size_t kScrambleKeyOffset = kSecretBytes - kStripeBytes;         // 128
inline constexpr size_t kFinalStripeKeyOffset = kSecretBytes - kStripeBytes - 7;  // 121
inline constexpr size_t kMergeKeyOffset = 11;

// XXH3_kSecret, the default secret, as an initializer list: the device keeps
// its copy in __constant__ memory, the host in a static array.
#define DTRACE_XXH3_SECRET_BYTES                                                                  \
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, \
      0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67,   \
      0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff,   \
      0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81,   \
      0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b,   \
      0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef,   \
      0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc,   \
      0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8,   \
      0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3,   \
      0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda,   \
      0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47,   \
      0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95,   \
      0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e

// ---------------------------------------------------------------------------
// Loads

// One aligned u64 of the input. On the device through the read-only data path
// (the input is not written while it is hashed); on the host by memcpy, which
// is how C++ reads bytes as another type without undefined behaviour.
DTRACE_HD inline u64 load_aligned_data(const u8* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned long long*>(p));
#else
  u64 v;
  memcpy(&v, p, sizeof v);
  return v;
#endif
}

// One aligned u64 of the secret: a generic load on the device, because the
// secret may sit in constant or shared memory, where __ldg does not apply.
DTRACE_HD inline u64 load_aligned_secret(const u8* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const u64*>(p);
#else
  u64 v;
  memcpy(&v, p, sizeof v);
  return v;
#endif
}

// Bytes [p, p+8) as a little-endian u64 from the aligned word(s) holding them.
// When p is not aligned both aligned words hold wanted bytes.
template <u64 (*Load)(const u8*)>
DTRACE_HD inline u64 read_le64_with(const u8* p) {
  const unsigned shift = static_cast<unsigned>(reinterpret_cast<uintptr_t>(p) & 7u);
  const u8* base = p - shift;
  const u64 lo = Load(base);
  if (shift == 0) return lo;
  const u64 hi = Load(base + 8);
  return (lo >> (8 * shift)) | (hi << (64 - 8 * shift));
}

// Bytes [p, p+4): the second aligned word is read only when it holds one of them.
template <u64 (*Load)(const u8*)>
DTRACE_HD inline u32 read_le32_with(const u8* p) {
  const unsigned shift = static_cast<unsigned>(reinterpret_cast<uintptr_t>(p) & 7u);
  const u8* base = p - shift;
  const u64 lo = Load(base) >> (8 * shift);
  if (shift <= 4) return static_cast<u32>(lo);
  const u64 hi = Load(base + 8);
  return static_cast<u32>(lo | (hi << (64 - 8 * shift)));
}

DTRACE_HD inline u64 data_le64(const u8* p) { return read_le64_with<load_aligned_data>(p); }
DTRACE_HD inline u32 data_le32(const u8* p) { return read_le32_with<load_aligned_data>(p); }
DTRACE_HD inline u8 data_u8(const u8* p) {
  const unsigned shift = static_cast<unsigned>(reinterpret_cast<uintptr_t>(p) & 7u);
  return static_cast<u8>(load_aligned_data(p - shift) >> (8 * shift));
}
DTRACE_HD inline u64 secret_le64(const u8* secret, size_t offset) {
  return read_le64_with<load_aligned_secret>(secret + offset);
}
DTRACE_HD inline u32 secret_le32(const u8* secret, size_t offset) {
  return read_le32_with<load_aligned_secret>(secret + offset);
}

// ---------------------------------------------------------------------------
// Mixing primitives (xxhash.h names in parentheses)

DTRACE_HD inline u64 rotl64(u64 x, unsigned r) { return (x << r) | (x >> (64 - r)); }

DTRACE_HD inline u32 swap32(u32 x) {
  return ((x << 24) & 0xff000000u) | ((x << 8) & 0x00ff0000u) | ((x >> 8) & 0x0000ff00u) |
         ((x >> 24) & 0x000000ffu);
}

DTRACE_HD inline u64 swap64(u64 x) {
  return (static_cast<u64>(swap32(static_cast<u32>(x))) << 32) | swap32(static_cast<u32>(x >> 32));
}

// (XXH3_mul128_fold64) low ^ high half of the 128-bit product.
DTRACE_HD inline u64 mul128_fold64(u64 a, u64 b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  __extension__ using u128 = unsigned __int128;
  const u128 product = static_cast<u128>(a) * b;
  return static_cast<u64>(product) ^ static_cast<u64>(product >> 64);
#endif
}

// (XXH3_avalanche)
DTRACE_HD inline u64 avalanche(u64 h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ULL;
  return h ^ (h >> 32);
}

// (XXH64_avalanche)
DTRACE_HD inline u64 xxh64_avalanche(u64 h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  return h ^ (h >> 32);
}

// (XXH3_rrmxmx)
DTRACE_HD inline u64 rrmxmx(u64 h, u64 len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= 0x9FB21C651E98DF25ULL;
  h ^= (h >> 35) + len;
  h *= 0x9FB21C651E98DF25ULL;
  return h ^ (h >> 28);
}

// (XXH3_mix16B) with seed 0.
DTRACE_HD inline u64 mix16(const u8* input, const u8* secret, size_t secret_offset) {
  return mul128_fold64(data_le64(input) ^ secret_le64(secret, secret_offset),
                       data_le64(input + 8) ^ secret_le64(secret, secret_offset + 8));
}

// ---------------------------------------------------------------------------
// Short inputs, 0..240 bytes: one thread (XXH3_len_0to16_64b, _17to128_, _129to240_).

DTRACE_HD inline u64 hash_0to16(const u8* input, size_t len, const u8* secret) {
  if (len > 8) {
    const u64 lo = data_le64(input) ^ (secret_le64(secret, 24) ^ secret_le64(secret, 32));
    const u64 hi = data_le64(input + len - 8) ^ (secret_le64(secret, 40) ^ secret_le64(secret, 48));
    return avalanche(len + swap64(lo) + hi + mul128_fold64(lo, hi));
  }
  if (len >= 4) {
    const u32 first = data_le32(input);
    const u32 last = data_le32(input + len - 4);
    const u64 bitflip = secret_le64(secret, 8) ^ secret_le64(secret, 16);
    const u64 keyed = (last + (static_cast<u64>(first) << 32)) ^ bitflip;
    return rrmxmx(keyed, len);
  }
  if (len > 0) {
    const u32 c1 = data_u8(input);
    const u32 c2 = data_u8(input + (len >> 1));
    const u32 c3 = data_u8(input + len - 1);
    const u32 combined = (c1 << 16) | (c2 << 24) | c3 | (static_cast<u32>(len) << 8);
    const u64 bitflip = secret_le32(secret, 0) ^ secret_le32(secret, 4);
    return xxh64_avalanche(combined ^ bitflip);
  }
  return xxh64_avalanche(secret_le64(secret, 56) ^ secret_le64(secret, 64));
}

DTRACE_HD inline u64 hash_17to128(const u8* input, size_t len, const u8* secret) {
  u64 acc = len * kPrime64_1;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        acc += mix16(input + 48, secret, 96);
        acc += mix16(input + len - 64, secret, 112);
      }
      acc += mix16(input + 32, secret, 64);
      acc += mix16(input + len - 48, secret, 80);
    }
    acc += mix16(input + 16, secret, 32);
    acc += mix16(input + len - 32, secret, 48);
  }
  acc += mix16(input, secret, 0);
  acc += mix16(input + len - 16, secret, 16);
  return avalanche(acc);
}

DTRACE_HD inline u64 hash_129to240(const u8* input, size_t len, const u8* secret) {
  u64 acc = len * kPrime64_1;
  const size_t rounds = len / 16;
  for (size_t i = 0; i < 8; ++i) acc += mix16(input + 16 * i, secret, 16 * i);
  acc = avalanche(acc);
  for (size_t i = 8; i < rounds; ++i) acc += mix16(input + 16 * i, secret, 16 * (i - 8) + 3);
  acc += mix16(input + len - 16, secret, 136 - 17);  // XXH3_SECRET_SIZE_MIN - LASTOFFSET
  return avalanche(acc);
}

DTRACE_HD inline u64 hash_short(const u8* input, size_t len, const u8* secret) {
  if (len <= 16) return hash_0to16(input, len, secret);
  if (len <= 128) return hash_17to128(input, len, secret);
  return hash_129to240(input, len, secret);
}

// ---------------------------------------------------------------------------
// Long inputs, > 240 bytes: the lane steps.

// (XXH3_INIT_ACC) the starting value of accumulator `lane`.
DTRACE_HD inline u64 initial_accumulator(unsigned lane) {
  switch (lane) {
    case 0:
      return kPrime32_3;
    case 1:
      return kPrime64_1;
    case 2:
      return kPrime64_2;
    case 3:
      return kPrime64_3;
    case 4:
      return kPrime64_4;
    case 5:
      return kPrime32_2;
    case 6:
      return kPrime64_5;
    default:
      return kPrime32_1;
  }
}

// How a long input splits into groups (see the top of the file).
struct LongLayout {
  size_t full_blocks;   // groups 0 .. full_blocks-1: 16 stripes, then scramble
  size_t last_stripes;  // whole stripes of group `full_blocks` before the final stripe
  size_t groups;        // full_blocks + 1
};

DTRACE_HD inline LongLayout long_layout(size_t len) {
  const size_t full_blocks = (len - 1) / kBlockBytes;
  const size_t last_stripes = ((len - 1) - full_blocks * kBlockBytes) / kStripeBytes;
  return LongLayout{full_blocks, last_stripes, full_blocks + 1};
}

enum class StripeKind : unsigned char { none, normal, final };

// Which word lane `lane` of stripe `stripe` (0..15) of `group` reads, and with
// which key: `normal` stripes sit at their place with key offset 8*(stripe+lane),
// the `final` stripe is the input's last 64 bytes with key offset 121 + 8*lane.
struct StripeWord {
  StripeKind kind;
  size_t offset;  // byte offset of the word in the input
};

DTRACE_HD inline StripeWord stripe_word(const LongLayout& layout, size_t len, size_t group,
                                        unsigned stripe, unsigned lane) {
  const bool last_group = group == layout.full_blocks;
  if (!last_group || stripe < layout.last_stripes) {
    return StripeWord{StripeKind::normal, group * kBlockBytes + stripe * kStripeBytes + 8 * lane};
  }
  if (stripe == layout.last_stripes) {
    return StripeWord{StripeKind::final, len - kStripeBytes + 8 * lane};
  }
  return StripeWord{StripeKind::none, 0};
}

DTRACE_HD inline size_t stripe_key_offset(StripeKind kind, unsigned stripe, unsigned lane) {
  return kind == StripeKind::final ? kFinalStripeKeyOffset + 8 * lane : 8 * (stripe + lane);
}

// What one thread gathers for one lane over some stripes of a group: the
// products that lane adds to its own accumulator, and the sum of its words,
// which the partner lane (lane ^ 1) adds to its accumulator.
struct LanePartial {
  u64 products = 0;
  u64 words = 0;
};

DTRACE_HD inline void add_word(LanePartial& partial, u64 word, u64 key) {
  const u64 keyed = word ^ key;
  // (XXH_mult32to64): a 32x32->64 multiply, one IMAD.WIDE.U32 on the GPU.
  partial.products += static_cast<u64>(static_cast<u32>(keyed)) * static_cast<u32>(keyed >> 32);
  partial.words += word;
}

// A group's delta for a lane, from its own partial and its partner's.
DTRACE_HD inline u64 group_delta(const LanePartial& own, const LanePartial& partner) {
  return own.products + partner.words;
}

// (XXH3_scrambleAcc) with key = the secret at kScrambleKeyOffset + 8*lane.
DTRACE_HD inline u64 scramble(u64 acc, u64 key) {
  acc ^= acc >> 47;
  acc ^= key;
  return acc * kPrime32_1;
}

// One link of the sequential chain: add the group's delta, and scramble when
// the group is a full block.
DTRACE_HD inline u64 chain_step(u64 acc, u64 delta, bool full_block, u64 scramble_key) {
  acc += delta;
  return full_block ? scramble(acc, scramble_key) : acc;
}

// (XXH3_mix2Accs) for accumulators 2*pair and 2*pair+1.
DTRACE_HD inline u64 merge_pair(u64 acc_even, u64 acc_odd, unsigned pair, const u8* secret) {
  const size_t offset = kMergeKeyOffset + 16 * pair;
  return mul128_fold64(acc_even ^ secret_le64(secret, offset),
                       acc_odd ^ secret_le64(secret, offset + 8));
}

// (XXH3_mergeAccs) given the sum of the four merge_pair values.
DTRACE_HD inline u64 merge_finish(u64 len, u64 pair_sum) {
  return avalanche(len * kPrime64_1 + pair_sum);
}

// ---------------------------------------------------------------------------
// The GPU's thread layout (cuda/fingerprint.cu), here so the CPU tests can run
// it: a warp reads one group as 4 stripe quarters x 8 lanes, 256 contiguous
// bytes per load; thread `lane32` of the warp owns accumulator lane lane32 % 8
// of the stripes quarter + 4q (q = 0..3), quarter = lane32 / 8. The warp then
// adds the partner lane's word sum (shuffle xor 1) and the four quarters
// (shuffle xor 8, xor 16), which gives every thread its lane's group delta.

inline constexpr unsigned kWarpQuarters = 4;
inline constexpr unsigned kStripesPerThread = kStripesPerBlock / kWarpQuarters;

DTRACE_HD inline unsigned thread_lane(unsigned lane32) { return lane32 % kLanes; }
DTRACE_HD inline unsigned thread_stripe(unsigned lane32, unsigned q) {
  return lane32 / kLanes + kWarpQuarters * q;
}

// The secret words a thread needs, read once into registers.
struct ThreadKeys {
  u64 stripe[kStripesPerThread];
  u64 final_stripe;
  u64 scramble;
};

DTRACE_HD inline ThreadKeys thread_keys(const u8* secret, unsigned lane32) {
  const unsigned lane = thread_lane(lane32);
  ThreadKeys keys;
  DTRACE_UNROLL
  for (unsigned q = 0; q < kStripesPerThread; ++q) {
    keys.stripe[q] =
        secret_le64(secret, stripe_key_offset(StripeKind::normal, thread_stripe(lane32, q), lane));
  }
  keys.final_stripe = secret_le64(secret, stripe_key_offset(StripeKind::final, 0, lane));
  keys.scramble = secret_le64(secret, kScrambleKeyOffset + 8 * lane);
  return keys;
}

// A thread's words of one group: loaded apart from their use, so that the
// kernel can have the loads of several groups in flight at once.
struct ThreadWords {
  u64 word[kStripesPerThread];
  StripeKind kind[kStripesPerThread];
};

DTRACE_HD inline ThreadWords thread_load(const u8* input, const LongLayout& layout, size_t len,
                                         size_t group, unsigned lane32) {
  ThreadWords words;
  DTRACE_UNROLL
  for (unsigned q = 0; q < kStripesPerThread; ++q) {
    const StripeWord w =
        stripe_word(layout, len, group, thread_stripe(lane32, q), thread_lane(lane32));
    words.kind[q] = w.kind;
    words.word[q] = w.kind == StripeKind::none ? 0 : data_le64(input + w.offset);
  }
  return words;
}

DTRACE_HD inline LanePartial thread_partial(const ThreadWords& words, const ThreadKeys& keys) {
  LanePartial partial;
  DTRACE_UNROLL
  for (unsigned q = 0; q < kStripesPerThread; ++q) {
    if (words.kind[q] == StripeKind::none) continue;
    add_word(partial, words.word[q],
             words.kind[q] == StripeKind::final ? keys.final_stripe : keys.stripe[q]);
  }
  return partial;
}

// ---------------------------------------------------------------------------
// Sequential composition, for the host: the same steps the GPU runs on many
// threads, run in loops. tests/xxh3_lane_test.cpp compares it with libxxhash.

DTRACE_HD inline u64 hash_long(const u8* input, size_t len, const u8* secret) {
  const LongLayout layout = long_layout(len);
  u64 acc[kLanes];
  for (unsigned lane = 0; lane < kLanes; ++lane) acc[lane] = initial_accumulator(lane);
  for (size_t group = 0; group < layout.groups; ++group) {
    LanePartial partial[kLanes];
    for (unsigned lane = 0; lane < kLanes; ++lane) {
      for (unsigned stripe = 0; stripe < kStripesPerBlock; ++stripe) {
        const StripeWord word = stripe_word(layout, len, group, stripe, lane);
        if (word.kind == StripeKind::none) continue;
        add_word(partial[lane], data_le64(input + word.offset),
                 secret_le64(secret, stripe_key_offset(word.kind, stripe, lane)));
      }
    }
    for (unsigned lane = 0; lane < kLanes; ++lane) {
      acc[lane] = chain_step(acc[lane], group_delta(partial[lane], partial[lane ^ 1]),
                             group < layout.full_blocks,
                             secret_le64(secret, kScrambleKeyOffset + 8 * lane));
    }
  }
  u64 pair_sum = 0;
  for (unsigned pair = 0; pair < kLanes / 2; ++pair) {
    pair_sum += merge_pair(acc[2 * pair], acc[2 * pair + 1], pair, secret);
  }
  return merge_finish(len, pair_sum);
}

// XXH3_64bits(input, len) for any length, with `secret` = the default secret.
DTRACE_HD inline u64 hash(const u8* input, size_t len, const u8* secret) {
  return len <= kShortMax ? hash_short(input, len, secret) : hash_long(input, len, secret);
}

}  // namespace dtrace::xxh3
