// Parses one line of a dtrace-fp/1 log. This is the hot path of every command
// (a run is millions of lines), so it uses simdjson's on-demand API and interns
// the strings it keeps; headers are rare and are handed back for nlohmann/json.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "log/intern.hpp"
#include "log/record.hpp"
#include "util/result.hpp"

namespace dtrace::log {

enum class LineKind : std::uint8_t { record, end, header, malformed };

struct ParsedLine {
  LineKind kind = LineKind::malformed;
  Record record;            // for LineKind::record
  std::int64_t step = 0;    // for LineKind::end
  std::int64_t rank = 0;    // for LineKind::end
  std::int64_t count = 0;   // for LineKind::end
  std::optional<std::uint64_t> chain;  // for LineKind::end: its chained digest, when written
  std::optional<std::int64_t> line;    // for LineKind::end: its own line number, when written
  std::string problem;      // for LineKind::malformed: what is wrong, without file:line
};

class LineParser {
 public:
  LineParser();
  ~LineParser();
  LineParser(LineParser&&) noexcept;
  LineParser& operator=(LineParser&&) noexcept;

  // `line` must be followed in memory by at least kLinePadding readable bytes.
  // Strings kept in the result are interned in `intern`.
  void parse(std::string_view line, Intern& intern, ParsedLine& out);

  // Whether `identity`, the bytes between a canonical line's seq and its hash
  // (parse_fast.hpp), holds identity fields only (scope, op, io, name, and
  // dtype and shape when present): then every canonical line carrying these
  // bytes reads as the same record but for step, rank, seq and digest. The
  // fast path's templates rest on this, and so does diff's byte stage
  // (diff/bytes.hpp).
  bool identity_only(std::string_view identity, Intern& intern);

 private:
  void parse_full(std::string_view line, Intern& intern, ParsedLine& out);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Bytes a caller must keep readable after every line handed to LineParser.
inline constexpr std::size_t kLinePadding = 64;

// Parses a header line (first line of a file) fully, with nlohmann/json.
// Errors say what is wrong without file:line; the reader adds those.
Result<Header> parse_header(std::string_view line);

}  // namespace dtrace::log
