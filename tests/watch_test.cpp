// `dtrace watch` (src/watch/watch.cpp) on runs whose writing the test
// interleaves with watch's own reads exactly, so what is asserted never
// depends on how fast either side runs.
#include "watch/watch.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "support.hpp"

using dtrace::test::TempDir;
using dtrace::test::write_text;
namespace watch = dtrace::watch;

namespace {

std::string header(const std::string& run) {
  return R"({"dtrace":"fp/1","run":")" + run + R"(","world_size":1,"rank":0,"hash":"xxh3-64k/1","level":"layer"})" "\n";
}

std::string step_lines(int step) {
  const std::string s = std::to_string(step);
  return R"({"step":)" + s + R"(,"rank":0,"seq":0,"scope":"fwd/layer.0","op":"gemm","io":"out","name":"y",)"
         R"("dtype":"bf16","shape":[2,2],"hash":"00000000000000)" + (step < 10 ? "0" + s : s) + "\"}\n" +
         R"({"step":)" + s + R"(,"rank":0,"end":true,"count":1})" "\n";
}

void append_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
}

}  // namespace

TEST_CASE("a rank's last lines written just before its end marker are compared, not cut off", "[watch]") {
  // dtrace-fp(5), The end of a run: a rank writes its lines, then its end
  // marker; a poll may read the files just before the lines land and find the
  // marker just after. The run has ended only at a later poll that finds
  // nothing new with the marker there, so the last step is read. Here rank
  // 0's status is a FIFO: watch's look at it waits until the test has, at
  // that very moment, written step 2's lines and then "exit 0".
  TempDir dir;
  const std::string ref = dir.path("ref/rank0.jsonl");
  write_text(ref, header("ref") + step_lines(0) + step_lines(1) + step_lines(2));
  write_text(dir.path("ref/rank0.status"), "exit 0\n");
  const std::string run = dir.path("run/rank0.jsonl");
  write_text(run, header("run") + step_lines(0) + step_lines(1));
  const std::string status = dir / "run/rank0.status";
  REQUIRE(::mkfifo(status.c_str(), 0644) == 0);

  std::atomic<bool> done{false};
  std::thread job([&] {
    // A write racing watch's close of the FIFO fails with EPIPE, not a SIGPIPE
    // that would end the test process.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    bool last_step_written = false;
    while (!done) {
      // Opens only while watch is opening the status to read it.
      const int fd = ::open(status.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) {
        ::usleep(1000);
        continue;
      }
      if (!last_step_written) append_text(run, step_lines(2));
      last_step_written = true;
      (void)!::write(fd, "exit 0\n", 7);
      ::close(fd);
    }
  });

  watch::Options options;
  options.run = dir / "run";
  options.against = dir / "ref";
  options.use_inotify = false;
  options.poll_seconds = 0.01;
  options.idle_seconds = 30;  // a backstop: ending by it fails the test below
  auto w = watch::Watch::open(options);
  REQUIRE(w.ok());
  std::optional<watch::Event> last;
  for (;;) {
    auto e = (*w)->next();
    if (!e.ok()) {
      FAIL_CHECK(e.error().message);
      break;
    }
    if (e->kind == watch::EventKind::ended || e->kind == watch::EventKind::diverged) {
      last = std::move(*e);
      break;
    }
  }
  done = true;
  job.join();
  REQUIRE(last);
  CHECK(last->kind == watch::EventKind::ended);
  CHECK(last->end_reason.find("end marker") != std::string::npos);
  REQUIRE(last->diff);
  CHECK_FALSE(last->diff->diverged());
  CHECK(last->diff->compared.first_step == 0);
  CHECK(last->diff->compared.last_step == 2);
}
