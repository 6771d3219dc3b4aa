#include "fingerprint/fingerprint.hpp"

#include "fingerprint/xxh3.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <thread>

namespace dtrace {

static_assert(std::endian::native == std::endian::little,
              "the combine step writes u64le by memcpy; port it before building big-endian");

namespace {

// Below this size threads cost more than they save (measured by tools/bench/hash.sh).
constexpr std::size_t kParallelThreshold = 8u << 20;

void hash_chunks(const unsigned char* data, std::size_t bytes, std::size_t first,
                 std::size_t last, std::uint64_t* digests) {
  for (std::size_t i = first; i < last; ++i) {
    const std::size_t begin = i * kFingerprintChunk;
    const std::size_t size = std::min(kFingerprintChunk, bytes - begin);
    digests[i] = xxh3_64(data + begin, size);
  }
}

}  // namespace

std::uint64_t fingerprint_combine(std::uint64_t total_bytes, const std::uint64_t* digests,
                                  std::size_t count) {
  std::vector<std::uint64_t> buffer(count + 1);
  buffer[0] = total_bytes;
  if (count > 0) std::memcpy(buffer.data() + 1, digests, count * sizeof(std::uint64_t));
  return xxh3_64(buffer.data(), buffer.size() * sizeof(std::uint64_t));
}

std::uint64_t fingerprint(const void* data, std::size_t bytes, unsigned threads) {
  const auto* base = static_cast<const unsigned char*>(data);
  const std::size_t chunks = (bytes + kFingerprintChunk - 1) / kFingerprintChunk;
  std::vector<std::uint64_t> digests(chunks);
  // Asked only for large inputs: glibc answers hardware_concurrency() by
  // reading sysfs (open, read, close), which cost a recorded tensor of 256
  // bytes 40 us, 50 times its hashing (tools/bench/capi_record.py).
  if (threads == 0 && bytes >= kParallelThreshold) {
    threads = std::max(1u, std::thread::hardware_concurrency());
  }
  if (threads <= 1 || bytes < kParallelThreshold || chunks < threads) {
    hash_chunks(base, bytes, 0, chunks, digests.data());
  } else {
    std::vector<std::jthread> workers;
    const std::size_t per = (chunks + threads - 1) / threads;
    for (unsigned t = 1; t < threads; ++t) {
      const std::size_t first = std::min(chunks, t * per);
      const std::size_t last = std::min(chunks, first + per);
      workers.emplace_back(hash_chunks, base, bytes, first, last, digests.data());
    }
    hash_chunks(base, bytes, 0, std::min(chunks, per), digests.data());
  }
  return fingerprint_combine(bytes, digests.data(), digests.size());
}

void FingerprintStream::update(const void* data, std::size_t bytes) {
  const auto* in = static_cast<const unsigned char*>(data);
  total_ += bytes;
  if (!pending_.empty()) {
    const std::size_t take = std::min(bytes, kFingerprintChunk - pending_.size());
    pending_.insert(pending_.end(), in, in + take);
    in += take;
    bytes -= take;
    if (pending_.size() == kFingerprintChunk) {
      digests_.push_back(xxh3_64(pending_.data(), pending_.size()));
      pending_.clear();
    }
  }
  while (bytes >= kFingerprintChunk) {
    digests_.push_back(xxh3_64(in, kFingerprintChunk));
    in += kFingerprintChunk;
    bytes -= kFingerprintChunk;
  }
  pending_.insert(pending_.end(), in, in + bytes);
}

std::uint64_t FingerprintStream::finish() {
  if (!pending_.empty()) {
    digests_.push_back(xxh3_64(pending_.data(), pending_.size()));
    pending_.clear();
  }
  return fingerprint_combine(total_, digests_.data(), digests_.size());
}

std::string to_hex16(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = kDigits[value & 0xf];
    value >>= 4;
  }
  return out;
}

}  // namespace dtrace
