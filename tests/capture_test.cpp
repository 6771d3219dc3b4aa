#include "recorder/capture.hpp"

#include <thread>

#include "dtrace/recorder.hpp"
#include "fingerprint/fingerprint.hpp"
#include "recorder_support.hpp"

using dtrace::Level;
using dtrace::Recorder;
using dtrace::RecorderError;
using dtrace::RecordIo;
using dtrace::ReplayRequest;
using dtrace::log::StepStatus;
using test_support::options_for;
using test_support::read_run;
using test_support::TempDir;
using test_support::view;
namespace fs = std::filesystem;

namespace {

const std::vector<float> kInput{1, 2, 3, 4};
const std::vector<float> kWeight{5, 6, 7, 8, 9, 10};
const std::vector<float> kOutput{0.5f, -0.0f};

// A kernel-level replay of step 5 that captures layer 1's tensors.
void capture_step(TempDir& dir) {
  auto request = ReplayRequest::from_variables({{"DTRACE_OUT", dir / "replay.jsonl"},
                                                {"DTRACE_REPLAY_STEP", "5"},
                                                {"DTRACE_LEVEL", "kernel"},
                                                {"DTRACE_SCOPE", "fwd/layer.1"},
                                                {"DTRACE_CAPTURE", dir / "cap"}});
  auto recorder = Recorder::open(options_for(dir / "run"), request);
  recorder->begin_step(5);
  auto fwd = recorder->scope("fwd");
  {
    auto layer = recorder->scope("layer.0");  // outside the scope: recorded, not captured
    recorder->tensor(Level::layer, "block", RecordIo::in, "x", view(kInput, {4}));
  }
  {
    auto layer = recorder->scope("layer.1");
    recorder->tensor(Level::kernel, "gemm", RecordIo::in, "x", view(kInput, {2, 2}));   // seq 1
    recorder->tensor(Level::kernel, "gemm", RecordIo::in, "w", view(kWeight, {2, 3}));  // seq 2
    recorder->scalar_f32(Level::kernel, "gemm", RecordIo::metric, "alpha", 1.0f);       // seq 3
    recorder->tensor(Level::kernel, "gemm", RecordIo::in, "x", view(kOutput, {2}));     // seq 4
  }
  recorder->end_step();
}

std::vector<std::byte> bytes_of(const std::vector<float>& values) {
  const auto* p = reinterpret_cast<const std::byte*>(values.data());
  return {p, p + values.size() * sizeof(float)};
}

}  // namespace

TEST_CASE("capture file names come from rank, step and seq") {
  CHECK(dtrace::recording::capture_file_name(0, 5, 17) == "r0-s5-q17.bin");
  CHECK(dtrace::recording::capture_file_name(3, 120, 0) == "r3-s120-q0.bin");
}

TEST_CASE("a capture writes raw bytes and an index that is a dtrace-fp/1 log") {
  TempDir dir;
  capture_step(dir);
  CHECK_FALSE(fs::exists(dir / "run"));
  CHECK(test_support::file_text(dir / "cap/r0-s5-q1.bin").size() == 16);
  CHECK(test_support::file_text(dir / "cap/r0-s5-q2.bin").size() == 24);
  CHECK(test_support::file_text(dir / "cap/r0-s5-q4.bin").size() == 8);
  CHECK_FALSE(fs::exists(dir / "cap/r0-s5-q0.bin"));  // outside DTRACE_SCOPE
  CHECK_FALSE(fs::exists(dir / "cap/r0-s5-q3.bin"));  // a scalar has no tensor bytes

  const auto index = read_run(dir / "cap/capture.jsonl");
  CHECK(index.reader->header().hash == "xxh3-64k/1");
  const auto& step = index.step(0, 5);
  CHECK(step.status == StepStatus::complete);
  REQUIRE(step.records.size() == 3);
  CHECK(step.records[0].seq == 1);
  CHECK(step.records[1].name == "w");
  CHECK(step.records[1].digest.hex() ==
        dtrace::to_hex16(dtrace::fingerprint(kWeight.data(), kWeight.size() * sizeof(float))));
  CHECK_THAT(test_support::file_text(dir / "cap/capture.jsonl"),
             Catch::Contains("\"file\":\"r0-s5-q2.bin\"}"));
  // The replay's own log holds every record, captured or not.
  CHECK(read_run(dir / "replay.jsonl").step(0, 5).records.size() == 5);
}

TEST_CASE("isolation reads captured bytes back by identity and records repetitions as steps") {
  TempDir dir;
  capture_step(dir);
  auto request = ReplayRequest::from_variables({{"DTRACE_OUT", dir / "isolate.jsonl"},
                                                {"DTRACE_LEVEL", "kernel"},
                                                {"DTRACE_ISOLATE", "fwd/layer.1::gemm"},
                                                {"DTRACE_INPUTS", dir / "cap"},
                                                {"DTRACE_REPEAT", "3"}});
  {
    auto recorder = Recorder::open(options_for(dir / "run"), request);
    CHECK(recorder->captured("fwd/layer.1", "gemm", RecordIo::in, "x") == bytes_of(kInput));
    CHECK(recorder->captured("fwd/layer.1", "gemm", RecordIo::in, "w", 0) == bytes_of(kWeight));
    CHECK(recorder->captured("fwd/layer.1", "gemm", RecordIo::in, "x", 1) == bytes_of(kOutput));
    CHECK_FALSE(recorder->captured("fwd/layer.1", "gemm", RecordIo::in, "x", 2));
    CHECK_FALSE(recorder->captured("fwd/layer.1", "gemm", RecordIo::out, "x"));
    CHECK_FALSE(recorder->captured("fwd/layer.0", "block", RecordIo::in, "x"));
    for (int k = 0; k < request.repeat; ++k) {
      recorder->begin_repetition(k);
      auto scope = recorder->scope("fwd/layer.1");
      recorder->tensor(Level::kernel, "gemm", RecordIo::out, "y", view(kOutput, {2}));
    }
  }
  CHECK_FALSE(fs::exists(dir / "run"));
  const auto run = read_run(dir / "isolate.jsonl");
  REQUIRE(run.steps.size() == 3);
  for (int k = 0; k < 3; ++k) {
    CHECK(run.step(0, k).status == StepStatus::complete);
    CHECK(run.step(0, k).records.size() == 1);
  }
}

TEST_CASE("a damaged capture is an error, not silently different inputs") {
  TempDir dir;
  capture_step(dir);
  {
    std::ofstream corrupt(dir / "cap/r0-s5-q2.bin",
                          std::ios::binary | std::ios::in | std::ios::out);
    corrupt.put('\x7f');
  }
  auto request = ReplayRequest::from_variables(
      {{"DTRACE_ISOLATE", "fwd/layer.1"}, {"DTRACE_INPUTS", dir / "cap"}});
  auto recorder = Recorder::open(options_for(dir / "run"), request);
  CHECK_THROWS_WITH(recorder->captured("fwd/layer.1", "gemm", RecordIo::in, "w"),
                    Catch::Contains("r0-s5-q2.bin") && Catch::Contains("damaged"));
  fs::remove(dir / "cap/r0-s5-q1.bin");
  CHECK_THROWS_AS(recorder->captured("fwd/layer.1", "gemm", RecordIo::in, "x"), RecorderError);
}

TEST_CASE("DTRACE_INPUTS must be a capture directory") {
  TempDir dir;
  auto request =
      ReplayRequest::from_variables({{"DTRACE_ISOLATE", "fwd"}, {"DTRACE_INPUTS", dir / "none"}});
  CHECK_THROWS_WITH(Recorder::open(options_for(dir / "run"), request),
                    Catch::Contains("DTRACE_INPUTS=") && Catch::Contains("capture.jsonl"));
}

TEST_CASE("isolation takes DTRACE_REPLAY_STEP's capture, else the first captured step") {
  TempDir dir;
  const std::string cap = dir / "cap";
  {
    auto recorder = Recorder::open(options_for(dir / "run"),
                                   ReplayRequest::from_variables({{"DTRACE_OUT", dir / "out.jsonl"},
                                                                  {"DTRACE_CAPTURE", cap}}));
    for (int step = 5; step <= 6; ++step) {
      recorder->begin_step(step);
      auto layer = recorder->scope("fwd/layer.0");
      recorder->tensor(Level::layer, "block", RecordIo::in, "x",
                       view(step == 5 ? kInput : kWeight, {step == 5 ? 4 : 6}));
      recorder->end_step();
    }
  }
  auto isolate = [&](std::map<std::string, std::string> variables) {
    variables["DTRACE_ISOLATE"] = "fwd/layer.0";
    variables["DTRACE_INPUTS"] = cap;
    auto recorder =
        Recorder::open(options_for(dir / "run"), ReplayRequest::from_variables(variables));
    return recorder->captured("fwd/layer.0", "block", RecordIo::in, "x");
  };
  CHECK(isolate({}) == bytes_of(kInput));
  CHECK(isolate({{"DTRACE_REPLAY_STEP", "6"}}) == bytes_of(kWeight));
  CHECK_FALSE(isolate({{"DTRACE_REPLAY_STEP", "7"}}));
}

TEST_CASE("the ranks of a process share one capture index") {
  TempDir dir;
  const auto request = ReplayRequest::from_variables(
      {{"DTRACE_REPLAY_STEP", "2"}, {"DTRACE_CAPTURE", dir / "cap"}, {"DTRACE_LEVEL", "kernel"}});
  auto rank_main = [&](int rank) {
    auto recorder = Recorder::open(options_for(dir / "run", rank, 2), request);
    const std::vector<float> mine(8, static_cast<float>(rank));
    recorder->begin_step(2);
    for (int i = 0; i < 20; ++i) {
      recorder->tensor(Level::kernel, "gemm", RecordIo::out, "y", view(mine, {8}));
    }
    recorder->end_step();
  };
  std::thread rank0(rank_main, 0), rank1(rank_main, 1);
  rank0.join();
  rank1.join();
  const auto index = read_run(dir / "cap/capture.jsonl");
  CHECK(index.reader->headers().size() == 1);
  CHECK(index.step(0, 2).records.size() == 20);
  CHECK(index.step(1, 2).records.size() == 20);
  CHECK(test_support::file_text(dir / "cap/r1-s2-q19.bin").size() == 32);
  for (int rank = 0; rank < 2; ++rank) {
    auto isolated = Recorder::open(options_for(dir / "run", rank, 2),
                                   ReplayRequest::from_variables({{"DTRACE_ISOLATE", "gemm"},
                                                                  {"DTRACE_INPUTS", dir / "cap"}}));
    CHECK(isolated->captured("", "gemm", RecordIo::out, "y", 19) ==
          bytes_of(std::vector<float>(8, static_cast<float>(rank))));
  }
}
