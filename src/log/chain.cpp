// The chained step digest, byte for byte as dtrace-fp(5) specifies it, so that
// another recorder written from the man page alone writes the same digests.
#include "log/chain.hpp"

#include <xxhash.h>

#include <array>
#include <charconv>

namespace dtrace::log {

// XXH3's streaming state is opaque in the shared library's API.
struct ChainHasher::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

namespace {

void u64le(std::array<unsigned char, 8>& out, std::uint64_t value) {
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

// Digest::hex() without its allocation: this runs once per record recorded.
std::string_view hex_digits(const Digest& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  static thread_local char out[32];
  for (int i = 0; i < digest.digits; ++i) {
    const int nibble = digest.digits - 1 - i;  // 0 = least significant
    const std::uint64_t word = nibble >= 16 ? digest.high : digest.low;
    out[i] = kDigits[(word >> ((nibble % 16) * 4)) & 0xf];
  }
  return {out, digest.digits};
}

}  // namespace

ChainHasher::ChainHasher() : state_(new State) {}
ChainHasher::~ChainHasher() { delete state_; }

void ChainHasher::begin(std::uint64_t previous, std::int64_t step) {
  XXH3_64bits_reset(state_->xxh);
  std::array<unsigned char, 8> bytes;
  u64le(bytes, previous);
  XXH3_64bits_update(state_->xxh, bytes.data(), bytes.size());
  u64le(bytes, static_cast<std::uint64_t>(step));
  XXH3_64bits_update(state_->xxh, bytes.data(), bytes.size());
}

void ChainHasher::field(std::string_view text) {
  std::array<unsigned char, 8> length;
  u64le(length, text.size());
  XXH3_64bits_update(state_->xxh, length.data(), length.size());
  XXH3_64bits_update(state_->xxh, text.data(), text.size());
}

void ChainHasher::add(const Record& r) {
  if (!is_compared(r.io)) return;
  field(r.scope);
  field(r.op);
  field(io_name(r.io));
  field(r.name);
  field(r.dtype);
  field(r.scalar ? "bits" : "hash");
  field(hex_digits(r.digest));
  scratch_.clear();
  if (r.has_shape) {
    scratch_ += '[';
    for (std::size_t i = 0; i < r.shape.size(); ++i) {
      if (i != 0) scratch_ += ',';
      char digits[24];
      const auto end = std::to_chars(digits, digits + sizeof digits, r.shape[i]).ptr;
      scratch_.append(digits, end);
    }
    scratch_ += ']';
  }
  field(scratch_);
}

std::uint64_t ChainHasher::finish() { return XXH3_64bits_digest(state_->xxh); }

std::uint64_t step_chain(std::uint64_t previous, const Step& step) {
  ChainHasher hasher;
  hasher.begin(previous, step.step);
  for (const Record& r : step.records) hasher.add(r);
  return hasher.finish();
}

ChainVerdict ChainVerifier::verify(const Step& step) {
  ChainVerdict verdict;
  if (step.declared_count < 0) return verdict;  // no end record: nothing written to check
  auto [it, fresh] = previous_.try_emplace(step.rank, 0);
  verdict.previous = it->second;
  it->second = step.chain.value_or(0);
  if (!step.chain) return verdict;
  verdict.logged = *step.chain;
  verdict.expected = step_chain(verdict.previous, step);
  verdict.kind = verdict.logged == verdict.expected ? ChainVerdict::Kind::matches
                                                    : ChainVerdict::Kind::mismatch;
  return verdict;
}

std::string chain_hex(std::uint64_t chain) { return Digest::from_u64(chain).hex(); }

}  // namespace dtrace::log
