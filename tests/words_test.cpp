// The words every text uses for counts (src/util/words.hpp), and the one
// notation for a call of a repeated op (man/dtrace.1, CALLS OF A REPEATED OP).
#include "util/words.hpp"

#include <catch2/catch.hpp>

using dtrace::call_text;
using dtrace::plural;
using dtrace::with_call;

TEST_CASE("a count agrees with its noun", "[words]") {
  CHECK(plural(1, "rank", "ranks") == "1 rank");
  CHECK(plural(0, "rank", "ranks") == "0 ranks");
  CHECK(plural(4, "rank", "ranks") == "4 ranks");
}

TEST_CASE("a call of a repeated op is counted from 1, of the calls the step holds", "[words][calls]") {
  // Occurrence 1 (dtrace-fp(5), counted from 0) is the second call.
  CHECK(call_text(1, 2) == "call 2 of 2");
  CHECK(call_text(0, 3) == "call 1 of 3");
  CHECK(with_call("fwd/layer.0/mlp gemm_fc1 out y", 1, 2) == "fwd/layer.0/mlp gemm_fc1 out y, call 2 of 2");
  CHECK(with_call("fwd/layer.0/mlp gemm_fc1 out y", 0, 2) == "fwd/layer.0/mlp gemm_fc1 out y, call 1 of 2");
}

TEST_CASE("an op called once has no call named", "[words][calls]") {
  CHECK(call_text(0, 1).empty());
  CHECK(with_call("fwd/layer.0/mlp gemm_fc1 out y", 0, 1) == "fwd/layer.0/mlp gemm_fc1 out y");
}

TEST_CASE("a call whose count is not known is named from the second call on", "[words][calls]") {
  CHECK(call_text(0, 0).empty());
  CHECK(call_text(2, 0) == "call 3");
  CHECK(with_call("fwd/layer.1 gemm", 2, 0) == "fwd/layer.1 gemm, call 3");
}

TEST_CASE("a count below the call is never printed", "[words][calls]") {
  // A record only one run has (an extra call) is counted on its own side;
  // a count that lags the occurrence still reads as a call of at least as many.
  CHECK(call_text(2, 2) == "call 3 of 3");
}
