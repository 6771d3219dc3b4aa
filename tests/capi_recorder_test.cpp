// The recorder's C API (include/dtrace/recorder.h) as a C caller sees it: a
// log that the ordinary reader reads back, the replay request as plain values,
// fast-forward, isolation's captured records, pinned ops (DTRACE_1.4), and
// every kind of bad input answered with a code and a message naming what was
// wrong, never a crash.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtrace/recorder.h"
#include "fingerprint/fingerprint.hpp"
#include "recorder_support.hpp"

using test_support::read_run;
using test_support::TempDir;

namespace {

// A handle opened from "NAME=VALUE" strings, closed at scope end.
struct Handle {
  dtrace_recorder* h = nullptr;
  int code = -1;
  Handle(const std::string& run_dir, const std::vector<std::string>& variables,
         int32_t level = DTRACE_LEVEL_KERNEL) {
    dtrace_run_options options;
    dtrace_run_options_init(&options);
    options.run_dir = run_dir.c_str();
    options.run_name = "c";
    options.level = level;
    std::vector<const char*> pointers;
    for (const auto& v : variables) pointers.push_back(v.c_str());
    code = dtrace_recorder_open_with(&options, pointers.data(), pointers.size(), &h);
  }
  ~Handle() { dtrace_recorder_close(h); }
  std::string error() const { return dtrace_recorder_last_error(h); }
};

const std::vector<float> kValues{1.5f, -2.0f, 0.25f, 8.0f};
const int64_t kShape[] = {2, 2};

int record(dtrace_recorder* h, const char* op, const char* name, int32_t io = DTRACE_IO_OUT,
           int32_t level = DTRACE_LEVEL_KERNEL) {
  return dtrace_recorder_tensor(h, level, op, io, name, "f32", kShape, 2, kValues.data(),
                                kValues.size() * sizeof(float));
}

}  // namespace

TEST_CASE("C API: a recorded step reads back with its records, scopes and exact bits") {
  TempDir dir;
  Handle r(dir / "run", {});
  REQUIRE(r.code == DTRACE_OK);
  REQUIRE(dtrace_recorder_begin_step(r.h, 0) == DTRACE_OK);
  REQUIRE(dtrace_recorder_push_scope(r.h, "fwd") == DTRACE_OK);
  REQUIRE(dtrace_recorder_push_scope(r.h, "layer.1") == DTRACE_OK);
  const char* scope = nullptr;
  REQUIRE(dtrace_recorder_current_scope(r.h, &scope) == DTRACE_OK);
  CHECK(std::string(scope) == "fwd/layer.1");
  REQUIRE(record(r.h, "gemm", "y") == DTRACE_OK);
  const uint64_t digest = 0x0123456789abcdefULL;
  REQUIRE(dtrace_recorder_tensor_digest(r.h, DTRACE_LEVEL_KERNEL, "gemm", DTRACE_IO_OUT, "z", "bf16",
                                        kShape, 2, digest, nullptr, 8) == DTRACE_OK);
  REQUIRE(dtrace_recorder_pop_scope(r.h) == DTRACE_OK);
  REQUIRE(dtrace_recorder_pop_scope(r.h) == DTRACE_OK);
  REQUIRE(dtrace_recorder_scalar(r.h, DTRACE_LEVEL_STEP, "loss", DTRACE_IO_METRIC, "loss", "f32",
                                 0x80000000u, -0.0) == DTRACE_OK);
  REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
  REQUIRE(dtrace_recorder_close(r.h) == DTRACE_OK);
  r.h = nullptr;

  auto run = read_run(dir / "run");
  const auto& step = run.step(0, 0);
  REQUIRE(step.records.size() == 3);
  CHECK(step.records[0].scope == "fwd/layer.1");
  CHECK(step.records[0].digest.low == dtrace::fingerprint(kValues.data(), 16));
  CHECK(step.records[1].digest.low == digest);
  CHECK(step.records[1].dtype == "bf16");
  CHECK(step.records[2].scope == "");
  CHECK(step.records[2].digest.hex() == "80000000");
}

TEST_CASE("C API: the replay request as plain values") {
  TempDir dir;
  SECTION("a normal run") {
    Handle r(dir / "run", {}, DTRACE_LEVEL_LAYER);
    REQUIRE(r.code == DTRACE_OK);
    int32_t level = -1, replay = -1, repeat = -1, det = 5, occurrence = 5;
    int64_t step = 0, stop = 0, resume = 0;
    const char *prefix = nullptr, *capture = "x", *isolate = "x", *op = "x", *inputs = "x",
               *ckpt = "x";
    REQUIRE(dtrace_recorder_level(r.h, &level) == DTRACE_OK);
    REQUIRE(dtrace_recorder_is_replay(r.h, &replay) == DTRACE_OK);
    REQUIRE(dtrace_recorder_replay_step(r.h, &step) == DTRACE_OK);
    REQUIRE(dtrace_recorder_scope_prefix(r.h, &prefix) == DTRACE_OK);
    REQUIRE(dtrace_recorder_capture_dir(r.h, &capture) == DTRACE_OK);
    REQUIRE(dtrace_recorder_isolate_scope(r.h, &isolate) == DTRACE_OK);
    REQUIRE(dtrace_recorder_isolate_op(r.h, &op) == DTRACE_OK);
    REQUIRE(dtrace_recorder_isolate_occurrence(r.h, &occurrence) == DTRACE_OK);
    REQUIRE(dtrace_recorder_inputs_dir(r.h, &inputs) == DTRACE_OK);
    REQUIRE(dtrace_recorder_repeat(r.h, &repeat) == DTRACE_OK);
    REQUIRE(dtrace_recorder_checkpoint_dir(r.h, &ckpt) == DTRACE_OK);
    REQUIRE(dtrace_recorder_stop_at(r.h, &stop) == DTRACE_OK);
    REQUIRE(dtrace_recorder_resume_at(r.h, &resume) == DTRACE_OK);
    REQUIRE(dtrace_recorder_deterministic(r.h, &det) == DTRACE_OK);
    CHECK(level == DTRACE_LEVEL_LAYER);
    CHECK(replay == 0);
    CHECK(step == -1);
    CHECK(std::string(prefix).empty());
    CHECK(capture == nullptr);
    CHECK(isolate == nullptr);
    CHECK(op == nullptr);
    CHECK(occurrence == -1);
    CHECK(inputs == nullptr);
    CHECK(repeat == 1);
    CHECK(ckpt == nullptr);
    CHECK(stop == -1);
    CHECK(resume == -1);
    CHECK(det == -1);
  }
  SECTION("a replay") {
    // A capture to isolate from (DTRACE_INPUTS needs a readable index).
    {
      Handle c(dir / "unused", {"DTRACE_OUT=" + dir / "cap.jsonl", "DTRACE_REPLAY_STEP=3",
                                "DTRACE_CAPTURE=" + dir / "cap"});
      REQUIRE(c.code == DTRACE_OK);
    }
    Handle r(dir / "run",
             {"DTRACE_OUT=" + dir / "out.jsonl", "DTRACE_REPLAY_STEP=3", "DTRACE_LEVEL=kernel",
              "DTRACE_SCOPE=fwd/layer.1", "DTRACE_ISOLATE=fwd/layer.1::gemm",
              "DTRACE_INPUTS=" + dir / "cap", "DTRACE_REPEAT=4", "DTRACE_DETERMINISTIC=0",
              "DTRACE_OCCURRENCE=1", "PATH=/ignored"},
             DTRACE_LEVEL_STEP);
    INFO(r.error());
    REQUIRE(r.code == DTRACE_OK);
    int32_t level = -1, replay = -1, repeat = -1, det = 5, occurrence = -1;
    int64_t step = 0;
    const char *prefix = nullptr, *isolate = nullptr, *op = nullptr, *inputs = nullptr;
    REQUIRE(dtrace_recorder_level(r.h, &level) == DTRACE_OK);
    REQUIRE(dtrace_recorder_is_replay(r.h, &replay) == DTRACE_OK);
    REQUIRE(dtrace_recorder_replay_step(r.h, &step) == DTRACE_OK);
    REQUIRE(dtrace_recorder_scope_prefix(r.h, &prefix) == DTRACE_OK);
    REQUIRE(dtrace_recorder_isolate_scope(r.h, &isolate) == DTRACE_OK);
    REQUIRE(dtrace_recorder_isolate_op(r.h, &op) == DTRACE_OK);
    REQUIRE(dtrace_recorder_inputs_dir(r.h, &inputs) == DTRACE_OK);
    REQUIRE(dtrace_recorder_repeat(r.h, &repeat) == DTRACE_OK);
    REQUIRE(dtrace_recorder_deterministic(r.h, &det) == DTRACE_OK);
    REQUIRE(dtrace_recorder_isolate_occurrence(r.h, &occurrence) == DTRACE_OK);
    CHECK(level == DTRACE_LEVEL_KERNEL);
    CHECK(occurrence == 1);
    CHECK(replay == 1);
    CHECK(step == 3);
    CHECK(std::string(prefix) == "fwd/layer.1");
    CHECK(std::string(isolate) == "fwd/layer.1");
    CHECK(std::string(op) == "gemm");
    CHECK(std::string(inputs) == dir / "cap");
    CHECK(repeat == 4);
    CHECK(det == 0);
  }
}

TEST_CASE("C API: steps before DTRACE_REPLAY_STEP are fast-forwarded, recording nothing") {
  TempDir dir;
  Handle r(dir / "run", {"DTRACE_OUT=" + dir / "out.jsonl", "DTRACE_REPLAY_STEP=2"});
  REQUIRE(r.code == DTRACE_OK);
  for (int64_t step = 0; step <= 2; ++step) {
    REQUIRE(dtrace_recorder_begin_step(r.h, step) == DTRACE_OK);
    int32_t wanted = -1;
    REQUIRE(dtrace_recorder_wants(r.h, DTRACE_LEVEL_STEP, &wanted) == DTRACE_OK);
    CHECK(wanted == (step == 2 ? 1 : 0));
    REQUIRE(record(r.h, "param", "w", DTRACE_IO_STATE, DTRACE_LEVEL_STEP) == DTRACE_OK);
    REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
  }
  REQUIRE(dtrace_recorder_close(r.h) == DTRACE_OK);
  r.h = nullptr;
  auto run = read_run(dir / "out.jsonl");
  REQUIRE(run.steps.size() == 1);
  CHECK(run.steps[0].step == 2);
  CHECK(run.steps[0].records.size() == 1);
}

TEST_CASE("C API: dtrace_recorder_fast_forward skips the steps the program names") {
  TempDir dir;
  Handle r(dir / "run", {});
  REQUIRE(r.code == DTRACE_OK);
  REQUIRE(dtrace_recorder_fast_forward(r.h, 2) == DTRACE_OK);
  for (int64_t step = 0; step < 4; ++step) {
    REQUIRE(dtrace_recorder_begin_step(r.h, step) == DTRACE_OK);
    REQUIRE(record(r.h, "gemm", "y") == DTRACE_OK);
    REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
  }
  REQUIRE(dtrace_recorder_close(r.h) == DTRACE_OK);
  r.h = nullptr;
  auto run = read_run(dir / "run");
  REQUIRE(run.steps.size() == 2);
  CHECK(run.steps[0].step == 2);
  CHECK(run.steps[1].step == 3);
}

TEST_CASE("C API: isolation lists the captured records, finds and reads them") {
  TempDir dir;
  {
    Handle c(dir / "unused", {"DTRACE_OUT=" + dir / "cap.jsonl", "DTRACE_REPLAY_STEP=1",
                              "DTRACE_SCOPE=fwd", "DTRACE_CAPTURE=" + dir / "cap"});
    REQUIRE(c.code == DTRACE_OK);
    int32_t captures = -1;
    REQUIRE(dtrace_recorder_begin_step(c.h, 1) == DTRACE_OK);
    REQUIRE(dtrace_recorder_captures(c.h, &captures) == DTRACE_OK);
    CHECK(captures == 0);  // outside DTRACE_SCOPE
    REQUIRE(dtrace_recorder_push_scope(c.h, "fwd") == DTRACE_OK);
    REQUIRE(dtrace_recorder_captures(c.h, &captures) == DTRACE_OK);
    CHECK(captures == 1);
    REQUIRE(record(c.h, "gemm", "x", DTRACE_IO_IN) == DTRACE_OK);
    REQUIRE(record(c.h, "gemm", "x", DTRACE_IO_IN) == DTRACE_OK);
    // A capture needs the bytes: a digest alone is refused, saying why.
    CHECK(dtrace_recorder_tensor_digest(c.h, DTRACE_LEVEL_KERNEL, "gemm", DTRACE_IO_OUT, "y", "f32",
                                        kShape, 2, 1, nullptr, 16) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(c.error(), Catch::Contains("DTRACE_CAPTURE needs the tensor's bytes"));
    REQUIRE(dtrace_recorder_end_step(c.h) == DTRACE_OK);
  }
  Handle r(dir / "run", {"DTRACE_OUT=" + dir / "iso.jsonl", "DTRACE_ISOLATE=fwd",
                         "DTRACE_INPUTS=" + dir / "cap", "DTRACE_REPEAT=2"});
  INFO(r.error());
  REQUIRE(r.code == DTRACE_OK);
  size_t count = 0;
  REQUIRE(dtrace_recorder_captured_count(r.h, &count) == DTRACE_OK);
  REQUIRE(count == 2);
  dtrace_captured_record c;
  REQUIRE(dtrace_recorder_captured_record(r.h, 1, &c) == DTRACE_OK);
  CHECK(std::string(c.scope) == "fwd");
  CHECK(std::string(c.op) == "gemm");
  CHECK(c.io == DTRACE_IO_IN);
  CHECK(std::string(c.name) == "x");
  CHECK(c.occurrence == 1);
  CHECK(std::string(c.dtype) == "f32");
  REQUIRE(c.ndim == 2);
  CHECK(c.shape[0] == 2);
  CHECK(c.bytes == 16);
  CHECK(c.digest == dtrace::fingerprint(kValues.data(), 16));
  CHECK(c.step == 1);
  CHECK(std::filesystem::exists(c.file));
  CHECK(dtrace_recorder_captured_record(r.h, 2, &c) == DTRACE_ERROR_INVALID_ARGUMENT);

  size_t index = 9;
  REQUIRE(dtrace_recorder_captured_find(r.h, "fwd", "gemm", DTRACE_IO_IN, "x", 1, &index) == DTRACE_OK);
  CHECK(index == 1);
  CHECK(dtrace_recorder_captured_find(r.h, "fwd", "gemm", DTRACE_IO_IN, "w", 0, &index) ==
        DTRACE_ERROR_NOT_FOUND);
  CHECK_THAT(r.error(), Catch::Contains("'w'"));
  std::vector<float> back(4);
  CHECK(dtrace_recorder_captured_read(r.h, 0, back.data(), 8) == DTRACE_ERROR_INVALID_ARGUMENT);
  REQUIRE(dtrace_recorder_captured_read(r.h, 0, back.data(), 16) == DTRACE_OK);
  CHECK(back == kValues);

  // A damaged capture is an I/O error naming the file, not bytes handed on.
  dtrace_recorder_captured_record(r.h, 0, &c);
  { std::ofstream(c.file, std::ios::binary) << "0123456789abcdef"; }
  CHECK(dtrace_recorder_captured_read(r.h, 0, back.data(), 16) == DTRACE_ERROR_IO);
  CHECK_THAT(r.error(), Catch::Contains(c.file));

  for (int32_t k = 0; k < 2; ++k) {
    REQUIRE(dtrace_recorder_begin_repetition(r.h, k) == DTRACE_OK);
    REQUIRE(record(r.h, "gemm", "y") == DTRACE_OK);
  }
  // An open repetition is ended normally at close.
  CHECK(dtrace_recorder_close(r.h) == DTRACE_OK);
  r.h = nullptr;
  auto run = read_run(dir / "iso.jsonl");
  REQUIRE(run.steps.size() == 2);
  CHECK(run.steps[1].status == dtrace::log::StepStatus::complete);
}

TEST_CASE("C API: bad input is a code and a message, never a crash") {
  TempDir dir;
  SECTION("null pointers") {
    CHECK(dtrace_recorder_open(nullptr, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
    dtrace_recorder* h = nullptr;
    CHECK(dtrace_recorder_open(nullptr, &h) == DTRACE_ERROR_INVALID_ARGUMENT);
    REQUIRE(h != nullptr);  // the handle that says why
    CHECK_THAT(dtrace_recorder_last_error(h), Catch::Contains("options is NULL"));
    CHECK(dtrace_recorder_begin_step(h, 0) == DTRACE_ERROR_ORDER);
    CHECK(dtrace_recorder_close(h) == DTRACE_OK);
    CHECK(dtrace_recorder_close(nullptr) == DTRACE_OK);
    CHECK(std::string(dtrace_recorder_last_error(nullptr)).size() > 0);
    CHECK(dtrace_recorder_begin_step(nullptr, 0) == DTRACE_ERROR_INVALID_ARGUMENT);
    int32_t level = 0;
    CHECK(dtrace_recorder_level(nullptr, &level) == DTRACE_ERROR_INVALID_ARGUMENT);

    Handle r(dir / "run", {});
    REQUIRE(r.code == DTRACE_OK);
    CHECK(dtrace_recorder_level(r.h, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_push_scope(r.h, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
    REQUIRE(dtrace_recorder_begin_step(r.h, 0) == DTRACE_OK);
    CHECK(dtrace_recorder_tensor(r.h, 0, nullptr, 0, "x", "f32", kShape, 2, kValues.data(), 16) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_tensor(r.h, 0, "op", 0, nullptr, "f32", kShape, 2, kValues.data(), 16) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_tensor(r.h, 0, "op", 0, "x", nullptr, kShape, 2, kValues.data(), 16) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_tensor(r.h, 0, "op", 0, "x", "f32", nullptr, 2, kValues.data(), 16) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_tensor(r.h, 0, "op", 0, "x", "f32", kShape, 2, nullptr, 16) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("data is NULL"));
    CHECK(dtrace_recorder_scalar(r.h, 0, "op", 0, nullptr, "f32", 0, 0) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_captured_read(r.h, 0, nullptr, 4) == DTRACE_ERROR_INVALID_ARGUMENT);
    REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
  }
  SECTION("a shape that disagrees with the byte count, an unknown dtype, bad codes") {
    Handle r(dir / "run", {});
    REQUIRE(r.code == DTRACE_OK);
    REQUIRE(dtrace_recorder_begin_step(r.h, 0) == DTRACE_OK);
    REQUIRE(dtrace_recorder_push_scope(r.h, "fwd") == DTRACE_OK);
    CHECK(dtrace_recorder_tensor(r.h, 0, "gemm", 1, "y", "f32", kShape, 2, kValues.data(), 12) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(r.error() == "fwd gemm 'y': 12 bytes, but 4 elements of f32 take 16");
    CHECK(dtrace_recorder_tensor(r.h, 0, "gemm", 1, "y", "f33", kShape, 2, kValues.data(), 16) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("unknown dtype 'f33'"));
    const int64_t negative[] = {-2, -2};
    CHECK(dtrace_recorder_tensor(r.h, 0, "gemm", 1, "y", "f32", negative, 2, kValues.data(), 16) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_scalar(r.h, 0, "loss", 3, "loss", "q8", 0, 0) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("scalar dtype 'q8'"));
    CHECK(dtrace_recorder_tensor(r.h, 7, "gemm", 1, "y", "f32", kShape, 2, kValues.data(), 16) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("level 7"));
    CHECK(dtrace_recorder_tensor(r.h, 0, "gemm", 9, "y", "f32", kShape, 2, kValues.data(), 16) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("io 9"));
    int32_t wanted = 0;
    CHECK(dtrace_recorder_wants(r.h, -1, &wanted) == DTRACE_ERROR_INVALID_ARGUMENT);
    // The step still records and ends: a refused record writes nothing.
    REQUIRE(record(r.h, "gemm", "y") == DTRACE_OK);
    CHECK(r.error().empty());
    REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
    REQUIRE(dtrace_recorder_close(r.h) == DTRACE_OK);
    r.h = nullptr;
    CHECK(read_run(dir / "run").step(0, 0).records.size() == 1);
  }
  SECTION("calls out of order") {
    Handle r(dir / "run", {});
    REQUIRE(r.code == DTRACE_OK);
    CHECK(record(r.h, "gemm", "y") == DTRACE_ERROR_ORDER);
    CHECK_THAT(r.error(), Catch::Contains("outside a step"));
    CHECK(dtrace_recorder_end_step(r.h) == DTRACE_ERROR_ORDER);
    CHECK(dtrace_recorder_pop_scope(r.h) == DTRACE_ERROR_ORDER);
    REQUIRE(dtrace_recorder_begin_step(r.h, 3) == DTRACE_OK);
    CHECK(dtrace_recorder_begin_step(r.h, 4) == DTRACE_ERROR_ORDER);
    CHECK(dtrace_recorder_begin_repetition(r.h, 0) == DTRACE_ERROR_ORDER);
    REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
    CHECK(dtrace_recorder_begin_step(r.h, 3) == DTRACE_ERROR_ORDER);
    CHECK_THAT(r.error(), Catch::Contains("must increase"));
    CHECK(dtrace_recorder_begin_step(r.h, -1) == DTRACE_ERROR_ORDER);
    // A step left open at close: written incomplete, and the close says so.
    REQUIRE(dtrace_recorder_begin_step(r.h, 5) == DTRACE_OK);
    CHECK(dtrace_recorder_close(r.h) == DTRACE_ERROR_ORDER);
    r.h = nullptr;
  }
  SECTION("a bad DTRACE_* variable names itself") {
    Handle level(dir / "run", {"DTRACE_LEVEL=fine"});
    CHECK(level.code == DTRACE_ERROR_ENVIRONMENT);
    CHECK(level.error() == "DTRACE_LEVEL=fine: not one of step, layer, kernel");
    Handle step(dir / "run", {"DTRACE_REPLAY_STEP=3x"});
    CHECK(step.code == DTRACE_ERROR_ENVIRONMENT);
    CHECK_THAT(step.error(), Catch::StartsWith("DTRACE_REPLAY_STEP=3x"));
    Handle isolate(dir / "run", {"DTRACE_ISOLATE=fwd"});
    CHECK(isolate.code == DTRACE_ERROR_ENVIRONMENT);
    CHECK_THAT(isolate.error(), Catch::Contains("needs DTRACE_INPUTS"));
    Handle malformed(dir / "run", {"DTRACE_LEVEL"});
    CHECK(malformed.code == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(malformed.error(), Catch::Contains("not NAME=VALUE"));
    CHECK(!std::filesystem::exists(dir / "run"));
  }
  SECTION("bad options and files") {
    dtrace_run_options options;
    dtrace_run_options_init(&options);
    dtrace_recorder* h = nullptr;
    CHECK(dtrace_recorder_open_with(&options, nullptr, 0, &h) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(dtrace_recorder_last_error(h), Catch::Contains("no run directory"));
    dtrace_recorder_close(h);
    const std::string run = dir / "run";
    options.run_dir = run.c_str();
    options.rank = 2;
    CHECK(dtrace_recorder_open_with(&options, nullptr, 0, &h) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(dtrace_recorder_last_error(h), Catch::Contains("rank 2 is outside world_size 1"));
    dtrace_recorder_close(h);
    options.rank = 0;
    options.env_json = "{\"NCCL_ALGO\": 3}";
    CHECK(dtrace_recorder_open_with(&options, nullptr, 0, &h) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(dtrace_recorder_last_error(h), Catch::Contains("NCCL_ALGO"));
    dtrace_recorder_close(h);
    options.env_json = nullptr;
    options.config_json = "[1]";
    CHECK(dtrace_recorder_open_with(&options, nullptr, 0, &h) == DTRACE_ERROR_INVALID_ARGUMENT);
    dtrace_recorder_close(h);
    options.config_json = nullptr;
    options.replay_argc = 2;
    CHECK(dtrace_recorder_open_with(&options, nullptr, 0, &h) == DTRACE_ERROR_INVALID_ARGUMENT);
    dtrace_recorder_close(h);
    options.replay_argc = 0;
    REQUIRE(dtrace_recorder_open_with(&options, nullptr, 0, &h) == DTRACE_OK);
    dtrace_recorder_close(h);
    // The rank file exists now: a recorded run is never overwritten.
    CHECK(dtrace_recorder_open_with(&options, nullptr, 0, &h) == DTRACE_ERROR_IO);
    CHECK_THAT(dtrace_recorder_last_error(h), Catch::Contains("rank0.jsonl"));
    dtrace_recorder_close(h);
  }
}

// ---- Several tensors in one call (DTRACE_1.5, dtrace_recorder_tensors). ----

TEST_CASE("C API: dtrace_recorder_tensors writes what the calls one by one write", "[tensors]") {
  TempDir dir;
  const std::vector<float> other{3.0f, 4.0f};
  const int64_t row[] = {2};
  const uint64_t given = 0xfeedfacecafebeefULL;
  // Two ops, three ios, one digest given: once in one call, once call by call.
  const char* ops[] = {"param", "param", "batch", "grads"};
  const int32_t ios[] = {DTRACE_IO_STATE, DTRACE_IO_STATE, DTRACE_IO_IN, DTRACE_IO_OUT};
  const char* names[] = {"w", "b", "x", "w"};
  const char* dtypes[] = {"f32", "f32", "f32", "bf16"};
  const int64_t* shapes[] = {kShape, row, kShape, kShape};
  const size_t ndims[] = {2, 1, 2, 2};
  const size_t bytes[] = {16, 8, 16, 8};
  const uint64_t digests[] = {0, 0, 0, given};
  const int32_t digested[] = {0, 0, 0, 1};
  const void* good[] = {kValues.data(), other.data(), kValues.data(), nullptr};
  for (int batched = 0; batched < 2; ++batched) {
    const auto run = dir / (batched ? "batched" : "single");
    Handle r(run, {});
    REQUIRE(r.code == DTRACE_OK);
    REQUIRE(dtrace_recorder_begin_step(r.h, 0) == DTRACE_OK);
    REQUIRE(dtrace_recorder_push_scope(r.h, "step") == DTRACE_OK);
    if (batched) {
      REQUIRE(dtrace_recorder_tensors(r.h, DTRACE_LEVEL_STEP, 4, ops, ios, names, dtypes, shapes, ndims,
                                      good, bytes, digests, digested) == DTRACE_OK);
    } else {
      for (int i = 0; i < 3; ++i) {
        REQUIRE(dtrace_recorder_tensor(r.h, DTRACE_LEVEL_STEP, ops[i], ios[i], names[i], dtypes[i],
                                       shapes[i], ndims[i], good[i], bytes[i]) == DTRACE_OK);
      }
      REQUIRE(dtrace_recorder_tensor_digest(r.h, DTRACE_LEVEL_STEP, "grads", DTRACE_IO_OUT, "w", "bf16",
                                            kShape, 2, given, nullptr, 8) == DTRACE_OK);
    }
    REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
    // A level above the one in force is accepted and dropped, as by the single calls.
    Handle coarse(dir / (batched ? "coarse-batched" : "coarse-single"), {}, DTRACE_LEVEL_STEP);
    REQUIRE(dtrace_recorder_begin_step(coarse.h, 0) == DTRACE_OK);
    CHECK(dtrace_recorder_tensors(coarse.h, DTRACE_LEVEL_KERNEL, 4, ops, ios, names, dtypes, shapes, ndims,
                                  good, bytes, digests, digested) == DTRACE_OK);
    REQUIRE(dtrace_recorder_end_step(coarse.h) == DTRACE_OK);
  }
  auto single = read_run(dir / "single");
  auto batched = read_run(dir / "batched");
  const auto& a = single.step(0, 0);
  const auto& b = batched.step(0, 0);
  REQUIRE(a.records.size() == 4);
  REQUIRE(b.records.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("record " << i);
    CHECK(b.records[i].seq == a.records[i].seq);
    CHECK(b.records[i].scope == "step");
    CHECK(b.records[i].op == a.records[i].op);
    CHECK(b.records[i].io == a.records[i].io);
    CHECK(b.records[i].name == a.records[i].name);
    CHECK(b.records[i].dtype == a.records[i].dtype);
    CHECK(std::vector<int64_t>(b.records[i].shape.begin(), b.records[i].shape.end()) ==
          std::vector<int64_t>(a.records[i].shape.begin(), a.records[i].shape.end()));
    CHECK(b.records[i].digest.low == a.records[i].digest.low);
  }
  CHECK(b.records[0].digest.low == dtrace::fingerprint(kValues.data(), 16));
  CHECK(b.records[1].digest.low == dtrace::fingerprint(other.data(), 8));
  CHECK(b.records[3].digest.low == given);
  CHECK(read_run(dir / "coarse-batched").step(0, 0).records.empty());

  SECTION("a failing record: those before it are written, it and the rest are not, named") {
    Handle r(dir / "failing", {});
    REQUIRE(dtrace_recorder_begin_step(r.h, 0) == DTRACE_OK);
    const char* bad_dtype[] = {"f32", "f32", "f33", "bf16"};  // the third: an error in the middle
    CHECK(dtrace_recorder_tensors(r.h, DTRACE_LEVEL_STEP, 4, ops, ios, names, bad_dtype, shapes, ndims,
                                  good, bytes, digests, digested) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::StartsWith("dtrace_recorder_tensors: record 2 of 4: ") &&
                              Catch::Contains("batch 'x'") && Catch::Contains("f33"));
    const char* null_name[] = {"w", nullptr, "x", "w"};
    CHECK(dtrace_recorder_tensors(r.h, DTRACE_LEVEL_STEP, 4, ops, ios, null_name, dtypes, shapes, ndims,
                                  good, bytes, digests, digested) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(r.error() == "dtrace_recorder_tensors: record 1 of 4: name is NULL");
    REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
    REQUIRE(dtrace_recorder_close(r.h) == DTRACE_OK);
    r.h = nullptr;
    auto failing = read_run(dir / "failing");  // the records' strings are views into it
    const auto& written = failing.step(0, 0).records;
    REQUIRE(written.size() == 3);  // w and b of the first call, w of the second
    CHECK(written[0].name == "w");
    CHECK(written[1].name == "b");
    CHECK(written[2].name == "w");
    CHECK(written[2].op == "param");
  }
  SECTION("missing arrays record nothing; count 0 needs none") {
    Handle r(dir / "missing", {});
    REQUIRE(dtrace_recorder_begin_step(r.h, 0) == DTRACE_OK);
    CHECK(dtrace_recorder_tensors(r.h, DTRACE_LEVEL_STEP, 4, ops, ios, names, dtypes, nullptr, ndims, good,
                                  bytes, nullptr, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("is NULL"));
    CHECK(dtrace_recorder_tensors(r.h, DTRACE_LEVEL_STEP, 4, ops, ios, names, dtypes, shapes, ndims, good,
                                  bytes, digests, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("digests and digested"));
    CHECK(dtrace_recorder_tensors(r.h, 7, 4, ops, ios, names, dtypes, shapes, ndims, good, bytes, nullptr,
                                  nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_tensors(r.h, DTRACE_LEVEL_STEP, 0, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, nullptr, nullptr, nullptr, nullptr) == DTRACE_OK);
    CHECK(dtrace_recorder_tensors(nullptr, DTRACE_LEVEL_STEP, 0, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, nullptr, nullptr, nullptr, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
    REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
    REQUIRE(dtrace_recorder_close(r.h) == DTRACE_OK);
    r.h = nullptr;
    CHECK(read_run(dir / "missing").step(0, 0).records.empty());
  }
  SECTION("outside a step: an order error, as a single record's") {
    Handle r(dir / "nostep", {});
    CHECK(dtrace_recorder_tensors(r.h, DTRACE_LEVEL_STEP, 4, ops, ios, names, dtypes, shapes, ndims, good,
                                  bytes, digests, digested) == DTRACE_ERROR_ORDER);
    CHECK_THAT(r.error(), Catch::Contains("record 0 of 4: "));
  }
}

TEST_CASE("C API: the header carries env, config and the replay command with its cwd") {
  TempDir dir;
  const std::string run = dir / "run";
  const char* argv[] = {"/bin/prog", "--steps", "3"};
  dtrace_run_options options;
  dtrace_run_options_init(&options);
  options.run_dir = run.c_str();
  options.run_name = "named";
  options.env_json = "{\"NCCL_ALGO\":\"Ring\"}";
  options.config_json = "{\"lr\":1e-3}";
  options.replay_argv = argv;
  options.replay_argc = 3;
  options.replay_cwd = "/somewhere";
  dtrace_recorder* h = nullptr;
  REQUIRE(dtrace_recorder_open_with(&options, nullptr, 0, &h) == DTRACE_OK);
  dtrace_recorder_close(h);
  const std::string header = test_support::first_line(dir / "run/rank0.jsonl");
  CHECK_THAT(header, Catch::Contains("\"run\":\"named\""));
  CHECK_THAT(header, Catch::Contains("\"env\":{\"NCCL_ALGO\":\"Ring\"}"));
  CHECK_THAT(header, Catch::Contains("\"argv\":[\"/bin/prog\",\"--steps\",\"3\"]"));
  CHECK_THAT(header, Catch::Contains("\"cwd\":\"/somewhere\""));
  CHECK_THAT(header, Catch::Contains("\"config\":{\"lr\":1e-3}"));
}

namespace {

// Opens rank 0 of a world of 4 with these replica fields; the header, or the
// error when open fails (then no log is created).
struct ReplicaHeader {
  int code = -1;
  std::string text;
  ReplicaHeader(const char* groups, const char* per_rank) {
    TempDir dir;
    const std::string run = dir / "run";
    dtrace_run_options options;
    dtrace_run_options_init(&options);
    CHECK(options.replica_groups == nullptr);
    CHECK(options.replica_per_rank == nullptr);
    options.run_dir = run.c_str();
    options.world_size = 4;
    options.replica_groups = groups;
    options.replica_per_rank = per_rank;
    dtrace_recorder* h = nullptr;
    code = dtrace_recorder_open_with(&options, nullptr, 0, &h);
    text = code == DTRACE_OK ? test_support::first_line(dir / "run/rank0.jsonl")
                             : dtrace_recorder_last_error(h);
    if (code != DTRACE_OK) CHECK_FALSE(std::filesystem::exists(dir / "run/rank0.jsonl"));
    dtrace_recorder_close(h);
  }
};

}  // namespace

TEST_CASE("C API: replica groups go to the header in dtrace replicas' grammar") {
  const ReplicaHeader pairs("0,2:1-1,3", nullptr);
  REQUIRE(pairs.code == DTRACE_OK);
  CHECK_THAT(pairs.text,
             Catch::Contains("\"replicas\":{\"groups\":[[0,2],[1,3]],\"per_rank\":[\"rng\",\"data\"]}"));
  const ReplicaHeader own("0-3", "rng,sampler");
  REQUIRE(own.code == DTRACE_OK);
  CHECK_THAT(own.text,
             Catch::Contains("\"replicas\":{\"groups\":[[0,1,2,3]],\"per_rank\":[\"rng\",\"sampler\"]}"));
  const ReplicaHeader none_own("0-3", "");
  REQUIRE(none_own.code == DTRACE_OK);
  CHECK_THAT(none_own.text, Catch::Contains("\"per_rank\":[]"));
  for (const char* absent : {static_cast<const char*>(nullptr), ""}) {
    const ReplicaHeader header(absent, "rng");
    REQUIRE(header.code == DTRACE_OK);
    CHECK_THAT(header.text, !Catch::Contains("replicas"));
  }
}

TEST_CASE("C API: replica groups that are not valid are refused at open, named") {
  struct Bad {
    const char* groups;
    const char* per_rank;
    const char* says;
  };
  const Bad cases[] = {
      {"0-4", nullptr, "larger than world_size 4"},
      {"0,1:1,2", nullptr, "options.replica_groups"},
      {"0:1,2,3", nullptr, "needs 2 ranks or more"},
      {"0,x", nullptr, "options.replica_groups"},
      {"0-3", "rng,", "options.replica_per_rank \"rng,\": an empty op name"},
      {"0-3", "rng,,data", "options.replica_per_rank \"rng,,data\": an empty op name"},
      {"0-3", ",rng", "an empty op name"},
  };
  for (const Bad& bad : cases) {
    INFO(bad.groups << " / " << (bad.per_rank ? bad.per_rank : "NULL"));
    const ReplicaHeader header(bad.groups, bad.per_rank);
    CHECK(header.code == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(header.text, Catch::Contains(bad.says));
  }
}

TEST_CASE("C API: every error code has its own sentence") {
  std::vector<std::string> seen;
  for (int code = DTRACE_OK; code <= DTRACE_ERROR_NOT_FOUND; ++code) {
    const std::string text = dtrace_error_string(code);
    CHECK(text != dtrace_error_string(-1));
    CHECK(std::find(seen.begin(), seen.end(), text) == seen.end());
    seen.push_back(text);
  }
}

// ---- Pinned ops (DTRACE_1.4, dtrace-replay/1.3; man/dtrace-fp.5 "Pinned ops"). ----

namespace {

int record_floats(dtrace_recorder* h, const char* op, const char* name, const std::vector<float>& values,
                  int32_t io = DTRACE_IO_OUT) {
  const int64_t shape[] = {static_cast<int64_t>(values.size())};
  return dtrace_recorder_tensor(h, DTRACE_LEVEL_KERNEL, op, io, name, "f32", shape, 1, values.data(),
                                values.size() * sizeof(float));
}

// Step 3 captured at kernel level into DIR/pins, as bisect's pin capture is:
// fwd/layer.1's gemm called twice (its output y all 1s, then all 2s), with an
// input x that is captured too but is no output, so never pinned.
void capture_pins(const TempDir& dir) {
  Handle c(dir / "unused", {"DTRACE_REPLAY_STEP=3", "DTRACE_LEVEL=kernel", "DTRACE_OUT_DIR=" + dir / "captured",
                            "DTRACE_CAPTURE=" + dir / "pins"});
  INFO(c.error());
  REQUIRE(c.code == DTRACE_OK);
  REQUIRE(dtrace_recorder_begin_step(c.h, 3) == DTRACE_OK);
  REQUIRE(dtrace_recorder_push_scope(c.h, "fwd") == DTRACE_OK);
  REQUIRE(dtrace_recorder_push_scope(c.h, "layer.1") == DTRACE_OK);
  for (const float value : {1.0f, 2.0f}) {
    REQUIRE(record_floats(c.h, "gemm", "x", std::vector<float>(4, 9.0f), DTRACE_IO_IN) == DTRACE_OK);
    REQUIRE(record_floats(c.h, "gemm", "y", std::vector<float>(4, value)) == DTRACE_OK);
  }
  REQUIRE(dtrace_recorder_end_step(c.h) == DTRACE_OK);
}

// A replay of step 3 at layer level under DTRACE_PIN=DIR/pins, answering into DIR/OUT.
std::vector<std::string> pinned_replay(const TempDir& dir, const std::string& out) {
  return {"DTRACE_REPLAY_STEP=3", "DTRACE_LEVEL=layer", "DTRACE_OUT_DIR=" + dir / out,
          "DTRACE_PIN=" + dir / "pins"};
}

// The pinned() question with a buffer of four floats that starts as all 7s,
// so a call that pins nothing can be seen to leave it alone.
struct Asked {
  int code = -1;
  int32_t pinned = -1;
  std::vector<float> buffer = std::vector<float>(4, 7.0f);
};
Asked ask(dtrace_recorder* h, const char* op, const char* name, size_t capacity = 16) {
  Asked a;
  a.code = dtrace_recorder_pinned(h, op, name, a.buffer.data(), capacity, &a.pinned);
  return a;
}

const std::vector<float> kUntouched(4, 7.0f);

}  // namespace

TEST_CASE("C API: dtrace_recorder_pinned hands each call its pinned output, in its scope only", "[pin]") {
  TempDir dir;
  capture_pins(dir);
  Handle r(dir / "unused", pinned_replay(dir, "replay"));
  INFO(r.error());
  REQUIRE(r.code == DTRACE_OK);
  int32_t any = -1;
  REQUIRE(dtrace_recorder_pins(r.h, &any) == DTRACE_OK);
  CHECK(any == 0);  // no step open: nothing can be pinned
  Asked early = ask(r.h, "gemm", "y");
  CHECK(early.code == DTRACE_OK);
  CHECK(early.pinned == 0);
  CHECK(early.buffer == kUntouched);

  REQUIRE(dtrace_recorder_begin_step(r.h, 3) == DTRACE_OK);
  REQUIRE(dtrace_recorder_pins(r.h, &any) == DTRACE_OK);
  CHECK(any == 1);
  REQUIRE(dtrace_recorder_push_scope(r.h, "fwd") == DTRACE_OK);
  // The same op outside its scope is another identity: not pinned, not counted.
  Asked outside = ask(r.h, "gemm", "y");
  CHECK(outside.pinned == 0);
  CHECK(outside.buffer == kUntouched);
  REQUIRE(dtrace_recorder_push_scope(r.h, "layer.1") == DTRACE_OK);
  // Asked at layer level, where gemm's own records are not written: calls count all the same.
  Asked first = ask(r.h, "gemm", "y");
  CHECK(first.code == DTRACE_OK);
  CHECK(first.pinned == 1);
  CHECK(first.buffer == std::vector<float>(4, 1.0f));
  Asked input = ask(r.h, "gemm", "x");  // captured as an input: never pinned
  CHECK(input.pinned == 0);
  CHECK(input.buffer == kUntouched);
  Asked other = ask(r.h, "bias", "y");
  CHECK(other.pinned == 0);
  CHECK(other.buffer == kUntouched);
  Asked second = ask(r.h, "gemm", "y");
  CHECK(second.pinned == 1);
  CHECK(second.buffer == std::vector<float>(4, 2.0f));
  Asked third = ask(r.h, "gemm", "y");  // the capture holds two calls
  CHECK(third.code == DTRACE_OK);
  CHECK(third.pinned == 0);
  CHECK(third.buffer == kUntouched);
  REQUIRE(dtrace_recorder_pop_scope(r.h) == DTRACE_OK);
  REQUIRE(dtrace_recorder_pop_scope(r.h) == DTRACE_OK);
  REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
  REQUIRE(dtrace_recorder_close(r.h) == DTRACE_OK);
  r.h = nullptr;
  // The pins the program took, for bisect's compliance check.
  CHECK(test_support::file_text(dir / "replay/rank0.pins") == "{\"step\":3,\"pinned\":2}\n");
}

TEST_CASE("C API: without DTRACE_PIN nothing is pinned and the buffer is left alone", "[pin]") {
  TempDir dir;
  Handle r(dir / "run", {});
  REQUIRE(r.code == DTRACE_OK);
  REQUIRE(dtrace_recorder_begin_step(r.h, 0) == DTRACE_OK);
  int32_t any = -1;
  REQUIRE(dtrace_recorder_pins(r.h, &any) == DTRACE_OK);
  CHECK(any == 0);
  Asked a = ask(r.h, "gemm", "y");
  CHECK(a.code == DTRACE_OK);
  CHECK(a.pinned == 0);
  CHECK(a.buffer == kUntouched);
  REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
  REQUIRE(dtrace_recorder_close(r.h) == DTRACE_OK);
  r.h = nullptr;
  CHECK_FALSE(std::filesystem::exists(dir / "run/rank0.pins"));
}

TEST_CASE("C API: a pinned output of another size, and NULL arguments, are refused", "[pin]") {
  TempDir dir;
  capture_pins(dir);
  Handle r(dir / "unused", pinned_replay(dir, "replay"));
  REQUIRE(r.code == DTRACE_OK);
  REQUIRE(dtrace_recorder_begin_step(r.h, 3) == DTRACE_OK);
  REQUIRE(dtrace_recorder_push_scope(r.h, "fwd") == DTRACE_OK);
  REQUIRE(dtrace_recorder_push_scope(r.h, "layer.1") == DTRACE_OK);
  SECTION("a capacity of the wrong size names the op, writes nothing") {
    Asked small = ask(r.h, "gemm", "y", 8);
    CHECK(small.code == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(small.pinned == 0);
    CHECK(small.buffer == kUntouched);
    CHECK(r.error() == "DTRACE_PIN: fwd/layer.1 gemm 'y' is pinned to 16 bytes, but its output here has 8");
    // A larger buffer is another tensor too, not room to spare.
    std::vector<float> large(8, 7.0f);
    int32_t pinned = -1;
    CHECK(dtrace_recorder_pinned(r.h, "gemm", "y", large.data(), 32, &pinned) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(pinned == 0);
    CHECK(large == std::vector<float>(8, 7.0f));
    CHECK_THAT(r.error(), Catch::Contains("but its output here has 32"));
  }
  SECTION("NULL arguments") {
    std::vector<float> buffer(4, 7.0f);
    int32_t pinned = -1, any = -1;
    CHECK(dtrace_recorder_pinned(nullptr, "gemm", "y", buffer.data(), 16, &pinned) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_pinned(r.h, nullptr, "y", buffer.data(), 16, &pinned) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("op is NULL"));
    CHECK(dtrace_recorder_pinned(r.h, "gemm", nullptr, buffer.data(), 16, &pinned) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("name is NULL"));
    CHECK(dtrace_recorder_pinned(r.h, "gemm", "y", nullptr, 16, &pinned) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("buffer is NULL"));
    CHECK(dtrace_recorder_pinned(r.h, "gemm", "y", buffer.data(), 16, nullptr) ==
          DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(r.error(), Catch::Contains("output pointer is NULL"));
    CHECK(pinned == -1);
    CHECK(buffer == kUntouched);
    CHECK(dtrace_recorder_pins(nullptr, &any) == DTRACE_ERROR_INVALID_ARGUMENT);
    CHECK(dtrace_recorder_pins(r.h, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
    // None of the refused calls counted: the first call is still the first.
    Asked first = ask(r.h, "gemm", "y");
    CHECK(first.pinned == 1);
    CHECK(first.buffer == std::vector<float>(4, 1.0f));
  }
  SECTION("a handle whose open failed") {
    Handle bad(dir / "run", {"DTRACE_LEVEL=fine"});
    REQUIRE(bad.code == DTRACE_ERROR_ENVIRONMENT);
    int32_t pinned = -1, any = -1;
    std::vector<float> buffer(4, 7.0f);
    CHECK(dtrace_recorder_pinned(bad.h, "gemm", "y", buffer.data(), 16, &pinned) == DTRACE_ERROR_ORDER);
    CHECK(dtrace_recorder_pins(bad.h, &any) == DTRACE_ERROR_ORDER);
    CHECK(buffer == kUntouched);
  }
  REQUIRE(dtrace_recorder_pop_scope(r.h) == DTRACE_OK);
  REQUIRE(dtrace_recorder_pop_scope(r.h) == DTRACE_OK);
  REQUIRE(dtrace_recorder_end_step(r.h) == DTRACE_OK);
}

namespace {

// DTRACE_SESSION and DTRACE_REPLAY_STEP in the process environment, which
// dtrace_session_open reads, for one test.
struct SessionVariables {
  SessionVariables(const std::string& dir, const char* step) {
    std::filesystem::create_directories(dir);
    ::setenv("DTRACE_SESSION", dir.c_str(), 1);
    ::setenv("DTRACE_REPLAY_STEP", step, 1);
  }
  ~SessionVariables() {
    ::unsetenv("DTRACE_SESSION");
    ::unsetenv("DTRACE_REPLAY_STEP");
  }
};

}  // namespace

TEST_CASE("C API: dtrace_recorder_open_pinning announces dtrace-replay/1.3 and serves pins in a session",
          "[pin]") {
  TempDir dir;
  const char* argv[] = {"ctrain"};
  dtrace_run_options options;
  dtrace_run_options_init(&options);
  options.replay_argv = argv;
  options.replay_argc = 1;
  SECTION("a run") {
    const std::string run_dir = dir / "run";
    options.run_dir = run_dir.c_str();
    dtrace_recorder* h = nullptr;
    REQUIRE(dtrace_recorder_open_pinning(&options, nullptr, &h) == DTRACE_OK);
    REQUIRE(dtrace_recorder_close(h) == DTRACE_OK);
    CHECK_THAT(test_support::first_line(run_dir + "/rank0.jsonl"),
               Catch::Contains("\"protocol\":\"dtrace-replay/1.3\""));
    CHECK(dtrace_recorder_open_pinning(&options, nullptr, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
  }
  SECTION("a session's request under DTRACE_PIN") {
    capture_pins(dir);
    const std::string session_dir = dir / "session";
    SessionVariables variables(session_dir, "3");
    nlohmann::json request = {{"request", 0},
                              {"env",
                               {{"DTRACE_REPLAY_STEP", "3"},
                                {"DTRACE_LEVEL", "layer"},
                                {"DTRACE_OUT_DIR", dir / "answer"},
                                {"DTRACE_PIN", dir / "pins"}}}};
    dtrace::test::write_text(session_dir + "/request.0.json.tmp", request.dump());
    std::filesystem::rename(session_dir + "/request.0.json.tmp", session_dir + "/request.0.json");
    const int32_t ranks[] = {0};
    dtrace_session* session = nullptr;
    REQUIRE(dtrace_session_open(ranks, 1, &session) == DTRACE_OK);
    REQUIRE(session != nullptr);
    int32_t more = -1;
    REQUIRE(dtrace_session_next(session, 5000, &more) == DTRACE_OK);
    REQUIRE(more == 1);
    dtrace_recorder* h = nullptr;
    REQUIRE(dtrace_recorder_open_pinning(&options, session, &h) == DTRACE_OK);
    REQUIRE(dtrace_recorder_begin_step(h, 3) == DTRACE_OK);
    REQUIRE(dtrace_recorder_push_scope(h, "fwd") == DTRACE_OK);
    REQUIRE(dtrace_recorder_push_scope(h, "layer.1") == DTRACE_OK);
    Asked first = ask(h, "gemm", "y");
    CHECK(first.pinned == 1);
    CHECK(first.buffer == std::vector<float>(4, 1.0f));
    REQUIRE(dtrace_recorder_pop_scope(h) == DTRACE_OK);
    REQUIRE(dtrace_recorder_pop_scope(h) == DTRACE_OK);
    REQUIRE(dtrace_recorder_end_step(h) == DTRACE_OK);
    REQUIRE(dtrace_recorder_close(h) == DTRACE_OK);
    REQUIRE(dtrace_session_done(session) == DTRACE_OK);
    REQUIRE(dtrace_session_close(session) == DTRACE_OK);
    CHECK_THAT(test_support::first_line(dir / "answer/rank0.jsonl"),
               Catch::Contains("\"protocol\":\"dtrace-replay/1.3\""));
    CHECK(test_support::file_text(dir / "answer/rank0.pins") == "{\"step\":3,\"pinned\":1}\n");
  }
}
