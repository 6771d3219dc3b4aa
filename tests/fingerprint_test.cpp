#include "fingerprint/fingerprint.hpp"
#include "fingerprint/xxh3.hpp"

#include <xxhash.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

using dtrace::fingerprint;
using dtrace::to_hex16;

namespace {

std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// xxh3-64k/1 as dtrace-fp(5) states it, directly on top of XXH3_64bits: the reference the
// library's chunked, threaded and streaming forms must agree with.
std::uint64_t reference(const unsigned char* data, std::size_t len) {
  std::vector<std::uint64_t> words{len};
  for (std::size_t off = 0; off < len; off += 65536) {
    words.push_back(XXH3_64bits(data + off, std::min<std::size_t>(65536, len - off)));
  }
  return XXH3_64bits(words.data(), words.size() * 8);
}

// tools/xxh3-64k-reference.py's pattern(N): b[i] = ((i * 2654435761) mod 2^32) >> 24.
std::vector<unsigned char> pattern(std::size_t n) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<unsigned char>(static_cast<std::uint32_t>(i * 2654435761u) >> 24);
  }
  return v;
}

}  // namespace

TEST_CASE("fingerprint of the empty input is the published known answer") {
  CHECK(to_hex16(fingerprint(nullptr, 0)) == "c77b3abb6f87acd9");
  dtrace::FingerprintStream stream;
  CHECK(to_hex16(stream.finish()) == "c77b3abb6f87acd9");
}

TEST_CASE("fingerprint pins known answers computed by libxxhash outside dtrace") {
  // From `tools/xxh3-64k-reference.py --pattern N` (Python, ctypes on the stock
  // libxxhash.so, no dtrace code): the digest is a file-format contract, so a
  // change here is a format break. Sizes straddle the 64 KiB chunk boundaries,
  // and the last is above the threshold where hashing goes to threads.
  const std::pair<std::size_t, const char*> known[] = {
      {0, "c77b3abb6f87acd9"},        {1, "9e8d84aee6221671"},
      {3, "491c885b21c532dc"},        {65535, "46e693dcb4fda3d3"},
      {65536, "bf958b326484a396"},    {65537, "b65db3c41782c50c"},
      {131072, "9f6c70df784fe038"},   {131073, "aeb8bfaf9cb9032a"},
      {196625, "8b1795eaa01d3149"},   {9437201, "034804b846cf969c"},
  };
  for (const auto& [len, hex] : known) {
    INFO("pattern(" << len << ")");
    const auto data = pattern(len);
    CHECK(to_hex16(fingerprint(data.data(), len, 1)) == hex);
    CHECK(to_hex16(fingerprint(data.data(), len, 0)) == hex);
    dtrace::FingerprintStream stream;
    const std::size_t half = len / 2 + 1;
    stream.update(data.data(), std::min(half, len));
    if (len > half) stream.update(data.data() + half, len - half);
    CHECK(to_hex16(stream.finish()) == hex);
  }
}

TEST_CASE("fingerprint agrees with the reference for small inputs") {
  const unsigned char one = 'a';
  CHECK(fingerprint(&one, 1) == reference(&one, 1));
  const char* text = "dtrace";
  CHECK(fingerprint(text, 6) == reference(reinterpret_cast<const unsigned char*>(text), 6));
}

TEST_CASE("fingerprint agrees with a direct XXH3 computation at chunk boundaries") {
  const auto data = random_bytes(3 * 65536 + 17, 7);
  for (std::size_t len : {0ul, 1ul, 65535ul, 65536ul, 65537ul, 2 * 65536ul, data.size()}) {
    INFO("length " << len);
    CHECK(fingerprint(data.data(), len) == reference(data.data(), len));
  }
}

TEST_CASE("fingerprint is the same on one thread, several threads and streamed") {
  const auto data = random_bytes(20u << 20, 11);  // above the threading threshold
  const std::uint64_t expected = reference(data.data(), data.size());
  CHECK(fingerprint(data.data(), data.size(), 1) == expected);
  CHECK(fingerprint(data.data(), data.size(), 2) == expected);
  CHECK(fingerprint(data.data(), data.size(), 3) == expected);
  CHECK(fingerprint(data.data(), data.size(), 0) == expected);
  dtrace::FingerprintStream stream;
  std::size_t off = 0;
  std::mt19937 rng(3);
  while (off < data.size()) {
    const std::size_t piece = std::min<std::size_t>(rng() % 200000, data.size() - off);
    stream.update(data.data() + off, piece);
    off += piece;
  }
  CHECK(stream.finish() == expected);
}

TEST_CASE("fingerprint is order sensitive, unlike an XOR-sum") {
  std::vector<unsigned char> a(2 * 65536, 0), b(2 * 65536, 0);
  a[0] = 1;
  b[65536] = 1;  // the same chunk contents, swapped
  CHECK(fingerprint(a.data(), a.size()) != fingerprint(b.data(), b.size()));
}

TEST_CASE("every XXH3 implementation this CPU runs (AVX-512, AVX2) equals libxxhash's XXH3_64bits") {
  const auto implementations = dtrace::xxh3_implementations();
  REQUIRE(!implementations.empty());
  CHECK(std::string(implementations[0].name) == dtrace::xxh3_implementation());
  CHECK(std::string(implementations.back().name) == "libxxhash");
  const auto data = random_bytes(300000, 5);
  for (const auto& implementation : implementations) {
    INFO("implementation: " << implementation.name);
    for (std::size_t len = 0; len <= 4096; ++len) {
      REQUIRE(implementation.hash(data.data() + (len % 7), len) == XXH3_64bits(data.data() + (len % 7), len));
    }
    for (std::size_t len : {65535ul, 65536ul, 65537ul, 299993ul}) {
      REQUIRE(implementation.hash(data.data() + 3, len) == XXH3_64bits(data.data() + 3, len));
    }
  }
  // xxh3_64 is the first of them.
  CHECK(dtrace::xxh3_64(data.data(), 299993) == XXH3_64bits(data.data(), 299993));
}
