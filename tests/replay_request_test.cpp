#include <stdlib.h>

#include <catch2/catch.hpp>

#include "dtrace/recorder.hpp"

using dtrace::Level;
using dtrace::RecorderError;
using dtrace::ReplayRequest;

namespace {

ReplayRequest parse(const std::map<std::string, std::string>& variables) {
  return ReplayRequest::from_variables(variables);
}

}  // namespace

TEST_CASE("no DTRACE variables: a normal run") {
  const auto request = parse({{"PATH", "/bin"}});
  CHECK_FALSE(request.out);
  CHECK_FALSE(request.step);
  CHECK_FALSE(request.level);
  CHECK(request.scope.empty());
  CHECK(request.repeat == 1);
  CHECK_FALSE(request.is_replay());
}

TEST_CASE("every replay variable is read") {
  const auto request = parse({{"DTRACE_OUT", "/tmp/out.jsonl"},
                              {"DTRACE_REPLAY_STEP", "37"},
                              {"DTRACE_LEVEL", "kernel"},
                              {"DTRACE_SCOPE", "fwd/layer.1"},
                              {"DTRACE_CAPTURE", "/tmp/cap-b"},
                              {"DTRACE_ISOLATE", "fwd/layer.1::gemm_fc2"},
                              {"DTRACE_INPUTS", "/tmp/cap-a"},
                              {"DTRACE_REPEAT", "5"}});
  CHECK(request.out == "/tmp/out.jsonl");
  CHECK(request.step == 37);
  CHECK(request.level == Level::kernel);
  CHECK(request.scope == "fwd/layer.1");
  CHECK(request.capture == "/tmp/cap-b");
  CHECK(request.inputs == "/tmp/cap-a");
  CHECK(request.repeat == 5);
  CHECK(request.is_replay());
  CHECK(request.isolate_scope() == "fwd/layer.1");
  CHECK(request.isolate_op() == "gemm_fc2");
}

TEST_CASE("DTRACE_ISOLATE names a scope, or a scope and an op") {
  auto layer = parse({{"DTRACE_ISOLATE", "fwd/layer.3"}, {"DTRACE_INPUTS", "/tmp/cap"}});
  CHECK(layer.isolate_scope() == "fwd/layer.3");
  CHECK(layer.isolate_op().empty());
  // Op names may contain "::" themselves; the first one separates.
  auto op = parse({{"DTRACE_ISOLATE", "fwd/layer.3::aten::mm"}, {"DTRACE_INPUTS", "/tmp/cap"}});
  CHECK(op.isolate_scope() == "fwd/layer.3");
  CHECK(op.isolate_op() == "aten::mm");
}

TEST_CASE("DTRACE_OCCURRENCE names which call of the isolated op to run") {
  using Catch::Contains;
  const std::map<std::string, std::string> isolate{{"DTRACE_ISOLATE", "fwd/mixer::seqmean"},
                                                   {"DTRACE_INPUTS", "/tmp/c"}};
  // Unnamed: the first call, as a workload that predates the variable runs.
  CHECK_FALSE(parse(isolate).isolate_occurrence);
  CHECK(parse(isolate).isolate_call() == 0);
  auto second = isolate;
  second["DTRACE_OCCURRENCE"] = "1";
  CHECK(parse(second).isolate_occurrence == 1);
  CHECK(parse(second).isolate_call() == 1);
  second["DTRACE_OCCURRENCE"] = "";
  CHECK_FALSE(parse(second).isolate_occurrence);
  for (const char* bad : {"-1", "two", "1.0", "99999999999"}) {
    auto variables = isolate;
    variables["DTRACE_OCCURRENCE"] = bad;
    CHECK_THROWS_WITH(parse(variables), Contains(std::string("DTRACE_OCCURRENCE=") + bad));
  }
  CHECK_THROWS_WITH(parse({{"DTRACE_OCCURRENCE", "1"}}),
                    Contains("DTRACE_OCCURRENCE=1") && Contains("DTRACE_ISOLATE"));
}

TEST_CASE("an empty variable counts as unset") {
  const auto request =
      parse({{"DTRACE_OUT", ""}, {"DTRACE_REPLAY_STEP", ""}, {"DTRACE_LEVEL", ""}});
  CHECK_FALSE(request.out);
  CHECK_FALSE(request.step);
  CHECK_FALSE(request.level);
}

TEST_CASE("a bad value is an error naming the variable and the value") {
  using Catch::Contains;
  CHECK_THROWS_WITH(parse({{"DTRACE_REPLAY_STEP", "abc"}}), Contains("DTRACE_REPLAY_STEP=abc"));
  CHECK_THROWS_WITH(parse({{"DTRACE_REPLAY_STEP", "12x"}}), Contains("DTRACE_REPLAY_STEP=12x"));
  CHECK_THROWS_WITH(parse({{"DTRACE_REPLAY_STEP", "-1"}}), Contains("DTRACE_REPLAY_STEP=-1"));
  CHECK_THROWS_WITH(parse({{"DTRACE_REPLAY_STEP", "99999999999999999999"}}),
                    Contains("DTRACE_REPLAY_STEP=99999999999999999999"));
  CHECK_THROWS_WITH(parse({{"DTRACE_LEVEL", "fine"}}),
                    Contains("DTRACE_LEVEL=fine") && Contains("step, layer, kernel"));
  CHECK_THROWS_WITH(parse({{"DTRACE_LEVEL", "Kernel"}}), Contains("DTRACE_LEVEL=Kernel"));
  const std::map<std::string, std::string> isolate{{"DTRACE_ISOLATE", "fwd"},
                                                   {"DTRACE_INPUTS", "/tmp/c"}};
  for (const char* bad : {"0", "-2", "three", "1.5"}) {
    auto variables = isolate;
    variables["DTRACE_REPEAT"] = bad;
    CHECK_THROWS_WITH(parse(variables), Contains(std::string("DTRACE_REPEAT=") + bad));
  }
  CHECK_THROWS_WITH(parse({{"DTRACE_ISOLATE", "fwd/layer.3"}}),
                    Contains("DTRACE_ISOLATE=fwd/layer.3") && Contains("DTRACE_INPUTS"));
  CHECK_THROWS_WITH(parse({{"DTRACE_ISOLATE", "::gemm"}, {"DTRACE_INPUTS", "/tmp/c"}}),
                    Contains("DTRACE_ISOLATE=::gemm"));
  CHECK_THROWS_WITH(parse({{"DTRACE_ISOLATE", "fwd::"}, {"DTRACE_INPUTS", "/tmp/c"}}),
                    Contains("DTRACE_ISOLATE=fwd::"));
  CHECK_THROWS_WITH(parse({{"DTRACE_INPUTS", "/tmp/c"}}),
                    Contains("DTRACE_INPUTS=/tmp/c") && Contains("DTRACE_ISOLATE"));
  CHECK_THROWS_WITH(parse({{"DTRACE_REPEAT", "3"}}), Contains("DTRACE_REPEAT=3"));
  CHECK_THROWS_WITH(
      parse(
          {{"DTRACE_ISOLATE", "fwd"}, {"DTRACE_INPUTS", "/tmp/c"}, {"DTRACE_CAPTURE", "/tmp/./c"}}),
      Contains("DTRACE_CAPTURE=/tmp/./c"));
  CHECK_THROWS_AS(parse({{"DTRACE_LEVEL", "fine"}}), RecorderError);
}

TEST_CASE("the workflow variables (dtrace verify, tax) are read for a training run") {
  const auto request = parse({{"DTRACE_RUN_DIR", "/tmp/arms/arm1"},
                              {"DTRACE_CHECKPOINT_DIR", "/tmp/arms/ck"},
                              {"DTRACE_STOP_AT", "4"},
                              {"DTRACE_RESUME_AT", "2"},
                              {"DTRACE_DETERMINISTIC", "0"}});
  CHECK(request.run_dir == "/tmp/arms/arm1");
  CHECK(request.checkpoint_dir == "/tmp/arms/ck");
  CHECK(request.stop_at == 4);
  CHECK(request.resume_at == 2);
  CHECK(request.deterministic == false);
  CHECK_FALSE(request.is_replay());
  CHECK(parse({{"DTRACE_DETERMINISTIC", "1"}}).deterministic == true);
  CHECK_FALSE(parse({{"DTRACE_DETERMINISTIC", ""}}).deterministic);
  // DTRACE_DETERMINISTIC is the configuration's, so a replay may inherit it.
  CHECK(parse({{"DTRACE_REPLAY_STEP", "3"}, {"DTRACE_DETERMINISTIC", "1"}}).deterministic == true);
}

TEST_CASE("a bad workflow variable is an error naming the variable and the value") {
  using Catch::Contains;
  CHECK_THROWS_WITH(parse({{"DTRACE_STOP_AT", "0"}}), Contains("DTRACE_STOP_AT=0"));
  CHECK_THROWS_WITH(parse({{"DTRACE_STOP_AT", "two"}}), Contains("DTRACE_STOP_AT=two"));
  CHECK_THROWS_WITH(parse({{"DTRACE_RESUME_AT", "-3"}}), Contains("DTRACE_RESUME_AT=-3"));
  CHECK_THROWS_WITH(parse({{"DTRACE_DETERMINISTIC", "yes"}}),
                    Contains("DTRACE_DETERMINISTIC=yes") && Contains("0 (fast kernels)"));
  CHECK_THROWS_WITH(parse({{"DTRACE_STOP_AT", "2"}, {"DTRACE_RESUME_AT", "2"}}),
                    Contains("DTRACE_STOP_AT=2") && Contains("DTRACE_RESUME_AT=2"));
  // A replay never writes the run directory or checkpoints.
  CHECK_THROWS_WITH(parse({{"DTRACE_REPLAY_STEP", "3"}, {"DTRACE_RUN_DIR", "/tmp/r"}}),
                    Contains("DTRACE_RUN_DIR=/tmp/r") && Contains("DTRACE_REPLAY_STEP"));
  CHECK_THROWS_WITH(
      parse({{"DTRACE_ISOLATE", "fwd"}, {"DTRACE_INPUTS", "/tmp/c"}, {"DTRACE_STOP_AT", "3"}}),
      Contains("DTRACE_STOP_AT=3") && Contains("DTRACE_ISOLATE"));
}

TEST_CASE("from_environment reads the process environment") {
  ::setenv("DTRACE_LEVEL", "layer", 1);
  ::setenv("DTRACE_REPLAY_STEP", "3", 1);
  const auto request = ReplayRequest::from_environment();
  ::unsetenv("DTRACE_LEVEL");
  ::unsetenv("DTRACE_REPLAY_STEP");
  CHECK(request.level == Level::layer);
  CHECK(request.step == 3);
  ::setenv("DTRACE_REPEAT", "0", 1);
  CHECK_THROWS_WITH(ReplayRequest::from_environment(), Catch::Contains("DTRACE_REPEAT=0"));
  ::unsetenv("DTRACE_REPEAT");
}

TEST_CASE("level names round-trip") {
  for (Level level : {Level::step, Level::layer, Level::kernel}) {
    CHECK(dtrace::parse_level(dtrace::level_name(level)) == level);
  }
  CHECK_FALSE(dtrace::parse_level("layers"));
}
