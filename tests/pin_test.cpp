// Pinned ops (dtrace-replay/1.3, man/dtrace-fp.5 "Pinned ops"): a capture's
// out records handed back, call by call, to the program that asks, and
// acknowledged in DTRACE_OUT_DIR/rank<r>.pins.
#include <cstring>
#include <fstream>
#include <sstream>

#include "dtrace/recorder.hpp"
#include "recorder_support.hpp"

using dtrace::Level;
using dtrace::Recorder;
using dtrace::RecorderError;
using dtrace::RecordIo;
using dtrace::ReplayRequest;
using test_support::options_for;
using test_support::TempDir;
using test_support::view;

namespace {

std::vector<float> floats(const std::optional<std::vector<std::byte>>& bytes) {
  std::vector<float> out(bytes ? bytes->size() / sizeof(float) : 0);
  if (bytes && !bytes->empty()) std::memcpy(out.data(), bytes->data(), bytes->size());
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Step 3 captured at kernel level: gemm's output y twice in fwd/layer.0 (1s then 2s),
// once in fwd/layer.1 (3s).
void capture_step(const TempDir& dir) {
  auto rec = Recorder::open(options_for(dir / "unused"),
                            ReplayRequest::from_variables({{"DTRACE_REPLAY_STEP", "3"},
                                                           {"DTRACE_LEVEL", "kernel"},
                                                           {"DTRACE_OUT_DIR", dir / "captured"},
                                                           {"DTRACE_CAPTURE", dir / "pins"}}));
  rec->begin_step(3);
  {
    auto fwd = rec->scope("fwd");
    {
      auto layer = rec->scope("layer.0");
      rec->tensor(Level::kernel, "gemm", RecordIo::out, "y", view(std::vector<float>(4, 1.0f), {4}));
      rec->tensor(Level::kernel, "gemm", RecordIo::out, "y", view(std::vector<float>(4, 2.0f), {4}));
    }
    auto layer = rec->scope("layer.1");
    rec->tensor(Level::kernel, "gemm", RecordIo::out, "y", view(std::vector<float>(4, 3.0f), {4}));
  }
  rec->end_step();
}

}  // namespace

TEST_CASE("a pinned op gets the pin capture's output call by call, in its scope only", "[pin]") {
  TempDir dir;
  capture_step(dir);
  auto rec = Recorder::open(options_for(dir / "unused"),
                            ReplayRequest::from_variables({{"DTRACE_REPLAY_STEP", "3"},
                                                           {"DTRACE_LEVEL", "layer"},
                                                           {"DTRACE_OUT_DIR", dir / "replay"},
                                                           {"DTRACE_PIN", dir / "pins"}}));
  CHECK_FALSE(rec->pins());  // no step open
  rec->begin_step(3);
  CHECK(rec->pins());
  {
    auto fwd = rec->scope("fwd");
    {
      auto layer = rec->scope("layer.0");
      // Asked at layer level, where gemm's records are not written: calls still count.
      CHECK(floats(rec->pinned("gemm", "y")) == std::vector<float>(4, 1.0f));
      CHECK_FALSE(rec->pinned("gemm", "x"));      // another output of the op: not pinned
      CHECK_FALSE(rec->pinned("softmax", "y"));   // another op
      CHECK(floats(rec->pinned("gemm", "y")) == std::vector<float>(4, 2.0f));
      CHECK_FALSE(rec->pinned("gemm", "y"));      // a third call: the capture holds two
    }
    auto layer = rec->scope("layer.1");
    CHECK(floats(rec->pinned("gemm", "y")) == std::vector<float>(4, 3.0f));
  }
  rec->end_step();
  rec.reset();
  CHECK(read_text(dir / "replay/rank0.pins") == "{\"step\":3,\"pinned\":3}\n");
}

TEST_CASE("pins apply to each repetition from its first call, never to a fast-forwarded step", "[pin]") {
  TempDir dir;
  capture_step(dir);
  SECTION("repetitions") {
    auto rec = Recorder::open(options_for(dir / "unused"),
                              ReplayRequest::from_variables({{"DTRACE_REPLAY_STEP", "3"},
                                                             {"DTRACE_ISOLATE", "fwd/layer.0"},
                                                             {"DTRACE_INPUTS", dir / "pins"},
                                                             {"DTRACE_REPEAT", "2"},
                                                             {"DTRACE_OUT_DIR", dir / "isolate"},
                                                             {"DTRACE_PIN", dir / "pins"}}));
    for (int k = 0; k < 2; ++k) {
      rec->begin_repetition(k);
      auto fwd = rec->scope("fwd");
      auto layer = rec->scope("layer.0");
      CHECK(floats(rec->pinned("gemm", "y")) == std::vector<float>(4, 1.0f));
      if (k == 0) CHECK(floats(rec->pinned("gemm", "y")) == std::vector<float>(4, 2.0f));
    }
    rec.reset();
    CHECK(read_text(dir / "isolate/rank0.pins") ==
          "{\"step\":0,\"pinned\":2}\n{\"step\":1,\"pinned\":1}\n");
  }
  SECTION("fast-forward") {
    auto rec = Recorder::open(options_for(dir / "unused"),
                              ReplayRequest::from_variables({{"DTRACE_REPLAY_STEP", "3"},
                                                             {"DTRACE_FAST_FORWARD", "step"},
                                                             {"DTRACE_OUT_DIR", dir / "replay"},
                                                             {"DTRACE_PIN", dir / "pins"}}));
    rec->begin_step(2);
    CHECK_FALSE(rec->pins());
    auto fwd = rec->scope("fwd");
    auto layer = rec->scope("layer.0");
    CHECK_FALSE(rec->pinned("gemm", "y"));
  }
}

TEST_CASE("DTRACE_PIN is refused outside a replay, and honours_pins announces dtrace-replay/1.3", "[pin]") {
  TempDir dir;
  CHECK_THROWS_WITH(ReplayRequest::from_variables({{"DTRACE_PIN", dir / "pins"}}),
                    Catch::Contains("DTRACE_PIN=") && Catch::Contains("only meaningful with DTRACE_REPLAY_STEP"));
  CHECK_THROWS_WITH(Recorder::open(options_for(dir / "unused"),
                                   ReplayRequest::from_variables(
                                       {{"DTRACE_REPLAY_STEP", "3"}, {"DTRACE_PIN", dir / "nothing"}})),
                    Catch::Contains("DTRACE_PIN=") && Catch::Contains("not a capture directory"));
  auto options = options_for(dir / "run");
  options.replay_argv = {"train"};
  options.honours_pins = true;
  CHECK_THROWS_WITH(Recorder::open(options, ReplayRequest::from_variables({})),
                    Catch::Contains("honours_pins without serves_sessions"));
  options.serves_sessions = true;
  Recorder::open(options, ReplayRequest::from_variables({}));
  CHECK(read_text(dir / "run/rank0.jsonl").find("\"protocol\":\"dtrace-replay/1.3\"") != std::string::npos);
}
