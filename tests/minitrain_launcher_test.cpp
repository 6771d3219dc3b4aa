// The launcher's parts that need no GPU: the bootstrap file through which the
// processes of a multi-GPU job share NCCL's unique id, and the variables that
// make a process one rank of the job.
#include <array>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "minitrain/checkpoint.hpp"
#include "minitrain/launcher.hpp"
#include "support.hpp"

namespace mt = minitrain;
using dtrace::test::TempDir;

TEST_CASE("rank 0 publishes the unique id whole; another rank reads the same bytes",
          "[minitrain][launcher]") {
  TempDir dir;
  std::array<char, 128> id{}, got{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 7 + 1);
  // The waiting rank starts first, as it may.
  std::thread waiter([&] { mt::await_unique_id(dir.root(), got.data(), got.size(), 1, 5000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  mt::publish_unique_id(dir.root(), id.data(), id.size());
  waiter.join();
  CHECK(got == id);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::path(dir.path()) / "nccl-id.tmp"));
}

TEST_CASE("a rank that gets no unique id gives up, naming itself and the file",
          "[minitrain][launcher]") {
  TempDir dir;
  std::array<char, 128> got{};
  // A short file (a writer that never renamed would leave none; a torn one) is not an id.
  std::ofstream(std::filesystem::path(dir.path()) / "nccl-id") << "short";
  CHECK_THROWS_WITH(mt::await_unique_id(dir.root(), got.data(), got.size(), 3, 50),
                    Catch::Contains("rank 3: no NCCL unique id") && Catch::Contains("nccl-id"));
}

TEST_CASE("MINITRAIN_RANK and MINITRAIN_BOOTSTRAP make a process one rank of the job",
          "[minitrain][launcher]") {
  mt::Config config;
  config.ranks = 4;
  ::unsetenv("MINITRAIN_RANK");
  ::unsetenv("MINITRAIN_BOOTSTRAP");
  mt::apply_process_environment(config);
  CHECK(config.process_rank == -1);

  ::setenv("MINITRAIN_RANK", "2", 1);
  CHECK_THROWS_WITH(mt::apply_process_environment(config),
                    Catch::Contains("without MINITRAIN_BOOTSTRAP"));
  ::setenv("MINITRAIN_BOOTSTRAP", "/tmp/boot", 1);
  mt::apply_process_environment(config);
  CHECK(config.process_rank == 2);
  CHECK(config.bootstrap_dir == "/tmp/boot");

  for (const char* bad : {"4", "-1", "two", "1x"}) {
    ::setenv("MINITRAIN_RANK", bad, 1);
    mt::Config fresh;
    fresh.ranks = 4;
    CHECK_THROWS_WITH(mt::apply_process_environment(fresh), Catch::Contains("not a rank"));
  }
  ::unsetenv("MINITRAIN_RANK");
  ::unsetenv("MINITRAIN_BOOTSTRAP");
}

namespace {

void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}
std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

namespace {

// A stand-in for minitrain in a launched process: writes its rank's replay log
// where dtrace-replay/1.1 puts it, says hello on stderr, and exits with the
// status the test gives rank `FAIL_RANK` (others 0, or 3 for the ranks listed
// in NOTHING).
std::string fake_rank(const std::filesystem::path& dir) {
  const auto script = dir / "rank.sh";
  write(script,
        "#!/bin/sh\n"
        "printf '{\"dtrace\":\"fp/1\"}\\n{\"rank\":%s}\\n' \"$MINITRAIN_RANK\" "
        ">\"$DTRACE_OUT_DIR/rank$MINITRAIN_RANK.jsonl\"\n"
        "echo \"hello from rank $MINITRAIN_RANK\" >&2\n"
        "case \" $NOTHING \" in *\" $MINITRAIN_RANK \"*) exit 3 ;; esac\n"
        "[ \"$MINITRAIN_RANK\" = \"$FAIL_RANK\" ] && exit 1\n"
        "exit 0\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  return script.string();
}

int launch(const std::string& script, const dtrace::ReplayRequest& request) {
  mt::Config config;
  config.ranks = 3;
  config.backend = "cuda";
  std::string arg0 = script;
  char* argv[] = {arg0.data(), nullptr};
  return mt::launch_processes(config, script, argv, request);
}

}  // namespace

TEST_CASE("the launcher runs one process per rank; each answers a replay for its rank",
          "[minitrain][launcher]") {
  TempDir dir;
  const std::string script = fake_rank(dir.path());
  dtrace::ReplayRequest request;
  request.out_dir = dir.path().string();
  request.out = (dir.path() / "replay.jsonl").string();
  request.isolate = "fwd/layer.0/mlp::gemm_fc1";
  ::unsetenv("FAIL_RANK");
  ::setenv("DTRACE_OUT_DIR", request.out_dir->c_str(), 1);

  SECTION("some ranks ran the isolated op: one log per rank, each rank's stderr beside it") {
    ::setenv("NOTHING", "1", 1);
    CHECK(launch(script, request) == 0);
    for (int r = 0; r < 3; ++r) {
      const std::string rank = std::to_string(r);
      CHECK(read(dir.path() / ("rank" + rank + ".jsonl")) ==
            "{\"dtrace\":\"fp/1\"}\n{\"rank\":" + rank + "}\n");
      CHECK(read(dir.path() / ("rank" + rank + ".stderr")) == "hello from rank " + rank + "\n");
    }
    CHECK_FALSE(std::filesystem::exists(*request.out));  // nothing merged
  }
  SECTION("no rank ran it: trouble, as one process would say") {
    ::setenv("NOTHING", "0 1 2", 1);
    CHECK_THROWS_WITH(launch(script, request), Catch::Contains("no rank ran it"));
  }
  SECTION("a rank failed: exit 2") {
    ::setenv("NOTHING", "", 1);
    ::setenv("FAIL_RANK", "2", 1);
    CHECK(launch(script, request) == 2);
  }
  SECTION("a replay of the 1.0 protocol (DTRACE_OUT alone) is refused: it would need merging") {
    request.out_dir.reset();
    CHECK_THROWS_WITH(launch(script, request), Catch::Contains("without DTRACE_OUT_DIR"));
  }
  ::unsetenv("NOTHING");
  ::unsetenv("FAIL_RANK");
  ::unsetenv("DTRACE_OUT_DIR");
}
