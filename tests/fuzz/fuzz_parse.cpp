// libFuzzer target for log::LineParser (src/log/parse.cpp and the fast path in
// src/log/parse_fast.cpp).
//
// The input is split into lines. One parser reads every line twice, so that
// lines the full parser has read teach the fast path their seq's template and
// the second reading (and any later line of the same seq) may take the fast
// path. A fresh parser, which has learned nothing and so always takes the full
// path, reads the same line: both must agree on what the line means. Sanitizers
// catch memory errors; a disagreement aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "log/intern.hpp"
#include "log/parse.hpp"

namespace {

using dtrace::log::Intern;
using dtrace::log::LineKind;
using dtrace::log::LineParser;
using dtrace::log::ParsedLine;
using dtrace::log::Record;

void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "fast and full parser disagree: %s\n", what);
    std::abort();
  }
}

bool same_record(const Record& a, const Record& b) {
  return a.step == b.step && a.seq == b.seq && a.rank == b.rank && a.io == b.io &&
         a.scalar == b.scalar && a.has_shape == b.has_shape && a.has_value == b.has_value &&
         a.scope == b.scope && a.op == b.op && a.name == b.name && a.dtype == b.dtype &&
         a.io_text == b.io_text && std::equal(a.shape.begin(), a.shape.end(), b.shape.begin(), b.shape.end()) &&
         a.digest == b.digest && std::memcmp(&a.value, &b.value, sizeof a.value) == 0;
}

void agree(const ParsedLine& learned, const ParsedLine& fresh) {
  require(learned.kind == fresh.kind, "line kind");
  switch (fresh.kind) {
    case LineKind::record:
      require(same_record(learned.record, fresh.record), "record fields");
      require(learned.rank == fresh.rank, "rank");
      break;
    case LineKind::end:
      require(learned.step == fresh.step && learned.rank == fresh.rank &&
                  learned.count == fresh.count,
              "end record fields");
      break;
    case LineKind::malformed:
      require(!fresh.problem.empty(), "a malformed line says what is wrong");
      break;
    case LineKind::header:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Intern intern;
  LineParser learning;
  std::string buffer;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  while (!input.empty()) {
    const std::size_t newline = input.find('\n');
    const std::string_view line = input.substr(0, newline);
    input.remove_prefix(newline == std::string_view::npos ? input.size() : newline + 1);
    // The parser's contract: kLinePadding readable bytes after the line.
    buffer.assign(line);
    buffer.append(dtrace::log::kLinePadding, '\0');
    const std::string_view text(buffer.data(), line.size());

    ParsedLine fresh_out, first, second;
    LineParser fresh;
    fresh.parse(text, intern, fresh_out);
    learning.parse(text, intern, first);
    learning.parse(text, intern, second);
    agree(first, fresh_out);
    agree(second, fresh_out);
    if (fresh_out.kind == LineKind::header) (void)dtrace::log::parse_header(line);
  }
  return 0;
}
