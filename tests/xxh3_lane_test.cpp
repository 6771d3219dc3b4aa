// The GPU's XXH3 arithmetic (include/dtrace/xxh3_lane.cuh), run on the CPU and
// compared with libxxhash. This is what proves, in CI without a GPU, that the
// device computes the same digests as `dtrace hash`.
#include "dtrace/xxh3_lane.cuh"

#include <xxhash.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "fingerprint/fingerprint.hpp"

namespace {

alignas(8) constexpr unsigned char kSecret[dtrace::xxh3::kSecretBytes] = {DTRACE_XXH3_SECRET_BYTES};

// Random bytes with 16 bytes of slack on both sides: the lane loads read whole
// aligned words around the input, exactly as they do on the GPU, and the slack
// keeps those reads inside the vector.
struct PaddedBytes {
  static constexpr std::size_t kSlack = 16;
  std::vector<unsigned char> storage;

  PaddedBytes(std::size_t n, unsigned seed) : storage(n + 2 * kSlack + 8) {
    std::mt19937_64 rng(seed);
    for (auto& b : storage) b = static_cast<unsigned char>(rng());
  }
  // The input starts `misalign` bytes after an 8-byte boundary.
  const unsigned char* at(unsigned misalign) const {
    auto base = reinterpret_cast<std::uintptr_t>(storage.data()) + kSlack;
    base = (base + 7) & ~std::uintptr_t{7};
    return reinterpret_cast<const unsigned char*>(base + misalign);
  }
};

std::uint64_t lane_hash(const unsigned char* data, std::size_t len) {
  return dtrace::xxh3::hash(data, len, kSecret);
}

// xxh3-64k/1 (dtrace-fp(5), FINGERPRINT) with every XXH3 computed by the lane code: the
// chunk digests and the final hash over u64le(len) || digests.
std::uint64_t lane_fingerprint(const unsigned char* data, std::size_t len) {
  std::vector<std::uint64_t> words{len};
  for (std::size_t off = 0; off < len; off += dtrace::kFingerprintChunk) {
    words.push_back(lane_hash(data + off, std::min(dtrace::kFingerprintChunk, len - off)));
  }
  return lane_hash(reinterpret_cast<const unsigned char*>(words.data()), words.size() * 8);
}

// XXH3 the way one CTA of cuda/fingerprint.cu computes it, with the warp's
// shuffles written out as array permutations: each of the 32 threads of a warp
// loads and multiplies its words of a group (thread_load, thread_partial, the
// kernel's own calls), then xor 1 / 8 / 16 exchanges give every lane its
// delta, 8 lanes run the chain, and xor 1 / 2 / 4 exchanges merge.
std::uint64_t warp_layout_hash(const unsigned char* data, std::size_t len) {
  namespace x = dtrace::xxh3;
  if (len <= x::kShortMax) return x::hash_short(data, len, kSecret);
  const x::LongLayout layout = x::long_layout(len);
  x::ThreadKeys keys[32];
  for (unsigned t = 0; t < 32; ++t) keys[t] = x::thread_keys(kSecret, t);
  std::uint64_t acc[32];
  for (unsigned t = 0; t < 32; ++t) acc[t] = x::initial_accumulator(x::thread_lane(t));
  for (std::size_t group = 0; group < layout.groups; ++group) {
    x::LanePartial own[32];
    for (unsigned t = 0; t < 32; ++t) {
      own[t] = x::thread_partial(x::thread_load(data, layout, len, group, t), keys[t]);
    }
    std::uint64_t delta[32], sum8[32], sum16[32];
    for (unsigned t = 0; t < 32; ++t) {
      x::LanePartial partner;
      partner.words = own[t ^ 1].words;
      delta[t] = x::group_delta(own[t], partner);
    }
    for (unsigned t = 0; t < 32; ++t) sum8[t] = delta[t] + delta[t ^ 8];
    for (unsigned t = 0; t < 32; ++t) sum16[t] = sum8[t] + sum8[t ^ 16];
    for (unsigned t = 0; t < 32; ++t) {
      acc[t] = x::chain_step(acc[t], sum16[x::thread_lane(t)], group < layout.full_blocks,
                             keys[t].scramble);
    }
  }
  std::uint64_t merged[32], sum2[32], sum4[32];
  for (unsigned t = 0; t < 32; ++t) {
    const unsigned lane = x::thread_lane(t);
    merged[t] = lane % 2 == 0 ? x::merge_pair(acc[t], acc[t ^ 1], lane / 2, kSecret) : 0;
  }
  for (unsigned t = 0; t < 32; ++t) sum2[t] = merged[t] + merged[t ^ 2];
  for (unsigned t = 0; t < 32; ++t) sum4[t] = sum2[t] + sum2[t ^ 4];
  return x::merge_finish(len, sum4[0]);
}

}  // namespace

TEST_CASE("XXH3 in the GPU's warp layout equals XXH3_64bits") {
  const PaddedBytes bytes(200000, 8);
  std::vector<std::size_t> lengths;
  for (std::size_t len = 0; len <= 2100; ++len) lengths.push_back(len);
  for (std::size_t len : {65535ul, 65536ul, 65537ul, 131080ul, 199999ul}) lengths.push_back(len);
  for (const std::size_t len : lengths) {
    for (unsigned misalign : {0u, 5u}) {
      const std::uint64_t expected = XXH3_64bits(bytes.at(misalign), len);
      if (warp_layout_hash(bytes.at(misalign), len) != expected) {
        INFO("length " << len << ", misalignment " << misalign);
        REQUIRE(warp_layout_hash(bytes.at(misalign), len) == expected);
      }
    }
  }
}

TEST_CASE("lane XXH3 equals XXH3_64bits for every length 0..4096 at every alignment") {
  const PaddedBytes bytes(4096 + 8, 1);
  for (unsigned misalign = 0; misalign < 8; ++misalign) {
    const unsigned char* data = bytes.at(misalign);
    for (std::size_t len = 0; len <= 4096; ++len) {
      const std::uint64_t expected = XXH3_64bits(data, len);
      const std::uint64_t got = lane_hash(data, len);
      if (got != expected) {
        INFO("length " << len << ", misalignment " << misalign);
        REQUIRE(got == expected);
      }
    }
  }
}

TEST_CASE("lane XXH3 equals XXH3_64bits around the block and chunk boundaries") {
  const PaddedBytes bytes(300000, 2);
  for (std::size_t center : {1024ul, 2048ul, 65536ul, 65536ul + 1024, 131072ul, 262144ul}) {
    for (std::size_t len = center - 70; len <= center + 70; ++len) {
      for (unsigned misalign : {0u, 3u, 7u}) {
        INFO("length " << len << ", misalignment " << misalign);
        REQUIRE(lane_hash(bytes.at(misalign), len) == XXH3_64bits(bytes.at(misalign), len));
      }
    }
  }
}

TEST_CASE("lane XXH3 equals XXH3_64bits for random lengths up to several MiB") {
  // Lengths above one chunk are what the final combine hashes for big tensors.
  const PaddedBytes bytes(6u << 20, 3);
  std::mt19937_64 rng(4);
  for (int i = 0; i < 12; ++i) {
    const std::size_t len = rng() % (6u << 20);
    const unsigned misalign = static_cast<unsigned>(rng() % 8);
    INFO("length " << len << ", misalignment " << misalign);
    REQUIRE(lane_hash(bytes.at(misalign), len) == XXH3_64bits(bytes.at(misalign), len));
  }
}

TEST_CASE("the fingerprint computed by the lane code equals dtrace::fingerprint") {
  const PaddedBytes bytes(5u << 20, 5);
  std::mt19937_64 rng(6);
  std::vector<std::size_t> lengths{0, 1, 240, 241, 65535, 65536, 65537, 3 * 65536 + 100};
  for (int i = 0; i < 10; ++i) lengths.push_back(rng() % (5u << 20));
  for (const std::size_t len : lengths) {
    for (unsigned misalign : {0u, 1u, 4u, 6u}) {
      INFO("length " << len << ", misalignment " << misalign);
      REQUIRE(lane_fingerprint(bytes.at(misalign), len) ==
              dtrace::fingerprint(bytes.at(misalign), len));
    }
  }
  CHECK(dtrace::to_hex16(lane_fingerprint(nullptr, 0)) == "c77b3abb6f87acd9");
}

TEST_CASE("a group's delta does not depend on how its stripes are split between threads") {
  // The GPU gives each thread 4 of a block's 16 stripes and adds the partials;
  // the sequential code adds all 16 in one partial. Addition mod 2^64 makes
  // them equal: check it on one block with the GPU's split.
  const PaddedBytes bytes(4096, 7);
  const unsigned char* data = bytes.at(0);
  const std::size_t len = 4096;
  const auto layout = dtrace::xxh3::long_layout(len);
  for (unsigned lane = 0; lane < dtrace::xxh3::kLanes; ++lane) {
    dtrace::xxh3::LanePartial whole, whole_partner;
    std::uint64_t split_delta = 0;
    for (unsigned quarter = 0; quarter < 4; ++quarter) {
      dtrace::xxh3::LanePartial own, partner;
      for (unsigned q = 0; q < 4; ++q) {
        const unsigned stripe = quarter + 4 * q;
        for (unsigned l : {lane, lane ^ 1u}) {
          const auto word = dtrace::xxh3::stripe_word(layout, len, 1, stripe, l);
          const auto key = dtrace::xxh3::secret_le64(
              kSecret, dtrace::xxh3::stripe_key_offset(word.kind, stripe, l));
          dtrace::xxh3::add_word(l == lane ? own : partner,
                                 dtrace::xxh3::data_le64(data + word.offset), key);
          dtrace::xxh3::add_word(l == lane ? whole : whole_partner,
                                 dtrace::xxh3::data_le64(data + word.offset), key);
        }
      }
      split_delta += dtrace::xxh3::group_delta(own, partner);
    }
    CHECK(split_delta == dtrace::xxh3::group_delta(whole, whole_partner));
  }
}
