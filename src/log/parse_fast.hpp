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
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "log/record.hpp"

namespace dtrace::log {

struct ParsedLine;
class Intern;

class CanonicalLines {
 public:
  // Fills `out` and returns true when `line` is canonical and its identity
  // matches the template for its seq; false means "use the full parser".
  bool parse(std::string_view line, ParsedLine& out) const;

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
    if (index >= templates_.size()) {
      if (index > 2 * learned_ + 1024) return;
      templates_.resize(index + 1);
    }
    Template& t = templates_[index];
    if (t.valid && t.identity == s.identity && t.record.scalar == s.scalar) return;
    if (parsed.scalar != s.scalar) return;
    if (!identity_fields_only(s.identity)) return;
    t.identity.assign(s.identity);
    t.record = parsed;
    if (!t.valid) ++learned_;
    t.valid = true;
  }

 private:
  static constexpr std::int64_t kMaxTemplates = 1 << 20;

  // The parts of a canonical line.
  struct Shape {
    std::int64_t step = 0, rank = 0, seq = 0, count = 0;
    bool end_record = false;
    bool scalar = false;        // ends in bits and value, not hash
    std::string_view identity;
    std::string_view hash;      // the hash's digits, or a scalar's bits
    std::string_view value;     // a scalar's value, a JSON number
    std::string_view chain;     // an end record's chain digits, when written
    std::int64_t line = 0;      // an end record's line number, 0 when not written
  };
  static bool split(std::string_view line, Shape& out);
  static bool split_scalar(std::string_view rest, Shape& out);

  struct Template {
    std::string identity;
    Record record;
    bool valid = false;
  };
  std::vector<Template> templates_;
  std::size_t learned_ = 0;  // templates valid
};

}  // namespace dtrace::log
