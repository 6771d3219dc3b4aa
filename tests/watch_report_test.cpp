// `dtrace watch`'s events as text (src/report/watch_report.cpp).
#include "report/watch_report.hpp"

#include <catch2/catch.hpp>

TEST_CASE("watch names a rank's divergence in a repeated op's second call as every text does", "[watch][calls]") {
  // --keep-going's line for a rank diverging after the first: the call is
  // named as diff names it (man/dtrace.1, CALLS OF A REPEATED OP).
  dtrace::watch::Event e;
  e.kind = dtrace::watch::EventKind::rank_diverged;
  dtrace::diff::Mismatch m;
  m.rank = 3;
  m.step = 7;
  m.seq = 12;
  m.scope = "fwd/layer.0/mlp";
  m.op = "gemm_fc1";
  m.io = "out";
  m.name = "y";
  m.occurrence = 1;
  m.calls = 2;
  m.kind = dtrace::diff::Kind::value;
  m.role = dtrace::diff::Role::origin;
  m.a_location = "a/rank3.jsonl:40";
  m.b_location = "b/rank3.jsonl:40";
  e.mismatch = m;
  CHECK(dtrace::report::watch_event_to_text(e) ==
        "watch: rank 3 diverged at step 7: seq 12 fwd/layer.0/mlp gemm_fc1 out y, call 2 of 2 (value, origin)  "
        "A a/rank3.jsonl:40  B b/rank3.jsonl:40\n");
  // A draw from a generator whose state differs (diff::classify): named as
  // diff names it, so the role unknown is not left unexplained.
  m.occurrence = 0;
  m.calls = 1;
  m.role = dtrace::diff::Role::unknown;
  m.generator = dtrace::diff::GeneratorRecord{"step", "rng", "state", "numpy"};
  e.mismatch = m;
  CHECK(dtrace::report::watch_event_to_text(e) ==
        "watch: rank 3 diverged at step 7: seq 12 fwd/layer.0/mlp gemm_fc1 out y (value, unknown; a generator's "
        "state differs: step rng state numpy)  A a/rank3.jsonl:40  B b/rank3.jsonl:40\n");
}
