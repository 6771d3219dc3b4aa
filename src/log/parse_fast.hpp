// The fast path for the record lines recorders actually write.
//
// A recorder writes every record in one canonical layout,
//   {"step":S,"rank":R,"seq":Q,<identity>,"hash":"<16 hex>"}        (tensors)
//   {"step":S,"rank":R,"seq":Q,<identity>,"bits":"<hex>","value":V}  (scalars)
// and the <identity> bytes (scope, op, io, name, dtype, shape) at a given seq
// are the same in every step and on every rank. So once the full parser has
// read a line, its identity bytes are remembered as the template for that seq;
// a later line whose identity bytes equal the template is read by scanning
// three integers and one digest (and a scalar's number). Anything else goes to
// the full parser, which stays the single definition of what a line means.
//
// Defined in this header, inline: the byte stage (diff/bytes.cpp) and the
// reader (log/parse.cpp) call it once per line, and a call across files cost
// the byte stage a tenth of its CPU (tools/bench/diff_cpu.sh).
#pragma once

#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "log/parse.hpp"
#include "log/record.hpp"

namespace dtrace::log {

class CanonicalLines {
 public:
  // Fills `out` and returns true when `line` is canonical and its identity
  // matches the template for its seq; false means "use the full parser".
  bool parse(std::string_view line, ParsedLine& out) const;

  // What parse() would read from a line, without building the record: for a
  // reader that only needs to know a line reads as its template's record
  // without a note or an error (diff's byte stage, diff/bytes.cpp).
  struct Reading {
    bool end_record = false;
    std::int64_t step = 0, rank = 0;
    std::int64_t seq = 0;    // a record's
    std::int64_t count = 0;  // an end record's
    Io io = Io::other;       // a record's
    // A record's template: its identity fields (step, seq, rank and digest
    // are those of the line that taught it), valid until the next learn().
    // Null for an end record.
    const Record* record = nullptr;
  };
  // True exactly when parse() would return true.
  bool read(std::string_view line, Reading& out) const;
  // The same for a line whose first `head` bytes the caller has compared
  // with {"step":STEP,"rank":RANK (a sequential reader knows its step's
  // prefix), so that they are not read again as numbers.
  bool read_after(std::string_view line, std::size_t head, std::int64_t step, std::int64_t rank,
                  Reading& out) const;

  // After the full parser read `line` into the record `parsed`: remember its
  // identity bytes as the template for its seq, if the line is canonical.
  // `identity_fields_only` says whether the identity bytes, read alone, hold
  // nothing but identity fields (the caller checks with the full parser).
  template <class CheckIdentity>
  void learn(std::string_view line, const Record& parsed, CheckIdentity&& identity_fields_only) {
    Shape s;
    if (!split(line, s) || s.end_record || s.seq < 0 || s.seq >= kMaxTemplates) return;
    const auto index = static_cast<std::size_t>(s.seq);
    // Templates are indexed by seq, which recorders number densely from 0. A
    // far larger seq is left to the full parser: one line with seq 1000000
    // must not cost a million templates' memory.
    if (index >= keys_.size()) {
      if (index > 2 * learned_ + 1024) return;
      keys_.resize(index + 1);
      records_.resize(index + 1);
    }
    Key& k = keys_[index];
    if (k.valid && k.identity == s.identity && k.scalar == s.scalar) return;
    if (parsed.scalar != s.scalar) return;
    if (!identity_fields_only(s.identity)) return;
    k.identity.assign(s.identity);
    k.io = parsed.io;
    k.scalar = s.scalar;
    records_[index] = parsed;
    if (!k.valid) ++learned_;
    k.valid = true;
  }

 private:
  static constexpr std::int64_t kMaxTemplates = 1 << 20;

  // The parts of a canonical line. No member initializers: split_rest sets
  // each field a line of its kind has (zeroing the whole struct per line was
  // a rep stos, a tenth of the byte stage's CPU, tools/bench/diff_cpu.sh).
  struct Shape {
    std::int64_t step, rank;
    std::int64_t seq;    // a record's
    std::int64_t count;  // an end record's
    bool end_record;
    bool scalar;                // a record's: ends in bits and value, not hash
    std::string_view identity;  // a record's
    std::string_view hash;      // a record's: the hash's digits, or a scalar's bits
    std::string_view value;     // a scalar's value, a JSON number
    std::string_view chain;     // an end record's chain digits, empty when not written
    std::int64_t line;          // an end record's line number, 0 when not written
  };
  static bool split(std::string_view line, Shape& out);
  // What follows {"step":S,"rank":R in a line.
  static bool split_rest(std::string_view rest, Shape& out);
  static bool split_scalar(std::string_view rest, Shape& out);

  // A template is a seq's identity bytes (its key) and the record they read
  // as, kept apart: the lookup each line makes touches keys only, which stay
  // in the L1 cache where a layer-level step's records (289 of 160 bytes)
  // would not (tools/bench/diff_cpu.sh).
  struct Key {
    std::string identity;
    Io io = Io::other;
    bool scalar = false;
    bool valid = false;
  };
  // The seq of the template a split record line reads as, or -1: the full parser's.
  std::int64_t match(const Shape& s) const;
  // A split line's fields both parse() and read() check: the end record's
  // chain, and the record's digest (into `digest`) and a scalar's value.
  static bool read_chain(const Shape& s, std::optional<std::uint64_t>& chain);
  static bool read_value(const Shape& s, double& value);
  bool read_shape(const Shape& s, Reading& out) const;
  std::vector<Key> keys_;        // by seq
  std::vector<Record> records_;  // by seq, valid where keys_ is
  std::size_t learned_ = 0;      // templates valid
};

// ---- definitions ----------------------------------------------------------
namespace fast {

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
inline bool json_number(std::string_view s) {
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

inline constexpr std::string_view kHashPrefix = ",\"hash\":\"";
inline constexpr std::string_view kBitsPrefix = ",\"bits\":\"";
inline constexpr std::string_view kValuePrefix = ",\"value\":";
inline constexpr std::size_t kSuffixSize = kHashPrefix.size() + 16 + 2;  // ,"hash":"<16>"}

}  // namespace fast

// split_rest and the helpers of parse and read are always inlined: each is a
// call per line otherwise, which measured as a third of the byte stage's CPU
// (tools/bench/diff_cpu.sh).
inline bool CanonicalLines::split(std::string_view line, Shape& out) {
  std::string_view s = line;
  if (!fast::take(s, "{\"step\":") || !fast::take_int(s, out.step) ||
      !fast::take(s, ",\"rank\":") || !fast::take_int(s, out.rank)) {
    return false;
  }
  return split_rest(s, out);
}

[[gnu::always_inline]] inline bool CanonicalLines::split_rest(std::string_view s, Shape& out) {
  // Records first: they are nearly every line, so they meet one compare.
  if (!fast::take(s, ",\"seq\":")) {
    if (!fast::take(s, ",\"end\":true,\"count\":")) return false;
    out.end_record = true;
    out.chain = {};
    out.line = 0;
    if (!fast::take_int(s, out.count)) return false;
    if (fast::take(s, ",\"chain\":\"")) {
      if (s.size() < 16 + 2 || s[16] != '"') return false;
      out.chain = s.substr(0, 16);
      s.remove_prefix(17);
    }
    // A line number (2 or more) or the full parser says why not.
    if (fast::take(s, ",\"line\":") && (!fast::take_int(s, out.line) || out.line < 2)) return false;
    return s == "}";
  }
  out.end_record = false;
  out.scalar = false;
  if (!fast::take_int(s, out.seq) || !fast::take(s, ",")) return false;
  // A tensor's line ends with its quoted hash, a scalar's with its number.
  const std::size_t size = s.size();
  if (size < 2 || s[size - 1] != '}' || s[size - 2] != '"') return split_scalar(s, out);
  if (size <= fast::kSuffixSize) return false;
  // Views built from pointers: substr's range checks cost a call per use.
  const char* suffix = s.data() + size - fast::kSuffixSize;
  // A word and a byte: a 9-byte memcmp is a call into libc, once per line.
  static_assert(fast::kHashPrefix.size() == 9);
  if (std::memcmp(suffix, ",\"hash\":", 8) != 0 || suffix[8] != '"') return false;
  out.identity = std::string_view(s.data(), size - fast::kSuffixSize);
  out.hash = std::string_view(suffix + fast::kHashPrefix.size(), 16);
  return true;
}

// `rest`: what follows "seq":Q, in a line that does not end like a tensor's.
inline bool CanonicalLines::split_scalar(std::string_view rest, Shape& out) {
  if (rest.empty() || rest.back() != '}') return false;
  // A number holds no comma or quote, so the last ,"value": starts the value,
  // and the last ,"bits":" before it the bits.
  const std::size_t value_at = rest.rfind(fast::kValuePrefix);
  if (value_at == std::string_view::npos) return false;
  const std::size_t number_at = value_at + fast::kValuePrefix.size();
  out.value = rest.substr(number_at, rest.size() - 1 - number_at);
  if (!fast::json_number(out.value)) return false;
  const std::string_view head = rest.substr(0, value_at);
  if (head.empty() || head.back() != '"') return false;
  const std::size_t bits_at = head.rfind(fast::kBitsPrefix);
  if (bits_at == std::string_view::npos || bits_at == 0) return false;
  const std::size_t digits_at = bits_at + fast::kBitsPrefix.size();
  out.hash = head.substr(digits_at, head.size() - 1 - digits_at);
  out.identity = head.substr(0, bits_at);
  out.scalar = true;
  return true;
}

[[gnu::always_inline]] inline std::int64_t CanonicalLines::match(const Shape& s) const {
  if (s.rank < 0 || s.rank > INT32_MAX) return -1;
  if (s.seq < 0 || static_cast<std::size_t>(s.seq) >= keys_.size()) return -1;
  const Key& k = keys_[static_cast<std::size_t>(s.seq)];
  if (!k.valid || k.scalar != s.scalar || k.identity != s.identity) return -1;
  return s.seq;
}

[[gnu::always_inline]] inline bool CanonicalLines::read_chain(const Shape& s,
                                                              std::optional<std::uint64_t>& chain) {
  chain.reset();
  if (s.chain.empty()) return true;
  Digest digest;
  if (!parse_digest(s.chain, digest)) return false;  // the full parser says why
  chain = digest.low;
  return true;
}

[[gnu::always_inline]] inline bool CanonicalLines::read_value(const Shape& s, double& value) {
  // Both parsers round correctly, so they agree on every number both fast::take;
  // one from_chars refuses (out of range) goes to the full parser.
  const auto [end, error] = std::from_chars(s.value.data(), s.value.data() + s.value.size(), value);
  return error == std::errc() && end == s.value.data() + s.value.size();
}

inline bool CanonicalLines::parse(std::string_view line, ParsedLine& out) const {
  Shape s;
  if (!split(line, s)) return false;
  if (s.end_record) {
    if (s.rank < 0 || s.rank > INT32_MAX || !read_chain(s, out.chain)) return false;
    out.kind = LineKind::end;
    out.step = s.step;
    out.rank = s.rank;
    out.count = s.count;
    out.line.reset();
    if (s.line != 0) out.line = s.line;
    return true;
  }
  const std::int64_t seq = match(s);
  if (seq < 0) return false;
  out.record = records_[static_cast<std::size_t>(seq)];
  // Straight into the record: a Digest built on the stack and copied in cost
  // a stalled load per line (two 8-byte stores read back as one 16-byte load).
  // On failure the full parser starts the record afresh.
  if (!parse_digest(s.hash, out.record.digest)) return false;
  if (s.scalar) {
    double value = 0.0;
    if (!read_value(s, value)) return false;
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

[[gnu::always_inline]] inline  // Fills all of `out` but its step and rank.
    bool
    CanonicalLines::read_shape(const Shape& s, Reading& out) const {
  out.end_record = s.end_record;
  if (s.end_record) {
    std::optional<std::uint64_t> chain;
    if (s.rank < 0 || s.rank > INT32_MAX || !read_chain(s, chain)) return false;
    out.count = s.count;
    out.record = nullptr;
    return true;
  }
  const std::int64_t seq = match(s);
  Digest digest;
  double value = 0.0;
  if (seq < 0 || !parse_digest(s.hash, digest) || (s.scalar && !read_value(s, value))) return false;
  out.seq = seq;
  out.io = keys_[static_cast<std::size_t>(seq)].io;
  out.record = &records_[static_cast<std::size_t>(seq)];
  return true;
}

inline bool CanonicalLines::read(std::string_view line, Reading& out) const {
  Shape s;
  if (!split(line, s) || !read_shape(s, out)) return false;
  out.step = s.step;
  out.rank = s.rank;
  return true;
}

inline bool CanonicalLines::read_after(std::string_view line, std::size_t head, std::int64_t step,
                                       std::int64_t rank, Reading& out) const {
  Shape s;
  s.step = step;
  s.rank = rank;
  if (!split_rest(std::string_view(line.data() + head, line.size() - head), s) ||
      !read_shape(s, out))
    return false;
  // From the arguments, not back from `s`: a struct copy of the two would
  // read them as one 16-byte load from two 8-byte stores (a stall per line).
  out.step = step;
  out.rank = rank;
  return true;
}

}  // namespace dtrace::log
