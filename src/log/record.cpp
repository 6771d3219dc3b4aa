#include "log/record.hpp"

#include <bit>
#include <cstdio>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dtrace::log {

std::string_view io_name(Io io) {
  switch (io) {
    case Io::in: return "in";
    case Io::out: return "out";
    case Io::state: return "state";
    case Io::metric: return "metric";
    case Io::timing: return "timing";
    case Io::other: break;
  }
  return "other";
}

Io parse_io(std::string_view text) {
  if (text == "in") return Io::in;
  if (text == "out") return Io::out;
  if (text == "state") return Io::state;
  if (text == "metric") return Io::metric;
  if (text == "timing") return Io::timing;
  return Io::other;
}

// Formatted into a buffer rather than with a chain of string `+`: g++ 12 at -O3
// inlines that chain and reports a -Wrestrict false positive, which -Dwerror
// turns into a release build that does not compile (issue 12).
std::string capture_file_name(std::int32_t rank, std::int64_t step, std::int64_t seq) {
  char name[80];
  std::snprintf(name, sizeof name, "r%d-s%lld-q%lld.bin", static_cast<int>(rank),
                static_cast<long long>(step), static_cast<long long>(seq));
  return name;
}

std::string_view status_name(StepStatus status) {
  switch (status) {
    case StepStatus::complete: return "complete";
    case StepStatus::incomplete: return "incomplete";
    case StepStatus::count_mismatch: return "count-mismatch";
    case StepStatus::late: return "late";
  }
  return "unknown";
}

std::string_view Digest::hex_to(std::array<char, 32>& out) const {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 0; i < digits; ++i) {
    const int nibble_index = digits - 1 - i;  // 0 = least significant
    const std::uint64_t word = nibble_index >= 16 ? high : low;
    const int shift = (nibble_index % 16) * 4;
    out[static_cast<std::size_t>(i)] = kDigits[(word >> shift) & 0xf];
  }
  return {out.data(), digits};
}

std::string Digest::hex() const {
  std::array<char, 32> digits_text;
  return std::string(hex_to(digits_text));
}

Digest Digest::from_u64(std::uint64_t value, std::uint8_t digits) {
  Digest d;
  d.low = value;
  d.digits = digits;
  return d;
}

namespace {

#if !defined(__SSE2__)
// Eight hex digits (first digit in the lowest byte, as read from memory on a
// little-endian machine) to their 32-bit value; false if any byte is not a
// hex digit. Branch-free SWAR: the hot path of reading a log is one 16-digit
// hash per record.
bool hex8(std::uint64_t chunk, std::uint32_t& out) {
  constexpr std::uint64_t ones = 0x0101010101010101ull;
  constexpr std::uint64_t high = 0x8080808080808080ull;
  if (chunk & high) return false;  // bytes >= 0x80 are never digits
  // Below 0x80, adding (0x80 - k) sets a byte's high bit exactly when the byte
  // is >= k, and never carries into the next byte.
  auto at_least = [&](std::uint64_t v, unsigned k) { return (v + ones * (0x80 - k)) & high; };
  const std::uint64_t lower = chunk | ones * 0x20;  // 'A'-'F' to 'a'-'f'; digits keep their value
  const std::uint64_t digit = at_least(chunk, '0') & ~at_least(chunk, '9' + 1);
  const std::uint64_t letter = at_least(lower, 'a') & ~at_least(lower, 'f' + 1);
  if ((digit | letter) != high) return false;
  // Value of each byte: digits c & 0xf, letters (c & 0xf) + 9.
  std::uint64_t v = (chunk & ones * 0x0f) + (letter >> 7) * 9;
  // Pack nibbles: bytes [d0 d1 ... d7] (d0 most significant) into one word.
  v = ((v << 4) | (v >> 8)) & 0x00ff00ff00ff00ffull;   // 16-bit lanes: d0d1, d2d3, ...
  v = ((v << 8) | (v >> 16)) & 0x0000ffff0000ffffull;  // 32-bit lanes: d0d1d2d3, ...
  v = (v << 16) | (v >> 32);
  out = static_cast<std::uint32_t>(v);
  return true;
}
#else
// Sixteen hex digits (most significant first) to their value; false if any
// byte is not a hex digit. The same rules as hex8, on all sixteen bytes at
// once in one SSE2 register (every x86-64 has it): about a fifth of the
// instructions of two hex8 calls, on the line every tensor record has.
bool hex16(const char* text, std::uint64_t& out) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text));
  const __m128i zero = _mm_setzero_si128();
  // Byte - '0' is at most 9 (unsigned) exactly for '0'..'9'; (byte | 0x20) -
  // 'a' at most 5 exactly for 'a'..'f' and 'A'..'F'. Saturating subtraction of
  // the bound leaves zero only within it.
  const __m128i digit = _mm_sub_epi8(x, _mm_set1_epi8('0'));
  const __m128i letter = _mm_sub_epi8(_mm_or_si128(x, _mm_set1_epi8(0x20)), _mm_set1_epi8('a'));
  const __m128i is_digit = _mm_cmpeq_epi8(_mm_subs_epu8(digit, _mm_set1_epi8(9)), zero);
  const __m128i is_letter = _mm_cmpeq_epi8(_mm_subs_epu8(letter, _mm_set1_epi8(5)), zero);
  if (_mm_movemask_epi8(_mm_or_si128(is_digit, is_letter)) != 0xffff) return false;
  const __m128i nibbles = _mm_or_si128(_mm_and_si128(is_digit, digit),
                                       _mm_and_si128(is_letter, _mm_add_epi8(letter, _mm_set1_epi8(10))));
  // 16-bit lanes hold two digits, the first in the low byte: first << 4 | second.
  const __m128i pairs = _mm_and_si128(_mm_or_si128(_mm_slli_epi16(nibbles, 4), _mm_srli_epi16(nibbles, 8)),
                                      _mm_set1_epi16(0x00ff));
  // Eight bytes, the most significant first in memory: byte-swap to the value.
  out = __builtin_bswap64(static_cast<std::uint64_t>(_mm_cvtsi128_si64(_mm_packus_epi16(pairs, pairs))));
  return true;
}
#endif

}  // namespace

bool parse_digest(std::string_view text, Digest& out) {
  if (text.size() == 16) {  // every xxh3-64k/1 hash
#if defined(__SSE2__)
    std::uint64_t value;
    if (!hex16(text.data(), value)) return false;
    out = Digest{0, value, 16};
    return true;
#else
    std::uint64_t first, second;
    std::memcpy(&first, text.data(), 8);
    std::memcpy(&second, text.data() + 8, 8);
    std::uint32_t hi, lo;
    if (!hex8(first, hi) || !hex8(second, lo)) return false;
    out = Digest{0, (std::uint64_t{hi} << 32) | lo, 16};
    return true;
#endif
  }
  if (text.empty() || text.size() > 32) return false;
  Digest d;
  d.digits = static_cast<std::uint8_t>(text.size());
  for (char c : text) {
    unsigned v;
    if (c >= '0' && c <= '9') v = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f') v = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v = static_cast<unsigned>(c - 'A' + 10);
    else return false;
    d.high = (d.high << 4) | (d.low >> 60);
    d.low = (d.low << 4) | v;
  }
  out = d;
  return true;
}

nlohmann::json to_json(const Record& r) {
  nlohmann::json j = {{"step", r.step},   {"rank", r.rank},
                      {"seq", r.seq},     {"scope", std::string(r.scope)},
                      {"op", std::string(r.op)},
                      {"io", std::string(r.io == Io::other ? r.io_text : io_name(r.io))},
                      {"name", std::string(r.name)}};
  if (!r.dtype.empty()) j["dtype"] = std::string(r.dtype);
  if (r.has_shape) j["shape"] = std::vector<std::int64_t>(r.shape.begin(), r.shape.end());
  if (!r.digest.empty()) j[r.scalar ? "bits" : "hash"] = r.digest.hex();
  if (r.has_value) j["value"] = r.value;
  return j;
}

std::string describe(const Record& r) {
  return std::string(r.scope) + " " + std::string(r.op) + " " +
         std::string(r.io == Io::other ? r.io_text : io_name(r.io)) + " " + std::string(r.name);
}

}  // namespace dtrace::log
