// Words for counts in what people read: "1 rank", "4 ranks", "call 2 of 3".
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace dtrace {

// The noun that agrees with `count`.
constexpr const char* noun(std::int64_t count, const char* one, const char* many) {
  return count == 1 ? one : many;
}

// `count` and the noun that agrees with it.
inline std::string plural(std::int64_t count, const char* one, const char* many) {
  return std::to_string(count) + " " + noun(count, one, many);
}

// Which call of a repeated op a record or kernel belongs to, as every text
// dtrace prints names it (man/dtrace.1, CALLS OF A REPEATED OP): "call K of N",
// K counted from 1 and N the calls of the op the step holds. K is the record's
// occurrence plus one: dtrace-fp(5), DTRACE_OCCURRENCE and the JSON documents
// count occurrences from 0, people count calls from 1. Empty for an op the
// step calls once, so a plain op reads as before; "call K" where N is not
// known (0), and then only from the second call on.
inline std::string call_text(int occurrence, int calls) {
  if (calls > 0) {
    calls = std::max(calls, occurrence + 1);  // never "call 3 of 2"
    if (calls == 1) return {};
    return "call " + std::to_string(occurrence + 1) + " of " + std::to_string(calls);
  }
  return occurrence > 0 ? "call " + std::to_string(occurrence + 1) : std::string();
}

// `what` ("fwd/mixer gemm out y") followed by its call, when call_text names
// one: "fwd/mixer gemm out y, call 2 of 3".
inline std::string with_call(std::string what, int occurrence, int calls) {
  const std::string call = call_text(occurrence, calls);
  if (!call.empty()) what += ", " + call;
  return what;
}

}  // namespace dtrace
