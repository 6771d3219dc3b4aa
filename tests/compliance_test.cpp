// bisect's compliance check (src/bisect/compliance.cpp): replay logs written by
// hand, each breaking the request one way, and the message that says how.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "bisect/session.hpp"
#include "support.hpp"

using dtrace::bisect::check_compliance;
using dtrace::bisect::Side;
using dtrace::bisect::Target;
using dtrace::bisect::Variables;
using dtrace::test::TempDir;
using dtrace::test::write_text;

namespace {

struct Rec {
  std::string scope, op, io, name, hash;
};

std::string header(const std::string& level) {
  return R"({"dtrace":"fp/1","run":"r","world_size":1,"hash":"xxh3-64k/1","level":")" + level + "\"}\n";
}

// One rank-0 step: its records, then its end record (unless `complete` is false).
std::string step_lines(std::int64_t step, const std::vector<Rec>& records, bool complete = true) {
  std::string s;
  std::int64_t seq = 0;
  for (const Rec& r : records) {
    s += R"({"step":)" + std::to_string(step) + R"(,"rank":0,"seq":)" + std::to_string(seq++) +
         R"(,"scope":")" + r.scope + R"(","op":")" + r.op + R"(","io":")" + r.io + R"(","name":")" + r.name +
         R"(","dtype":"f32","shape":[2],"hash":")" + r.hash + "\"}\n";
  }
  if (complete) {
    s += R"({"step":)" + std::to_string(step) + R"(,"rank":0,"end":true,"count":)" +
         std::to_string(records.size()) + "}\n";
  }
  return s;
}

const std::string kX0 = "00000000000000a0", kX1 = "00000000000000a1", kW = "00000000000000b0";

// A layer "fwd/layer.1" (op "layer.1") whose step calls op "gemm" twice, on
// inputs x = kX0 then x = kX1 (w the same), as a capture of step 5 holds it.
std::vector<Rec> captured_layer() {
  return {{"fwd/layer.1", "layer.1", "in", "x", "00000000000000c0"},
          {"fwd/layer.1", "gemm", "in", "x", kX0},
          {"fwd/layer.1", "gemm", "in", "w", kW},
          {"fwd/layer.1", "gemm", "out", "y", "00000000000000d0"},
          {"fwd/layer.1", "gemm", "in", "x", kX1},
          {"fwd/layer.1", "gemm", "in", "w", kW},
          {"fwd/layer.1", "gemm", "out", "y", "00000000000000d1"},
          {"fwd/layer.1", "layer.1", "out", "y", "00000000000000d1"}};
}

// A capture directory of `records` at step 5, with every file present.
std::string make_capture(const TempDir& dir, const std::vector<Rec>& records) {
  const std::string cap = dir.path("cap/capture.jsonl");
  write_text(cap, header("kernel") + step_lines(5, records));
  for (std::size_t seq = 0; seq < records.size(); ++seq) {
    write_text(dir.path("cap/r0-s5-q" + std::to_string(seq) + ".bin"), "12345678");
  }
  return dir / "cap";
}

// One repetition of the isolated gemm, run on input x.
std::vector<Rec> gemm_repetition(const std::string& x, const std::string& y = "00000000000000e0") {
  return {{"fwd/layer.1", "gemm", "in", "x", x},
          {"fwd/layer.1", "gemm", "in", "w", kW},
          {"fwd/layer.1", "gemm", "out", "y", y}};
}

Variables isolate_gemm(const TempDir& dir, int occurrence, int repeat) {
  Variables v{{"DTRACE_REPLAY_STEP", "5"},          {"DTRACE_LEVEL", "kernel"},
              {"DTRACE_SCOPE", "fwd/layer.1"},      {"DTRACE_ISOLATE", "fwd/layer.1::gemm"},
              {"DTRACE_INPUTS", dir / "cap"},       {"DTRACE_REPEAT", std::to_string(repeat)},
              {"DTRACE_OUT_DIR", dir / "out"}};
  if (occurrence > 0) v.emplace_back("DTRACE_OCCURRENCE", std::to_string(occurrence));
  return v;
}

// The error check_compliance gives, or "" when the replay complied.
std::string verdict(const Side& side, const Variables& variables, const std::optional<Target>& target) {
  auto r = check_compliance("replay of run A (confirm)", side, 0, variables, target);
  return r ? std::string() : r.error().message;
}

}  // namespace

TEST_CASE("isolation: K complete repetitions of the requested call comply", "[bisect][compliance]") {
  TempDir dir;
  make_capture(dir, captured_layer());
  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(0, gemm_repetition(kX1)) +
                                    step_lines(1, gemm_repetition(kX1, "00000000000000e1")) +
                                    step_lines(2, gemm_repetition(kX1)));
  CHECK(verdict(Side{}, isolate_gemm(dir, 1, 3), Target{"fwd/layer.1", "gemm", 1}) == "");
}

TEST_CASE("isolation ignored: a whole step instead of repetitions", "[bisect][compliance]") {
  TempDir dir;
  make_capture(dir, captured_layer());
  std::vector<Rec> step = captured_layer();
  step.insert(step.begin(), Rec{"step", "param", "state", "w", kW});
  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(5, step));
  CHECK(verdict(Side{}, isolate_gemm(dir, 0, 3), Target{"fwd/layer.1", "gemm", 0}) ==
        "replay of run A (confirm): the workload ignored DTRACE_ISOLATE: it recorded 1 step (step 5) of 9 "
        "records at scopes step, fwd/layer.1 instead of 3 repetitions of fwd/layer.1::gemm (step 5 holds "
        "step param state w)");
}

TEST_CASE("isolation: too few repetitions, or one incomplete", "[bisect][compliance]") {
  TempDir dir;
  make_capture(dir, captured_layer());
  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(0, gemm_repetition(kX0)));
  CHECK(verdict(Side{}, isolate_gemm(dir, 0, 3), Target{"fwd/layer.1", "gemm", 0}) ==
        "replay of run A (confirm): the workload ignored DTRACE_REPEAT=3: it recorded 1 step (step 0) of 3 "
        "records at scope fwd/layer.1 instead of 3 repetitions of fwd/layer.1::gemm (steps 0-2)");

  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(0, gemm_repetition(kX0)) +
                                    step_lines(1, gemm_repetition(kX0), false));
  CHECK(verdict(Side{}, isolate_gemm(dir, 0, 2), Target{"fwd/layer.1", "gemm", 0}).find(
            "repetition 1 of fwd/layer.1::gemm is incomplete") != std::string::npos);
}

TEST_CASE("isolation: another op of the layer recorded is outside the request", "[bisect][compliance]") {
  TempDir dir;
  make_capture(dir, captured_layer());
  std::vector<Rec> rep = gemm_repetition(kX0);
  rep.push_back({"fwd/layer.1", "gelu", "out", "y", kW});
  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(0, rep) + step_lines(1, rep));
  CHECK(verdict(Side{}, isolate_gemm(dir, 0, 2), Target{"fwd/layer.1", "gemm", 0}).find(
            "ignored DTRACE_ISOLATE: it recorded 2 steps (steps 0-1) of 8 records at scope fwd/layer.1 instead "
            "of 2 repetitions of fwd/layer.1::gemm (step 0 holds fwd/layer.1 gelu out y)") != std::string::npos);
}

TEST_CASE("isolation: the first call re-run where the second was asked for", "[bisect][compliance]") {
  TempDir dir;
  make_capture(dir, captured_layer());
  write_text(dir.path("out/replay.jsonl"),
             header("kernel") + step_lines(0, gemm_repetition(kX0)) + step_lines(1, gemm_repetition(kX0)));
  CHECK(verdict(Side{}, isolate_gemm(dir, 1, 2), Target{"fwd/layer.1", "gemm", 1}) ==
        "replay of run A (confirm): the workload ignored DTRACE_OCCURRENCE=1: its repetitions ran fwd/layer.1 gemm, "
        "call 1 of 2 (input 'x' 00000000000000a0) instead of call 2 of 2");
}

TEST_CASE("isolation: inputs that are no captured call's", "[bisect][compliance]") {
  TempDir dir;
  make_capture(dir, captured_layer());
  const std::string stranger = "00000000000000ff";
  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(0, gemm_repetition(kX0)) +
                                    step_lines(1, gemm_repetition(stranger)));
  CHECK(verdict(Side{}, isolate_gemm(dir, 0, 2), Target{"fwd/layer.1", "gemm", 0}) ==
        "replay of run A (confirm): repetition 1 ran fwd/layer.1 gemm with input 'x' 00000000000000ff, but the "
        "capture holds 00000000000000a0: it did not run from the captured inputs (DTRACE_INPUTS)");

  // Repetitions that record no input at all show nothing of where they started.
  const std::vector<Rec> outputs_only{{"fwd/layer.1", "gemm", "out", "y", kW}};
  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(0, outputs_only) + step_lines(1, outputs_only));
  CHECK(verdict(Side{}, isolate_gemm(dir, 0, 2), Target{"fwd/layer.1", "gemm", 0}).find(
            "repetition 0 records no input of fwd/layer.1 gemm") != std::string::npos);
}

TEST_CASE("a replayed step: only that step, with the restored state", "[bisect][compliance]") {
  TempDir dir;
  const Variables layer{{"DTRACE_REPLAY_STEP", "5"}, {"DTRACE_LEVEL", "layer"}, {"DTRACE_OUT_DIR", dir / "out"}};
  const std::vector<Rec> with_state{{"step", "param", "state", "w", kW}, {"fwd/layer.1", "layer.1", "out", "y", kX0}};
  const std::vector<Rec> without_state{{"fwd/layer.1", "layer.1", "out", "y", kX0}};
  // The run recorded state at step 5.
  write_text(dir / "run.jsonl", header("step") + step_lines(5, with_state));
  auto recorded = dtrace::bisect::load_step(dir / "run.jsonl", 0, 5);
  REQUIRE(recorded.ok());
  Side side;
  side.recorded = std::move(*recorded);

  write_text(dir.path("out/replay.jsonl"), header("layer") + step_lines(5, with_state));
  CHECK(verdict(side, layer, std::nullopt) == "");

  // The steps fast-forwarded to reach step 5 (DTRACE_FAST_FORWARD=step) may
  // come before it; a step after it means the workload ran on.
  write_text(dir.path("out/replay.jsonl"), header("layer") + step_lines(4, with_state) + step_lines(5, with_state));
  CHECK(verdict(side, layer, std::nullopt) == "");
  write_text(dir.path("out/replay.jsonl"), header("layer") + step_lines(4, with_state) + step_lines(5, with_state) +
                                               step_lines(6, with_state));
  CHECK(verdict(side, layer, std::nullopt) ==
        "replay of run A (confirm): the workload ignored DTRACE_REPLAY_STEP=5: it recorded 3 steps (steps 4-6) "
        "of 6 records at scopes step, fwd/layer.1 for rank 0 instead of step 5 (and the steps it fast-forwarded "
        "to reach it) only");
  write_text(dir.path("out/replay.jsonl"), header("layer") + step_lines(4, with_state));
  CHECK(verdict(side, layer, std::nullopt).find("ignored DTRACE_REPLAY_STEP=5: it recorded 1 step (step 4)") !=
        std::string::npos);

  write_text(dir.path("out/replay.jsonl"), header("layer") + step_lines(5, without_state));
  CHECK(verdict(side, layer, std::nullopt).find("the workload recorded no restored state at step 5 (no io "
                                                "\"state\" record; run A recorded 1 there)") != std::string::npos);

  write_text(dir.path("out/replay.jsonl"), header("step") + step_lines(5, with_state));
  CHECK(verdict(side, layer, std::nullopt) ==
        "replay of run A (confirm): the workload ignored DTRACE_LEVEL=layer: its log says level \"step\"");
}

TEST_CASE("a capture must hold the inputs the next stage re-runs from", "[bisect][compliance]") {
  TempDir dir;
  const Variables capture{{"DTRACE_REPLAY_STEP", "5"},    {"DTRACE_LEVEL", "kernel"},
                          {"DTRACE_SCOPE", "fwd/layer.1"}, {"DTRACE_CAPTURE", dir / "cap"},
                          {"DTRACE_OUT_DIR", dir / "out"}};
  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(5, captured_layer()));
  const Target layer{"fwd/layer.1", "layer.1", 0};

  CHECK(verdict(Side{}, capture, layer).find("the workload left no usable capture in DTRACE_CAPTURE=") !=
        std::string::npos);

  make_capture(dir, captured_layer());
  CHECK(verdict(Side{}, capture, layer) == "");
  CHECK(verdict(Side{}, capture, Target{"fwd/layer.1", "gemm", 1}) == "");
  CHECK(verdict(Side{}, capture, Target{"fwd/layer.1", "gemm", 2}) ==
        "replay of run A (confirm): the workload captured no input of fwd/layer.1 gemm, call 3 in " +
            (dir / "cap") + " (DTRACE_CAPTURE), and the next stage re-runs it from them");

  std::filesystem::remove(dir / "cap/r0-s5-q0.bin");
  CHECK(verdict(Side{}, capture, layer).find("the capture lists input 'x' of fwd/layer.1 layer.1 but ") !=
        std::string::npos);

  std::vector<Rec> outside = captured_layer();
  outside.push_back({"fwd/layer.2", "gemm", "in", "x", kX0});
  make_capture(dir, outside);
  CHECK(verdict(Side{}, capture, layer) ==
        "replay of run A (confirm): the workload ignored DTRACE_SCOPE=fwd/layer.1: it captured fwd/layer.2 gemm "
        "in x");
}

TEST_CASE("isolating a layer: its sub-scopes are inside, a layer its name prefixes is not", "[bisect][compliance]") {
  TempDir dir;
  make_capture(dir, captured_layer());
  const Variables layer{{"DTRACE_REPLAY_STEP", "5"},       {"DTRACE_LEVEL", "kernel"},
                        {"DTRACE_SCOPE", "fwd/layer.1"},    {"DTRACE_ISOLATE", "fwd/layer.1"},
                        {"DTRACE_INPUTS", dir / "cap"},     {"DTRACE_REPEAT", "2"},
                        {"DTRACE_OUT_DIR", dir / "out"}};
  const Target target{"fwd/layer.1", "layer.1", 0};
  std::vector<Rec> rep{{"fwd/layer.1", "layer.1", "in", "x", "00000000000000c0"},
                       {"fwd/layer.1/attn", "gemm", "out", "y", kW},
                       {"fwd/layer.1", "layer.1", "out", "y", "00000000000000d1"}};
  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(0, rep) + step_lines(1, rep));
  CHECK(verdict(Side{}, layer, target) == "");

  // fwd/layer.10 starts with the bytes "fwd/layer.1" and is another layer.
  rep.insert(rep.begin() + 1, Rec{"fwd/layer.10", "gemm", "out", "y", kW});
  write_text(dir.path("out/replay.jsonl"), header("kernel") + step_lines(0, rep) + step_lines(1, rep));
  CHECK(verdict(Side{}, layer, target) ==
        "replay of run A (confirm): the workload ignored DTRACE_ISOLATE: it recorded 2 steps (steps 0-1) of 8 "
        "records at scopes fwd/layer.1, fwd/layer.10, fwd/layer.1/attn instead of 2 repetitions of fwd/layer.1 "
        "(step 0 holds fwd/layer.10 gemm out y)");
}
