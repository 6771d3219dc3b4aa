#include "log/parse_fast.hpp"

#include "log/parse.hpp"

#include <charconv>
#include <cstring>

namespace dtrace::log {

namespace {

// The helpers below run a few times per line of every log read: always
// inlined, with the literal's length known at compile time, so the compares
// become a couple of word loads instead of calls into libc.
template <std::size_t N>
[[gnu::always_inline]] inline bool take(std::string_view& s, const char (&literal)[N]) {
  constexpr std::size_t n = N - 1;
  if (s.size() < n || std::memcmp(s.data(), literal, n) != 0) return false;
  s.remove_prefix(n);
  return true;
}

// A JSON integer as the full parser would accept it; anything unusual (a
// leading zero, more than 18 digits) is left to the full parser.
[[gnu::always_inline]] inline bool take_int(std::string_view& s, std::int64_t& out) {
  const char* p = s.data();
  const char* const end = p + s.size();
  const bool negative = p != end && *p == '-';
  if (negative) ++p;
  const char* const first = p;
  // Accumulate 18 digits at most: 19 could overflow (undefined behaviour even
  // though the value would then be refused).
  const char* const limit = end - first > 18 ? first + 18 : end;
  std::int64_t v = 0;
  while (p != limit && static_cast<unsigned char>(*p - '0') <= 9) {
    v = v * 10 + (*p - '0');
    ++p;
  }
  if (p != end && p == limit && static_cast<unsigned char>(*p - '0') <= 9) return false;
  const auto digits = p - first;
  if (digits == 0 || (digits > 1 && *first == '0')) return false;
  out = negative ? -v : v;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return true;
}

// A JSON number, exactly as the grammar has it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool json_number(std::string_view s) {
  std::size_t i = 0;
  auto digits = [&] {
    const std::size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

constexpr std::string_view kHashPrefix = ",\"hash\":\"";
constexpr std::string_view kBitsPrefix = ",\"bits\":\"";
constexpr std::string_view kValuePrefix = ",\"value\":";
constexpr std::size_t kSuffixSize = kHashPrefix.size() + 16 + 2;  // ,"hash":"<16>"}

}  // namespace

bool CanonicalLines::split(std::string_view line, Shape& out) {
  std::string_view s = line;
  if (!take(s, "{\"step\":") || !take_int(s, out.step) || !take(s, ",\"rank\":") ||
      !take_int(s, out.rank)) {
    return false;
  }
  // Records first: they are nearly every line, so they meet one compare.
  if (!take(s, ",\"seq\":")) {
    if (!take(s, ",\"end\":true,\"count\":")) return false;
    out.end_record = true;
    if (!take_int(s, out.count)) return false;
    if (take(s, ",\"chain\":\"")) {
      if (s.size() < 16 + 2 || s[16] != '"') return false;
      out.chain = s.substr(0, 16);
      s.remove_prefix(17);
    }
    // A line number (2 or more) or the full parser says why not.
    if (take(s, ",\"line\":") && (!take_int(s, out.line) || out.line < 2)) return false;
    return s == "}";
  }
  if (!take_int(s, out.seq) || !take(s, ",")) return false;
  // A tensor's line ends with its quoted hash, a scalar's with its number.
  const std::size_t size = s.size();
  if (size < 2 || s[size - 1] != '}' || s[size - 2] != '"') return split_scalar(s, out);
  if (size <= kSuffixSize) return false;
  // Views built from pointers: substr's range checks cost a call per use.
  const char* suffix = s.data() + size - kSuffixSize;
  // A word and a byte: a 9-byte memcmp is a call into libc, once per line.
  static_assert(kHashPrefix.size() == 9);
  if (std::memcmp(suffix, ",\"hash\":", 8) != 0 || suffix[8] != '"') return false;
  out.identity = std::string_view(s.data(), size - kSuffixSize);
  out.hash = std::string_view(suffix + kHashPrefix.size(), 16);
  return true;
}

// `rest`: what follows "seq":Q, in a line that does not end like a tensor's.
bool CanonicalLines::split_scalar(std::string_view rest, Shape& out) {
  if (rest.empty() || rest.back() != '}') return false;
  // A number holds no comma or quote, so the last ,"value": starts the value,
  // and the last ,"bits":" before it the bits.
  const std::size_t value_at = rest.rfind(kValuePrefix);
  if (value_at == std::string_view::npos) return false;
  const std::size_t number_at = value_at + kValuePrefix.size();
  out.value = rest.substr(number_at, rest.size() - 1 - number_at);
  if (!json_number(out.value)) return false;
  const std::string_view head = rest.substr(0, value_at);
  if (head.empty() || head.back() != '"') return false;
  const std::size_t bits_at = head.rfind(kBitsPrefix);
  if (bits_at == std::string_view::npos || bits_at == 0) return false;
  const std::size_t digits_at = bits_at + kBitsPrefix.size();
  out.hash = head.substr(digits_at, head.size() - 1 - digits_at);
  out.identity = head.substr(0, bits_at);
  out.scalar = true;
  return true;
}

bool CanonicalLines::parse(std::string_view line, ParsedLine& out) const {
  Shape s;
  if (!split(line, s)) return false;
  if (s.rank < 0 || s.rank > INT32_MAX) return false;
  if (s.end_record) {
    out.kind = LineKind::end;
    out.step = s.step;
    out.rank = s.rank;
    out.count = s.count;
    out.chain.reset();
    out.line.reset();
    if (s.line != 0) out.line = s.line;
    if (!s.chain.empty()) {
      Digest digest;
      if (!parse_digest(s.chain, digest)) return false;  // the full parser says why
      out.chain = digest.low;
    }
    return true;
  }
  if (s.seq < 0 || static_cast<std::size_t>(s.seq) >= templates_.size()) return false;
  const Template& t = templates_[static_cast<std::size_t>(s.seq)];
  if (!t.valid || t.record.scalar != s.scalar || t.identity != s.identity) return false;
  out.record = t.record;
  // Straight into the record: a Digest built on the stack and copied in cost
  // a stalled load per line (two 8-byte stores read back as one 16-byte load).
  // On failure the full parser starts the record afresh.
  if (!parse_digest(s.hash, out.record.digest)) return false;
  if (s.scalar) {
    // Both parsers round correctly, so they agree on every number both take;
    // one from_chars refuses (out of range) goes to the full parser.
    double value = 0.0;
    const auto [end, error] = std::from_chars(s.value.data(), s.value.data() + s.value.size(), value);
    if (error != std::errc() || end != s.value.data() + s.value.size()) return false;
    out.record.value = value;
    out.record.has_value = true;
  }
  out.record.step = s.step;
  out.record.seq = s.seq;
  out.record.rank = static_cast<std::int32_t>(s.rank);
  out.rank = s.rank;
  out.kind = LineKind::record;
  return true;
}

}  // namespace dtrace::log
