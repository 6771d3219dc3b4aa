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
