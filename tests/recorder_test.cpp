#include "dtrace/recorder.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <sstream>
#include <thread>
#include <xxhash.h>

#include "fingerprint/fingerprint.hpp"
#include "recorder/capture.hpp"
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

ReplayRequest request_from(const std::map<std::string, std::string>& variables) {
  return ReplayRequest::from_variables(variables);
}

// A step with records at every level, in nested scopes.
void record_step(Recorder& recorder, std::int64_t step, const std::vector<float>& x) {
  recorder.begin_step(step);
  {
    auto fwd = recorder.scope("fwd");
    for (int layer = 0; layer < 2; ++layer) {
      auto in_layer = recorder.scope("layer." + std::to_string(layer));
      recorder.tensor(Level::layer, "block", RecordIo::in, "x", view(x, {2, 2}));
      recorder.tensor(Level::kernel, "gemm", RecordIo::out, "y", view(x, {4}));
    }
  }
  auto at_step = recorder.scope("step");
  recorder.scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 1.0f);
  recorder.end_step();
}

}  // namespace

TEST_CASE("a normal run writes a header and records that RunReader reads back") {
  TempDir dir;
  auto options = options_for(dir / "run");
  options.run_name = "baseline";
  options.world_size = 2;
  options.rank = 1;
  options.env = {{"NCCL_ALGO", "Ring"}};
  options.config_json = "{\"lr\": 0.001,\n \"batch\": 8}";
  options.replay_argv = {"minitrain", "--steps", "3"};
  const std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f};
  {
    auto recorder = Recorder::open(options, ReplayRequest{});
    CHECK(recorder->level() == Level::layer);
    record_step(*recorder, 0, x);
    record_step(*recorder, 1, x);
  }

  const std::string file = dir / "run/rank1.jsonl";
  REQUIRE(fs::is_regular_file(file));
  auto run = read_run(dir / "run");
  const auto& header = run.reader->header();
  CHECK(header.format == "fp/1");
  CHECK(header.run == "baseline");
  CHECK(header.world_size == 2);
  CHECK(header.hash == "xxh3-64k/1");
  CHECK(header.level == "layer");
  CHECK(header.env == nlohmann::json{{"NCCL_ALGO", "Ring"}});
  CHECK(header.config == nlohmann::json{{"lr", 0.001}, {"batch", 8}});
  CHECK(header.replay["argv"] == nlohmann::json{"minitrain", "--steps", "3"});
  CHECK(header.replay["protocol"] == "dtrace-replay/1.1");  // several processes, one replay
  // The configuration is written as given (key order and spelling), on one line.
  CHECK_THAT(test_support::first_line(file),
             Catch::Contains("\"config\":{\"lr\": 0.001,  \"batch\": 8}"));

  REQUIRE(run.steps.size() == 2);
  const auto& step = run.step(1, 1);
  CHECK(step.status == StepStatus::complete);
  // Kernel records are above the run's level: two layer inputs and the loss.
  REQUIRE(step.records.size() == 3);
  CHECK(step.declared_count == 3);
  for (std::size_t i = 0; i < step.records.size(); ++i)
    CHECK(step.records[i].seq == std::int64_t(i));
  const auto& input = step.records[1];
  CHECK(input.scope == "fwd/layer.1");
  CHECK(input.op == "block");
  CHECK(input.io == dtrace::log::Io::in);
  CHECK(input.name == "x");
  CHECK(input.dtype == "f32");
  CHECK(std::vector<std::int64_t>(input.shape.begin(), input.shape.end()) ==
        std::vector<std::int64_t>{2, 2});
  CHECK(input.digest.hex() ==
        dtrace::to_hex16(dtrace::fingerprint(x.data(), x.size() * sizeof(float))));
  const auto& loss = step.records[2];
  CHECK(loss.scope == "step");
  CHECK(loss.scalar);
  CHECK(loss.digest.hex() == "3f800000");
  CHECK(loss.value == 1.0);
}

// What the digest field is for in a host program: host_fingerprint taken
// ahead of the record equals the recorder's own hashing of the same bytes
// (trusting a digest, and bytes that live elsewhere: the test below).
TEST_CASE("host_fingerprint taken ahead of time equals the recorder's own hashing") {
  TempDir dir;
  auto options = options_for(dir / "run");
  std::vector<float> x(70000);  // more than one 64 KiB chunk
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f;
  const std::uint64_t ahead = dtrace::host_fingerprint(x.data(), x.size() * sizeof(float));
  // The answer from outside dtrace: these 280000 bytes written by Python and
  // hashed by tools/xxh3-64k-reference.py (libxxhash through ctypes).
  const std::string independent = "40fcf4c18ff0120f";
  CHECK(dtrace::to_hex16(ahead) == independent);
  // One thread or several, the same fingerprint.
  CHECK(ahead == dtrace::fingerprint(x.data(), x.size() * sizeof(float), 2));
  {
    auto recorder = Recorder::open(options, ReplayRequest{});
    recorder->begin_step(0);
    recorder->tensor(Level::step, "param", RecordIo::state, "hashed", view(x, {70000}));
    dtrace::TensorView given = view(x, {70000});
    given.digest = ahead;
    recorder->tensor(Level::step, "param", RecordIo::state, "given", given);
    recorder->end_step();
  }
  auto run = read_run(dir / "run");
  const auto& records = run.step(0, 0).records;
  REQUIRE(records.size() == 2);
  // The recorder's own hashing, against the independent answer (not against
  // `ahead`, which the same library computed).
  CHECK(records[0].digest.hex() == independent);
  // The given digest is logged as it was handed over (that it is not hashed
  // again is shown by the test that hands over a digest the bytes do not have).
  CHECK(records[1].digest.hex() == independent);
}

TEST_CASE("scalars carry the dtype's exact bit pattern") {
  TempDir dir;
  {
    auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
    recorder->begin_step(7);
    recorder->scalar_f64(Level::step, "loss", RecordIo::metric, "f64", -0.0);
    recorder->scalar(Level::step, "loss", RecordIo::metric, "bf16", "bf16", 0xdead3f80, 1.0);
    recorder->scalar(Level::step, "loss", RecordIo::metric, "f16", "f16", 0x3c00, 1.0);
    recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "nan",
                         std::bit_cast<float>(0x7fc00001u));
    recorder->end_step();
  }
  auto run = read_run(dir / "run");
  const auto& records = run.step(0, 7).records;
  REQUIRE(records.size() == 4);
  CHECK(records[0].digest.hex() == "8000000000000000");
  CHECK(records[1].digest.hex() == "3f80");  // the low 16 bits only
  CHECK(records[2].digest.hex() == "3c00");
  CHECK(records[3].digest.hex() == "7fc00001");
  CHECK_FALSE(records[3].has_value);  // JSON has no NaN: the value is null, the bits are exact
}

TEST_CASE("the level filter drops finer records; DTRACE_LEVEL overrides the run's level") {
  TempDir dir;
  const std::vector<float> x{1, 2, 3, 4};
  auto options = options_for(dir / "run");
  options.level = Level::step;
  {
    auto recorder = Recorder::open(options, ReplayRequest{});
    CHECK(recorder->wants(Level::step));
    CHECK_FALSE(recorder->wants(Level::layer));
    record_step(*recorder, 0, x);
  }
  CHECK(read_run(dir / "run").step(0, 0).records.size() == 1);

  const std::string out = dir / "replay.jsonl";
  {
    auto recorder =
        Recorder::open(options, request_from({{"DTRACE_OUT", out}, {"DTRACE_LEVEL", "kernel"}}));
    CHECK(recorder->level() == Level::kernel);
    record_step(*recorder, 0, x);
  }
  auto run = read_run(out);
  CHECK(run.reader->header().level == "kernel");
  CHECK(run.step(0, 0).records.size() == 5);
}

TEST_CASE("DTRACE_SCOPE limits kernel records to the scope, not layer or step records") {
  TempDir dir;
  const std::vector<float> x{1, 2, 3, 4};
  const std::string out = dir / "replay.jsonl";
  {
    auto recorder = Recorder::open(
        options_for(dir / "run"),
        request_from(
            {{"DTRACE_OUT", out}, {"DTRACE_LEVEL", "kernel"}, {"DTRACE_SCOPE", "fwd/layer.1"}}));
    record_step(*recorder, 3, x);
  }
  const auto run = read_run(out);
  const auto& records = run.step(0, 3).records;
  std::vector<std::string> seen;
  for (const auto& r : records) seen.push_back(std::string(r.scope) + ":" + std::string(r.op));
  CHECK(seen == std::vector<std::string>{"fwd/layer.0:block", "fwd/layer.1:block",
                                         "fwd/layer.1:gemm", "step:loss"});
  for (std::size_t i = 0; i < records.size(); ++i) CHECK(records[i].seq == std::int64_t(i));
}

TEST_CASE("an existing run file is never overwritten") {
  TempDir dir;
  { auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{}); }
  const std::string before = test_support::file_text(dir / "run/rank0.jsonl");
  CHECK_THROWS_WITH(Recorder::open(options_for(dir / "run"), ReplayRequest{}),
                    Catch::Contains("rank0.jsonl") && Catch::Contains("exists already"));
  CHECK(test_support::file_text(dir / "run/rank0.jsonl") == before);
  // Another rank of the same run is a different file.
  CHECK_NOTHROW(Recorder::open(options_for(dir / "run", 1, 2), ReplayRequest{}));
}

TEST_CASE("DTRACE_OUT is one file for the ranks of a process, read back cleanly") {
  TempDir dir;
  const std::string out = dir / "replay.jsonl";
  const auto request = request_from({{"DTRACE_OUT", out}, {"DTRACE_REPLAY_STEP", "0"}});
  constexpr int kSteps = 20;
  auto rank_main = [&](int rank) {
    auto recorder = Recorder::open(options_for(dir / "run", rank, 2), request);
    std::vector<float> x(64, static_cast<float>(rank));
    for (int step = 0; step < kSteps; ++step) {
      recorder->begin_step(step);
      for (int i = 0; i < 50; ++i) {
        auto layer = recorder->scope("layer." + std::to_string(i));
        recorder->tensor(Level::layer, "block", RecordIo::out, "y", view(x, {64}));
      }
      recorder->end_step();
    }
  };
  std::thread rank0(rank_main, 0), rank1(rank_main, 1);
  rank0.join();
  rank1.join();

  CHECK_FALSE(fs::exists(dir / "run"));  // a replay never touches the run directory
  const std::string text = test_support::file_text(out);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1 + 2 * kSteps * 51);
  const auto run = read_run(out);
  CHECK(run.reader->headers().size() == 1);
  CHECK(run.reader->notes().empty());
  REQUIRE(run.steps.size() == 2 * kSteps);
  for (const auto& step : run.steps) {
    CHECK(step.status == StepStatus::complete);
    CHECK(step.records.size() == 50);
  }
}

TEST_CASE("DTRACE_OUT_DIR: each rank writes its own records, status and capture index (1.1)") {
  TempDir dir;
  const std::string out_dir = dir / "replay";
  const std::string capture = dir / "capture";
  const auto request = request_from({{"DTRACE_OUT_DIR", out_dir},
                                     {"DTRACE_OUT", out_dir + "/replay.jsonl"},
                                     {"DTRACE_CAPTURE", capture},
                                     {"DTRACE_REPLAY_STEP", "0"}});
  for (int rank = 0; rank < 2; ++rank) {
    auto recorder = Recorder::open(options_for(dir / "run", rank, 2), request);
    record_step(*recorder, 0, std::vector<float>(4, static_cast<float>(rank)));
    const std::string name = "rank" + std::to_string(rank);
    // The status names this process and, after the step, how far it got.
    CHECK(test_support::file_text(out_dir + "/" + name + ".status")
              .starts_with("running " + std::to_string(::getpid()) + " 0 "));
    CHECK(fs::exists(capture + "/capture." + name + ".jsonl"));
  }
  CHECK_FALSE(fs::exists(out_dir + "/replay.jsonl"));  // a 1.1 recorder ignores DTRACE_OUT
  CHECK_FALSE(fs::exists(capture + "/capture.jsonl"));
  const auto run = read_run(out_dir);  // the directory is the replay's output, one run
  REQUIRE(run.steps.size() == 2);
  CHECK(run.steps[0].rank == 0);
  CHECK(run.steps[1].rank == 1);
  // Both ranks' capture indexes are read as one index.
  const auto index = dtrace::recording::CaptureIndex::load(capture, 1, 0);
  CHECK(index.size() > 0);
}

TEST_CASE("a rank's status file ends with the process's exit code") {
  TempDir dir;
  const std::string out_dir = dir / "replay";
  const auto request = request_from({{"DTRACE_OUT_DIR", out_dir}, {"DTRACE_REPLAY_STEP", "0"}});
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto recorder = Recorder::open(options_for(dir / "run", 1, 2), request);
    recorder->begin_step(0);
    std::exit(5);  // a workload giving up mid-step
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(test_support::file_text(out_dir + "/rank1.status").starts_with("exit 5 "));
}

TEST_CASE("a status written in a child after fork names the child") {
  // The pid of the "running" line is read once per process, not per line: a
  // child forked after the parent wrote one names itself, not the parent.
  TempDir dir;
  const auto request = request_from({{"DTRACE_OUT_DIR", dir / "parent"}, {"DTRACE_REPLAY_STEP", "0"}});
  auto parent = Recorder::open(options_for(dir / "run", 0, 2), request);
  parent->begin_step(0);
  CHECK(test_support::file_text(dir / "parent/rank0.status")
            .starts_with("running " + std::to_string(::getpid()) + " 0 "));
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const auto again = request_from({{"DTRACE_OUT_DIR", dir / "child"}, {"DTRACE_REPLAY_STEP", "0"}});
    auto recorder = Recorder::open(options_for(dir / "run", 1, 2), again);
    recorder->begin_step(0);
    const bool own = test_support::file_text(dir / "child/rank1.status")
                         .starts_with("running " + std::to_string(::getpid()) + " 0 ");
    ::_exit(own ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the child's status named the child
}

TEST_CASE("a rank's end marker says by the wall clock when the process exited") {
  // dtrace-fp(5): "exit CODE TIME", TIME the wall clock (CLOCK_REALTIME) in
  // nanoseconds since the epoch, which orders ranks that fail together against
  // one another and against the files' modification times; another clock's
  // count (since boot) is no time a reader can place.
  TempDir dir;
  const std::string out_dir = dir / "replay";
  const auto request = request_from({{"DTRACE_OUT_DIR", out_dir}, {"DTRACE_REPLAY_STEP", "0"}});
  const auto wall_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const long long before = wall_ns();
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto recorder = Recorder::open(options_for(dir / "run", 1, 2), request);
    recorder->begin_step(0);
    std::exit(7);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const long long after = wall_ns();
  std::istringstream line(test_support::file_text(out_dir + "/rank1.status"));
  std::string word;
  int code = -1;
  long long time = 0;
  line >> word >> code >> time;
  CHECK(word == "exit");
  CHECK(code == 7);
  // Written between the fork and the wait, whatever the machine's load.
  CHECK(time >= before);
  CHECK(time <= after);
}

TEST_CASE("a run written to its own run_dir ends each rank with its end marker") {
  // No workflow variable: the program's own run directory (minitrain --out,
  // dtrace_torch's run_dir) gets rank<r>.status beside rank<r>.jsonl, so
  // `dtrace watch` ends the run when the job ends (dtrace-fp(5), The end of a run).
  TempDir dir;
  const std::string run = dir / "run";
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto recorder = Recorder::open(options_for(run, 1, 2), request_from({}));
    record_step(*recorder, 0, std::vector<float>(4, 1.0f));
    const bool running = test_support::file_text(run + "/rank1.status").starts_with("running ");
    std::exit(running ? 0 : 3);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // "running" while it ran
  CHECK(test_support::file_text(run + "/rank1.status").starts_with("exit 0 "));
  CHECK(fs::exists(run + "/rank1.jsonl"));

  // A replay never writes the run directory, its status included.
  const std::string other = dir / "other";
  const auto replay = request_from({{"DTRACE_REPLAY_STEP", "0"}, {"DTRACE_OUT", dir / "replay.jsonl"}});
  auto recorder = Recorder::open(options_for(other, 0, 1), replay);
  record_step(*recorder, 0, std::vector<float>(4, 1.0f));
  CHECK_FALSE(fs::exists(other));
}

TEST_CASE("DTRACE_OUT replaces an empty placeholder but not a file with content") {
  TempDir dir;
  const std::string out = dir / "replay.jsonl";
  { std::ofstream placeholder(out); }
  { auto recorder = Recorder::open(options_for(dir / "run"), request_from({{"DTRACE_OUT", out}})); }
  CHECK(read_run(out).reader->header().run == "a");

  const std::string theirs = dir / "theirs.jsonl";
  { std::ofstream(theirs) << "{\"dtrace\":\"fp/1\"}\n"; }
  CHECK_THROWS_WITH(
      Recorder::open(options_for(dir / "run"), request_from({{"DTRACE_OUT", theirs}})),
      Catch::Contains("DTRACE_OUT=" + theirs) && Catch::Contains("not empty"));
  CHECK(test_support::file_text(theirs) == "{\"dtrace\":\"fp/1\"}\n");
}

TEST_CASE("recorders opened one after another in a process share DTRACE_OUT and its header") {
  TempDir dir;
  const std::string out = dir / "replay.jsonl";
  const auto request = request_from({{"DTRACE_OUT", out}});
  for (int rank = 0; rank < 2; ++rank) {
    auto recorder = Recorder::open(options_for(dir / "run", rank, 2), request);
    recorder->begin_step(0);
    recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 1.0f);
    recorder->end_step();
  }
  const auto run = read_run(out);
  CHECK(run.reader->headers().size() == 1);
  CHECK(run.step(0, 0).status == StepStatus::complete);
  CHECK(run.step(1, 0).status == StepStatus::complete);
  // Each end record's own line number counts the other rank's lines too
  // (dtrace-fp(5), field line): the shared sink numbers the lines it writes.
  CHECK(run.step(0, 0).logged_line == 3);
  CHECK(run.step(1, 0).logged_line == 5);
  CHECK(run.step(1, 0).end_line == 5);
}

TEST_CASE("DTRACE_RUN_DIR replaces the run directory of a training run") {
  TempDir dir;
  const std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f};
  {
    auto recorder =
        Recorder::open(options_for(dir / "own"), request_from({{"DTRACE_RUN_DIR", dir / "arm1"}}));
    record_step(*recorder, 0, x);
  }
  CHECK_FALSE(fs::exists(dir / "own"));
  CHECK(read_run(dir / "arm1").steps.size() == 1);
  // A program that names no run directory of its own may rely on it.
  auto options = options_for("");
  CHECK_NOTHROW(Recorder::open(options, request_from({{"DTRACE_RUN_DIR", dir / "arm2"}})));
  CHECK_THROWS_AS(Recorder::open(options, ReplayRequest{}), RecorderError);
}

TEST_CASE("a replay without DTRACE_OUT writes no log and never the run directory") {
  TempDir dir;
  {
    auto recorder =
        Recorder::open(options_for(dir / "run"), request_from({{"DTRACE_REPLAY_STEP", "4"}}));
    recorder->begin_step(4);
    recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 2.0f);
    recorder->end_step();
  }
  CHECK_FALSE(fs::exists(dir / "run"));
}

TEST_CASE("a step left open is written without its end record, so readers see it incomplete") {
  TempDir dir;
  {
    auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
    recorder->begin_step(0);
    recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 2.0f);
    recorder->end_step();
    recorder->begin_step(1);
    recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 3.0f);
  }
  const auto run = read_run(dir / "run");
  CHECK(run.step(0, 0).status == StepStatus::complete);
  CHECK(run.step(0, 1).status == StepStatus::incomplete);
}

TEST_CASE("misuse is reported, not logged") {
  TempDir dir;
  auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
  const std::vector<float> x{1, 2, 3, 4};
  CHECK_THROWS_WITH(recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 1.0f),
                    Catch::Contains("outside a step"));
  CHECK_THROWS_AS(recorder->end_step(), RecorderError);
  recorder->begin_step(5);
  CHECK_THROWS_WITH(recorder->tensor(Level::layer, "block", RecordIo::in, "x", view(x, {3})),
                    Catch::Contains("16 bytes") && Catch::Contains("take 12"));
  CHECK_THROWS_WITH(recorder->scalar(Level::step, "loss", RecordIo::metric, "loss", "q7", 0, 0.0),
                    Catch::Contains("q7"));
  CHECK_THROWS_WITH(recorder->begin_step(6), Catch::Contains("is open"));
  recorder->end_step();
  CHECK_THROWS_WITH(recorder->begin_step(5), Catch::Contains("must increase"));
}

TEST_CASE("options that cannot make a valid log are refused") {
  TempDir dir;
  auto options = options_for(dir / "run");
  options.config_json = "[1, 2]";
  CHECK_THROWS_WITH(Recorder::open(options, ReplayRequest{}), Catch::Contains("config_json"));
  options = options_for(dir / "run", 2, 2);
  CHECK_THROWS_WITH(Recorder::open(options, ReplayRequest{}), Catch::Contains("rank 2"));
  options = options_for("");
  CHECK_THROWS_WITH(Recorder::open(options, ReplayRequest{}), Catch::Contains("run directory"));
}

TEST_CASE("scopes nest and pop in order") {
  TempDir dir;
  auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
  {
    auto a = recorder->scope("fwd");
    {
      auto b = recorder->scope("layer.3");
      auto c = recorder->scope("attn");
      CHECK(recorder->current_scope() == "fwd/layer.3/attn");
    }
    CHECK(recorder->current_scope() == "fwd");
  }
  CHECK(recorder->current_scope().empty());
}

TEST_CASE("a step's lines reach the file only at its end") {
  TempDir dir;
  auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
  const std::string file = dir / "run/rank0.jsonl";
  auto lines = [&] {
    const std::string text = test_support::file_text(file);
    return std::count(text.begin(), text.end(), '\n');
  };
  CHECK(lines() == 1);  // the header, written at open
  recorder->begin_step(0);
  recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 1.0f);
  recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "grad_norm", 2.0f);
  CHECK(lines() == 1);  // a crash now would leave no partial step behind
  recorder->end_step();
  CHECK(lines() == 4);
}

TEST_CASE("a precomputed digest is logged as is, without the bytes") {
  TempDir dir;
  const std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f};
  {
    auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
    recorder->begin_step(0);
    auto fwd = recorder->scope("fwd");
    // A device tensor: only its size and its digest cross to the host.
    dtrace::TensorView device{nullptr, 4 * sizeof(float), "f32", {4}, 0x0123456789abcdefULL};
    recorder->tensor(Level::layer, "block", RecordIo::out, "y", device);
    // With both, the digest wins: the recorder never hashes what it was handed.
    dtrace::TensorView both = view(x, {4});
    both.digest = 0xfedcba9876543210ULL;
    recorder->tensor(Level::layer, "block", RecordIo::out, "z", both);
    // Without a digest, null data for nonzero bytes is still misuse.
    CHECK_THROWS_AS(recorder->tensor(Level::layer, "block", RecordIo::out, "w",
                                     dtrace::TensorView{nullptr, 16, "f32", {4}, std::nullopt}),
                    RecorderError);
    recorder->end_step();
  }
  auto run = read_run(dir / "run");
  const auto& step = run.step(0, 0);
  REQUIRE(step.records.size() == 2);
  CHECK(step.records[0].digest.hex() == "0123456789abcdef");
  CHECK(step.records[1].digest.hex() == "fedcba9876543210");
}

TEST_CASE("a capture refuses a digest without bytes: it must write them") {
  TempDir dir;
  auto request = request_from({{"DTRACE_OUT", dir / "replay.jsonl"},
                               {"DTRACE_REPLAY_STEP", "0"},
                               {"DTRACE_LEVEL", "kernel"},
                               {"DTRACE_CAPTURE", dir / "cap"}});
  auto recorder = Recorder::open(options_for(dir / "run"), request);
  recorder->begin_step(0);
  auto fwd = recorder->scope("fwd");
  dtrace::TensorView device{nullptr, 16, "f32", {4}, 1};
  CHECK_THROWS_WITH(recorder->tensor(Level::kernel, "gemm", RecordIo::out, "y", device),
                    Catch::Contains("DTRACE_CAPTURE needs the tensor's bytes"));
  recorder->end_step();
}

TEST_CASE("errors say what kind they are: order, argument, environment, io") {
  TempDir dir;
  auto kind_of = [](auto&& body) {
    try {
      body();
    } catch (const RecorderError& error) {
      return error.kind();
    }
    FAIL("no RecorderError");
    return RecorderError::Kind::io;
  };
  auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
  const std::vector<float> x{1, 2, 3, 4};
  CHECK(kind_of([&] { recorder->end_step(); }) == RecorderError::Kind::order);
  recorder->begin_step(0);
  CHECK(kind_of([&] { recorder->tensor(Level::step, "op", RecordIo::in, "x", view(x, {3})); }) ==
        RecorderError::Kind::argument);
  CHECK(kind_of([] { request_from({{"DTRACE_LEVEL", "fine"}}); }) ==
        RecorderError::Kind::environment);
  CHECK(kind_of([&] { Recorder::open(options_for(dir / "run"), ReplayRequest{}); }) ==
        RecorderError::Kind::io);
}

TEST_CASE("a tensor of an unknown dtype is refused, whatever the level wants") {
  TempDir dir;
  auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
  const std::vector<float> x{1, 2, 3, 4};
  recorder->begin_step(0);
  auto bad = view(x, {4});
  bad.dtype = "float32";
  CHECK_THROWS_WITH(recorder->tensor(Level::kernel, "op", RecordIo::in, "x", bad),
                    Catch::Contains("unknown dtype 'float32'"));
  auto complex = view(x, {1});
  complex.dtype = "c128";
  recorder->tensor(Level::step, "op", RecordIo::in, "z", complex);
  recorder->end_step();
}

TEST_CASE("fast-forwarded steps record nothing, or their step level when asked, and wants() says so") {
  TempDir dir;
  SECTION("DTRACE_REPLAY_STEP fast-forwards the steps before it") {
    auto recorder = Recorder::open(
        options_for(dir / "run"),
        request_from({{"DTRACE_REPLAY_STEP", "2"}, {"DTRACE_OUT", dir / "out.jsonl"}}));
    const std::vector<float> x{1, 2, 3, 4};
    for (std::int64_t step = 0; step <= 2; ++step) {
      recorder->begin_step(step);
      CHECK(recorder->wants(Level::step) == (step == 2));
      recorder->tensor(Level::step, "param", RecordIo::state, "w", view(x, {4}));
      recorder->end_step();
    }
    recorder.reset();
    auto run = read_run(dir / "out.jsonl");
    REQUIRE(run.steps.size() == 1);
    CHECK(run.steps[0].step == 2);
  }
  SECTION("DTRACE_FAST_FORWARD=step records the fast-forwarded steps at step level, captures nothing of them") {
    auto recorder = Recorder::open(options_for(dir / "run"),
                                   request_from({{"DTRACE_REPLAY_STEP", "2"},
                                                 {"DTRACE_FAST_FORWARD", "step"},
                                                 {"DTRACE_LEVEL", "layer"},
                                                 {"DTRACE_CAPTURE", dir / "capture"},
                                                 {"DTRACE_OUT", dir / "out.jsonl"}}));
    const std::vector<float> x{1, 2, 3, 4};
    for (std::int64_t step = 0; step <= 2; ++step) {
      recorder->begin_step(step);
      CHECK(recorder->wants(Level::step));
      CHECK(recorder->wants(Level::layer) == (step == 2));
      CHECK(recorder->captures() == (step == 2));
      recorder->tensor(Level::step, "param", RecordIo::state, "w", view(x, {4}));
      recorder->tensor(Level::layer, "gemm", RecordIo::out, "y", view(x, {4}));
      recorder->end_step();
    }
    recorder.reset();
    auto run = read_run(dir / "out.jsonl");
    REQUIRE(run.steps.size() == 3);
    for (std::int64_t step = 0; step <= 2; ++step) {
      CHECK(run.steps[step].step == step);
      CHECK(run.steps[step].status == StepStatus::complete);
      CHECK(run.steps[step].records.size() == (step == 2 ? 2u : 1u));
    }
    // The capture index holds the replayed step alone.
    auto capture = read_run(dir / "capture");
    REQUIRE(capture.steps.size() == 1);
    CHECK(capture.steps[0].step == 2);
  }
  SECTION("fast_forward(N) in a training run") {
    auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
    recorder->fast_forward(1);
    for (std::int64_t step = 0; step < 3; ++step) record_step(*recorder, step, {1, 2, 3, 4});
    recorder.reset();
    auto run = read_run(dir / "run");
    REQUIRE(run.steps.size() == 2);
    CHECK(run.steps[0].step == 1);
    CHECK(run.steps[0].status == StepStatus::complete);
  }
}

TEST_CASE("dtrace::Scope nests with a recorder and does nothing without one") {
  TempDir dir;
  auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
  {
    dtrace::Scope fwd(recorder.get(), "fwd");
    dtrace::Scope layer(recorder.get(), "layer.0");
    CHECK(recorder->current_scope() == "fwd/layer.0");
    dtrace::Scope none(nullptr, "ignored");
  }
  CHECK(recorder->current_scope().empty());
}

namespace {

// dtrace-fp(5), "Chained step digest", written from the man page alone: the
// log's lines read as plain JSON, the bytes assembled here, hashed by libxxhash.
void put_u64le(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

void put_field(std::string& out, const std::string& text) {
  put_u64le(out, text.size());
  out += text;
}

std::string hex16(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Every end record's chain, recomputed from the file's lines (one rank per file).
std::vector<std::pair<std::string, std::string>> logged_and_recomputed(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);  // the header
  std::vector<nlohmann::json> records;
  std::uint64_t previous = 0;
  std::vector<std::pair<std::string, std::string>> out;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("end")) {
      records.push_back(j);
      continue;
    }
    std::sort(records.begin(), records.end(),
              [](const auto& a, const auto& b) { return a["seq"] < b["seq"]; });
    std::string bytes;
    put_u64le(bytes, previous);
    put_u64le(bytes, j["step"].get<std::uint64_t>());
    for (const auto& r : records) {
      const std::string io = r["io"];
      if (io != "in" && io != "out" && io != "state" && io != "metric") continue;
      for (const char* key : {"scope", "op", "io", "name", "dtype"}) put_field(bytes, r[key]);
      const bool scalar = r.contains("bits");
      put_field(bytes, scalar ? "bits" : "hash");
      put_field(bytes, r[scalar ? "bits" : "hash"]);
      std::string shape;
      if (r.contains("shape")) {
        shape = "[";
        for (std::size_t i = 0; i < r["shape"].size(); ++i) {
          if (i != 0) shape += ",";
          shape += std::to_string(r["shape"][i].get<std::int64_t>());
        }
        shape += "]";
      }
      put_field(bytes, shape);
    }
    const std::uint64_t chain = XXH3_64bits(bytes.data(), bytes.size());
    out.emplace_back(j.value("chain", std::string("(absent)")), hex16(chain));
    previous = chain;
    records.clear();
  }
  return out;
}

}  // namespace

TEST_CASE("every end record carries the chained step digest dtrace-fp(5) specifies") {
  TempDir dir;
  auto options = options_for(dir / "run");
  options.level = Level::kernel;
  const std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> zero_d{5.0f};
  {
    auto recorder = Recorder::open(options, ReplayRequest{});
    for (std::int64_t step : {0, 1, 3}) {
      recorder->begin_step(step);
      {
        auto fwd = recorder->scope("fwd/layer.0");
        recorder->tensor(Level::layer, "block", RecordIo::in, "x", view(x, {2, 2}));
        recorder->tensor(Level::kernel, "gemm", RecordIo::out, "y", view(zero_d, {}));
        recorder->tensor(Level::kernel, "gemm", RecordIo::out, "y", view(x, {4}));
      }
      auto at_step = recorder->scope("step");
      recorder->scalar(Level::step, "loss", RecordIo::metric, "loss", "bf16", 0x3f80 + step, 1.0);
      // Timing differs between runs and is not chained.
      recorder->scalar_f64(Level::step, "time", RecordIo::timing, "step_seconds", 0.1 * step);
      recorder->scalar_f64(Level::step, "rng", RecordIo::state, "seed", 42.0);
      recorder->end_step();
    }
  }
  const auto chains = logged_and_recomputed(dir / "run/rank0.jsonl");
  REQUIRE(chains.size() == 3);
  for (const auto& [logged, recomputed] : chains) CHECK(logged == recomputed);
  CHECK(chains[0].second != chains[1].second);

  // The reader hands the chain over with the step.
  auto run = read_run(dir / "run");
  REQUIRE(run.step(0, 3).chain.has_value());
  CHECK(hex16(*run.step(0, 3).chain) == chains[2].first);
}

TEST_CASE("the chain ignores timing records: runs differing only in step time chain alike") {
  TempDir dir;
  for (const char* name : {"a", "b"}) {
    auto options = options_for(dir / name);
    auto recorder = Recorder::open(options, ReplayRequest{});
    for (std::int64_t step = 0; step < 3; ++step) {
      recorder->begin_step(step);
      auto at_step = recorder->scope("step");
      recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 2.0f);
      recorder->scalar_f64(Level::step, "time", RecordIo::timing, "step_seconds",
                           name[0] == 'a' ? 0.5 : 0.75);
      recorder->end_step();
    }
  }
  auto a = read_run(dir / "a");
  auto b = read_run(dir / "b");
  CHECK(a.step(0, 2).chain == b.step(0, 2).chain);
  CHECK(a.step(0, 2).chain != a.step(0, 1).chain);
}
