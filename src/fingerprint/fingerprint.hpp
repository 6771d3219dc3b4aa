// The tensor fingerprint `xxh3-64k/1` (dtrace-fp(5), FINGERPRINT) on the CPU.
//
//   digest_i    = XXH3_64bits(bytes[i*C : min((i+1)*C, len)]),  C = 65536
//   fingerprint = XXH3_64bits(u64le(len) || u64le(digest_0) || ...)
//
// The chunking is what lets a GPU hash at memory bandwidth and the CPU split the
// work across cores; the result does not depend on how many threads computed it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrace {

inline constexpr std::size_t kFingerprintChunk = 65536;
inline constexpr std::string_view kFingerprintAlgorithm = "xxh3-64k/1";

// Fingerprint of a whole buffer. `threads` > 1 hashes chunks on that many
// threads; 0 means "as many as the hardware has" for large inputs.
std::uint64_t fingerprint(const void* data, std::size_t bytes, unsigned threads = 1);

// The combine step alone, for callers (the GPU path, tests) that computed the
// chunk digests themselves.
std::uint64_t fingerprint_combine(std::uint64_t total_bytes, const std::uint64_t* digests,
                                  std::size_t count);

// Incremental form for inputs that arrive in pieces (files, stdin). Feeds of any
// size; the result equals fingerprint() over the concatenation.
class FingerprintStream {
 public:
  void update(const void* data, std::size_t bytes);
  std::uint64_t finish();

 private:
  std::vector<std::uint64_t> digests_;
  std::vector<unsigned char> pending_;  // bytes of the chunk being filled
  std::uint64_t total_ = 0;
};

// 16 lowercase hex digits, the way logs print a fingerprint.
std::string to_hex16(std::uint64_t value);

}  // namespace dtrace
