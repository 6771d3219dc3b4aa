#include "replay/runner.hpp"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <tuple>

#include "replay/processes.hpp"
#include "support.hpp"

using dtrace::replay::Command;
using dtrace::replay::run;
using dtrace::replay::split_words;

TEST_CASE("runner reports the exit status and the tail of stderr") {
  auto outcome = run(Command{{"/bin/sh", "-c", "echo oops >&2; exit 3"}, {}, "", 10, ""});
  REQUIRE(outcome.ok());
  CHECK(outcome->exit_code == 3);
  CHECK_FALSE(outcome->ok());
  CHECK(outcome->stderr_tail == "oops\n");
  CHECK(outcome->describe() == "exit 3");
}

TEST_CASE("runner passes extra variables and runs in the given directory") {
  auto outcome = run(Command{{"/bin/sh", "-c", "test \"$DTRACE_OUT\" = /x && test \"$(pwd)\" = /tmp"},
                             {{"DTRACE_OUT", "/x"}}, "/tmp", 10, ""});
  REQUIRE(outcome.ok());
  CHECK(outcome->ok());
}

TEST_CASE("runner kills a command that outlives its timeout, with its children") {
  auto outcome = run(Command{{"/bin/sh", "-c", "sleep 30 & sleep 30"}, {}, "", 0.3, ""});
  REQUIRE(outcome.ok());
  CHECK(outcome->timed_out);
  CHECK(outcome->seconds < 5);
}

namespace {

// Whether the process whose pid is in FILE still runs (a zombie, killed and
// waiting for its parent to reap it, does not).
bool still_runs(const std::string& file) {
  pid_t pid = 0;
  std::ifstream(file) >> pid;
  REQUIRE(pid > 0);
  for (int i = 0; i < 100; ++i) {  // SIGKILL is delivered asynchronously
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string skip, state;
    if (!(stat >> skip >> skip >> state) || state == "Z") return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

TEST_CASE("runner leaves no process of the workload running, in its group or escaped from it") {
  dtrace::test::TempDir dir;
  const std::string script = "sleep 1000 & echo $! >" + dir / "child" +
                             "; setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >" +
                             dir / "escaped" + "; sleep 0.2";
  SECTION("the workload exits") {
    auto outcome = run(Command{{"/bin/sh", "-c", script + "; exit 0"}, {}, "", 10, ""});
    REQUIRE(outcome.ok());
    CHECK(outcome->ok());
  }
  SECTION("the workload times out") {
    // Room for the script to start both processes and write their pids on a
    // busy machine before the timeout (1 s did not always do).
    auto outcome = run(Command{{"/bin/sh", "-c", script + "; sleep 1000"}, {}, "", 5, ""});
    REQUIRE(outcome.ok());
    CHECK(outcome->timed_out);
  }
  CHECK_FALSE(still_runs(dir / "child"));
  CHECK_FALSE(still_runs(dir / "escaped"));
}

TEST_CASE("runner kills a process that left the replay by setsid and an empty environment, not ours from before") {
  dtrace::test::TempDir dir;
  // Children of ours from before the replay: one running, one ended and not
  // yet waited for. Neither is the replay's to kill or to reap.
  const pid_t running = ::fork();
  REQUIRE(running >= 0);
  if (running == 0) {
    ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const pid_t ended = ::fork();
  REQUIRE(ended >= 0);
  if (ended == 0) ::_exit(7);
  // A new session, then execve with an empty environment: nothing of the
  // replay's group or of its DTRACE_REPLAY_TAG is left on it. The workload
  // ends only once the process has written its pid (no race with its start).
  const std::string pid_file = dir / "bare";
  const std::string script = "setsid /bin/sh -c 'echo $$ >" + pid_file + ".new; mv " + pid_file + ".new " +
                             pid_file + "; exec env -i /bin/sleep 1000' </dev/null >/dev/null 2>&1 & " +
                             "while ! test -s " + pid_file + "; do sleep 0.01; done";
  auto outcome = run(Command{{"/bin/sh", "-c", script}, {}, "", 60, ""});
  REQUIRE(outcome.ok());
  CHECK(outcome->ok());
  CHECK_FALSE(still_runs(pid_file));
  // Reaped by the runner, not left a zombie of ours (we are its subreaper).
  pid_t bare = 0;
  std::ifstream(pid_file) >> bare;
  errno = 0;
  CHECK(::waitpid(bare, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  // Ours are still there: the running one runs, the ended one is still ours to wait for.
  std::ifstream stat("/proc/" + std::to_string(running) + "/stat");
  std::string skip, state;
  CHECK((stat >> skip >> skip >> state));
  CHECK(state != "Z");
  ::kill(running, SIGKILL);
  int status = 0;
  CHECK(::waitpid(running, &status, 0) == running);
  CHECK(::waitpid(ended, &status, 0) == ended);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 7));
}

namespace {

// Makes pidfd_open(2) and pidfd_send_signal(2) fail with ERROR in this
// process and what it starts: ENOSYS as on a kernel before Linux 5.3, EMFILE as
// when the process has used up its descriptors.
bool without_pidfds(int error) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_send_signal, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | static_cast<unsigned>(error)),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// BODY's answer (0 for all is well, else which check failed), in a process of
// its own where pidfds fail with ERROR when PIDFDS is false (the filter cannot
// be undone).
int in_child(bool pidfds, const std::function<int()>& body, int error = ENOSYS) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (!pidfds && !without_pidfds(error)) ::_exit(100);
    if (!pidfds && ::syscall(SYS_pidfd_open, ::getpid(), 0) != -1) ::_exit(101);
    ::_exit(body());
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("runner names the rank that wrote its failure before the launcher killed another, with or without pidfds") {
  const bool pidfds = GENERATE(true, false);
  CAPTURE(pidfds);
  dtrace::test::TempDir dir;
  const std::string d = dir / "";
  // Rank 0 runs; dtrace is stopped while rank 1 writes "exit 3" (an older
  // recorder's line, without its time) and the launcher then kills rank 0, as
  // torchrun does: when dtrace looks again both have failed, and rank 0's file
  // is the older of the two (the order by mtime named rank 0).
  const std::string launcher = "sleep 1000 & r0=$!; echo \"running $r0\" >" + d + "rank0.status.new; mv " + d +
                               "rank0.status.new " + d + "rank0.status; kill -STOP $PPID; echo 'exit 3' >" + d +
                               "rank1.status.new; mv " + d + "rank1.status.new " + d +
                               "rank1.status; echo rank 1 fails >" + d + "rank1.stderr; kill -9 $r0; wait $r0; " +
                               "kill -CONT $PPID; exec sleep 1000";
  const int answer = in_child(pidfds, [&] {
    auto outcome = run(Command{{"/bin/sh", "-c", launcher}, {}, "", 60, d});
    if (!outcome.ok()) return 1;
    if (outcome->faults.size() != 2) return 2;
    const auto& first = outcome->faults.front();
    if (first.rank != 1 || first.kind != dtrace::replay::RankFault::Kind::exited || first.code != 3) return 3;
    if (outcome->faults.back().rank != 0) return 4;
    if (outcome->relevant_stderr() != "rank 1 fails\n") return 5;
    return 0;
  });
  CHECK(answer == 0);
}

TEST_CASE("runner says whose stderr the command's is: the rank's own when the command is the rank's process") {
  dtrace::test::TempDir dir;
  const std::string d = dir / "";
  // One process that is rank 0 itself (its status names its own pid), as a
  // Python or C workload without a launcher is: the command's stderr is the
  // rank's, not a launcher's.
  const std::string alone = "echo \"running $$\" >" + d + "rank0.status; echo boom >&2; exit 3";
  auto outcome = run(Command{{"/bin/sh", "-c", alone}, {}, "", 60, d});
  REQUIRE(outcome.ok());
  REQUIRE(outcome->faults.size() == 1);
  CHECK(outcome->faults.front().pid == outcome->pid);
  CHECK(outcome->command_stderr_label() == "rank 0's stderr (the replay command's own)");
  // A rank that fails before dtrace reads its "running" line: its exit line
  // names its process (the C++ recorder's "exit CODE TIME PID").
  dtrace::test::TempDir quick;
  const std::string q = quick / "";
  const std::string fails_at_once = "echo \"exit 3 $(date +%s%N) $$\" >" + q + "rank0.status; echo boom >&2; exit 3";
  auto at_once = run(Command{{"/bin/sh", "-c", fails_at_once}, {}, "", 60, q});
  REQUIRE(at_once.ok());
  REQUIRE(at_once->faults.size() == 1);
  CHECK(at_once->command_stderr_label() == "rank 0's stderr (the replay command's own)");
  // A launcher that starts the rank as another process: the command's stderr is the launcher's.
  dtrace::test::TempDir dir2;
  const std::string d2 = dir2 / "";
  const std::string launcher = "sh -c 'echo \"running $$\" >" + d2 + "rank0.status; exit 3'; exit 3";
  auto launched = run(Command{{"/bin/sh", "-c", launcher}, {}, "", 60, d2});
  REQUIRE(launched.ok());
  REQUIRE(launched->faults.size() == 1);
  CHECK(launched->faults.front().pid != launched->pid);
  CHECK(launched->command_stderr_label() == "the launcher's stderr");
}

TEST_CASE("runner orders a written exit by the file's mtime when its TIME is not nanoseconds of the clock") {
  dtrace::test::TempDir dir;
  const std::string d = dir / "";
  // Rank 0 writes "exit 1 TIME" (TIME half a second back), then rank 1
  // "exit 3 TIME" with TIME in seconds, as a recorder that got the unit wrong
  // would (or a line read torn): taken as nanoseconds it put rank 1 first.
  const std::string launcher = "kill -STOP $PPID; t=$(date +%s%N); echo \"exit 1 $((t - 500000000))\" >" + d +
                               "rank0.status.new; mv " + d + "rank0.status.new " + d + "rank0.status; " +
                               "echo \"exit 3 $(date +%s)\" >" + d + "rank1.status.new; mv " + d +
                               "rank1.status.new " + d + "rank1.status; kill -CONT $PPID; exec sleep 1000";
  const int answer = in_child(true, [&] {
    auto outcome = run(Command{{"/bin/sh", "-c", launcher}, {}, "", 60, d});
    if (!outcome.ok()) return 1;
    if (outcome->faults.size() != 2) return 2;
    if (outcome->faults.front().rank != 0 || outcome->faults.front().code != 1) return 3;
    return 0;
  });
  CHECK(answer == 0);
}

TEST_CASE("runner reads the ranks' exits with more ranks than it has descriptors") {
  dtrace::test::TempDir dir;
  const std::string d = dir / "ranks";
  // 80 ranks, each a sleep, appear at once (their directory renamed into
  // place) to a dtrace limited to 64 descriptors; once it has looked (it holds
  // 16 pidfds), rank 79 writes "exit 3" and the launcher exits 0. A pidfd on
  // every rank took all the descriptors: the exit went unread (the replay
  // passed) and the /proc walk at its end failed (the sleeps ran on).
  const std::string launcher =
      "mkdir " + d + ".new; i=0; while [ $i -lt 80 ]; do sleep 1000 & echo \"running $!\" >" + d +
      ".new/rank$i.status; i=$((i + 1)); done; mv " + d + ".new " + d + "; " +
      "while [ \"$(grep -l '^Pid:' /proc/$PPID/fdinfo/* 2>/dev/null | wc -l)\" -lt 16 ]; do sleep 0.01; done; " +
      "echo \"exit 3 $(date +%s%N)\" >" + d + "/rank79.new; mv " + d + "/rank79.new " + d + "/rank79.status";
  const int answer = in_child(true, [&] {
    // The descriptors this test process had open (the earlier test cases')
    // are not the runner's to count on.
    for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    const rlimit limit{64, 64};
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return 10;
    auto outcome = run(Command{{"/bin/sh", "-c", launcher}, {}, "", 60, d});
    if (!outcome.ok()) return 1;
    if (outcome->faults.empty()) return 2;
    if (outcome->faults.front().rank != 79 || outcome->faults.front().code != 3) return 3;
    std::ifstream first(d + "/rank0.status");
    std::string word;
    pid_t sleeper = 0;
    if (!(first >> word >> sleeper) || sleeper <= 0) return 4;
    if (::kill(sleeper, 0) == 0) return 5;
    return 0;
  });
  CHECK(answer == 0);
}

TEST_CASE("runner kills a process that left the replay without pidfds too (kill(2))") {
  const int error = GENERATE(ENOSYS, EMFILE);
  CAPTURE(error);
  dtrace::test::TempDir dir;
  const std::string pid_file = dir / "bare";
  const std::string script = "setsid /bin/sh -c 'echo $$ >" + pid_file + ".new; mv " + pid_file + ".new " +
                             pid_file + "; exec env -i /bin/sleep 1000' </dev/null >/dev/null 2>&1 & " +
                             "while ! test -s " + pid_file + "; do sleep 0.01; done";
  const int answer = in_child(false, [&] {
    auto outcome = run(Command{{"/bin/sh", "-c", script}, {}, "", 60, ""});
    if (!outcome.ok() || !outcome->ok()) return 1;
    pid_t bare = 0;
    std::ifstream(pid_file) >> bare;
    if (bare <= 0) return 2;
    if (::kill(bare, 0) == 0) return 3;  // still there, running or a zombie
    return 0;
  }, error);
  CHECK(answer == 0);
}

TEST_CASE("runner stops the workload when dtrace is asked to stop, and says so") {
  dtrace::test::TempDir dir;
  const std::string started = dir / "started";
  const int signal = GENERATE(SIGINT, SIGTERM, SIGHUP);
  // dtrace leaves a signal ignored at its start ignored (nohup): the test
  // needs it caught, whatever started the test.
  struct sigaction inherited {};
  ::sigaction(signal, nullptr, &inherited);
  if (inherited.sa_handler == SIG_IGN) ::signal(signal, SIG_DFL);
  struct sigaction before {};
  ::sigaction(signal, nullptr, &before);
  std::thread sender([&] {
    while (!std::filesystem::exists(started))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::kill(::getpid(), signal);
  });
  const auto start = std::chrono::steady_clock::now();
  auto outcome = run(Command{
      {"/bin/sh", "-c", "sleep 1000 & echo $! >" + dir / "child" + "; touch " + started + "; wait"},
      {},
      "",
      60, ""});
  sender.join();
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(outcome.error().message,
             Catch::StartsWith("interrupted by signal " + std::to_string(signal)) &&
                 Catch::Contains("killed"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  CHECK_FALSE(still_runs(dir / "child"));
  // Outside a replay the signal's own action is back.
  struct sigaction after {};
  ::sigaction(signal, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);
  ::sigaction(signal, &inherited, nullptr);
}

TEST_CASE("runner names the signal that ended a crash") {
  auto outcome = run(Command{{"/bin/sh", "-c", "kill -SEGV $$"}, {}, "", 10, ""});
  REQUIRE(outcome.ok());
  CHECK(outcome->signal == 11);
  CHECK(outcome->describe().find("signal 11") != std::string::npos);
}

TEST_CASE("runner reports a program that cannot be started") {
  auto outcome = run(Command{{"/nonexistent/minitrain"}, {}, "", 10, ""});
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.error().message.find("/nonexistent/minitrain") != std::string::npos);
}

TEST_CASE("split_words splits like a shell without expanding") {
  auto words = split_words("minitrain --out 'a b' \"c \\\"d\\\"\" e\\ f $HOME");
  REQUIRE(words.ok());
  CHECK(*words == std::vector<std::string>{"minitrain", "--out", "a b", "c \"d\"", "e f", "$HOME"});
  CHECK_FALSE(split_words("x 'unterminated").ok());
  CHECK_FALSE(split_words("   ").ok());
}

TEST_CASE("runner reads how an unreaped rank ended from its zombie: a signal or an exit code it did not write") {
  // Rank 0 writes its status as the recorder does (a file renamed into
  // place), then ends without writing how: killed by a signal, or by exit(3)
  // in a program that writes no status at its end. The launcher never reaps
  // it (it becomes sleep at once, which never waits), so how the rank ended
  // is known only from its zombie's /proc/PID/stat (describe_process's field
  // 52); losing it turns both into "ended without writing".
  const auto [end, kind, code] =
      GENERATE(std::make_tuple(std::string("kill -9 $$"), dtrace::replay::RankFault::Kind::signaled, 9),
               std::make_tuple(std::string("exit 3"), dtrace::replay::RankFault::Kind::exited, 3));
  CAPTURE(end);
  dtrace::test::TempDir dir;
  const std::string d = dir / "";
  const std::string rank = "echo \"running $$\" >" + d + "rank0.status.new; mv " + d + "rank0.status.new " + d +
                           "rank0.status; sleep 0.2; " + end;
  const std::string launcher = "/bin/sh -c '" + rank + "' & exec sleep 1000";
  auto outcome = run(Command{{"/bin/sh", "-c", launcher}, {}, "", 60, d});
  REQUIRE(outcome.ok());
  REQUIRE(outcome->faults.size() == 1);
  CHECK(outcome->faults.front().rank == 0);
  CHECK(outcome->faults.front().kind == kind);
  CHECK(outcome->faults.front().code == code);
}

TEST_CASE("describe_process reads a zombie's wait status, and kill_exactly signals no process whose start differs") {
  using dtrace::replay::describe_process;
  using dtrace::replay::kill_exactly;
  const pid_t ended = ::fork();
  if (ended == 0) ::_exit(7);
  // A zombie until waited for.
  std::optional<dtrace::replay::Process> zombie;
  for (int i = 0; i < 2000 && !(zombie && zombie->state == 'Z'); ++i) {
    zombie = describe_process(ended);
    if (!zombie || zombie->state != 'Z') ::usleep(1000);
  }
  REQUIRE(zombie);
  CHECK(zombie->state == 'Z');
  CHECK(zombie->parent == ::getpid());
  REQUIRE(zombie->wait_status);
  CHECK(WIFEXITED(*zombie->wait_status));
  CHECK(WEXITSTATUS(*zombie->wait_status) == 7);
  ::waitpid(ended, nullptr, 0);
  CHECK_FALSE(describe_process(ended));

  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  auto process = describe_process(child);
  REQUIRE(process);
  // The same pid, another start time: the process a walk saw has ended and
  // its pid names another one now. It must not be signalled.
  dtrace::replay::Process other = *process;
  other.start += 1;
  CHECK_FALSE(kill_exactly(other));
  ::usleep(50'000);
  int status = 0;
  CHECK(::waitpid(child, &status, WNOHANG) == 0);  // still running
  CHECK(kill_exactly(*process));
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

// ---- Replay sessions (dtrace-replay/1.2) ----

namespace {

using dtrace::replay::SessionLaunch;

// A rank serving a session as man/dtrace-fp.5 says, one process per rank
// (argv[1] its rank), with faults on request: FAIL_AT=K (rank 1 writes
// "exit 3" in request K's directory and exits 3), DIE_AFTER=K (rank 1 kills
// itself after answering request K), HANG_AT=K (rank 1 never answers request
// K), QUIT_AT=K (both ranks exit 0 at request K, answering nothing);
// END=exit|segv with END_IN=K or END_AFTER=K: rank 0 ends by _exit(5) or
// SIGSEGV, writing nothing, once it has read request K (its "running" status
// written) or once it has answered it; AHEAD=DIR: before answering request 0,
// rank 0 writes its answer to the next request, "done", in DIR, and rank 1
// there "running" when AHEAD_RUNNING=1, then both serve nothing more (so that
// which rank answered request 1 before its timeout is known, whatever the
// load); DECLINE_AT=K: the ranks in DECLINE_RANKS (default "0,1") decline
// request K ("declined PID REASON", REASON from DECLINE_REASON, else one
// naming the rank), the others answer it. Each answer is a file "answer"
// holding its pid and the request's DTRACE_LEVEL.
constexpr char kServer[] = R"(
import json, os, resource, sys, time, signal
rank, d = int(sys.argv[1]), os.environ["DTRACE_SESSION"]
at = lambda name: int(os.environ.get(name, "-1"))
def end():
    # Once dtrace watches this process (a pidfd on it), as it does a rank
    # that has run a while: how it ends is then dtrace's to know.
    mine, fdinfo = str(os.getpid()), f"/proc/{os.environ['DTRACE_PID']}/fdinfo"
    def watched():
        for f in os.listdir(fdinfo):
            try:
                if f"Pid:\t{mine}\n" in open(f"{fdinfo}/{f}").read(): return True
            except OSError: pass  # closed since the listing
        return False
    while not watched(): time.sleep(0.01)
    if os.environ["END"] == "exit": os._exit(5)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), signal.SIGSEGV)
k = 0
while True:
    f = f"{d}/request.{k}.json"
    while not os.path.exists(f): time.sleep(0.01)
    r = json.load(open(f))
    if r.get("end"): sys.exit(0)
    out = r["env"]["DTRACE_OUT_DIR"]
    status = lambda line: (open(f"{out}/rank{rank}.status.new", "w").write(line + "\n"), os.replace(f"{out}/rank{rank}.status.new", f"{out}/rank{rank}.status"))
    if k == at("QUIT_AT"): sys.exit(0)
    status(f"running {os.getpid()} 0 {k}")
    if k == at("DECLINE_AT") and str(rank) in os.environ.get("DECLINE_RANKS", "0,1").split(","):
        status(f"declined {os.getpid()} " + os.environ.get("DECLINE_REASON", f"rank {rank} wants its own process"))
        k += 1
        continue
    if rank == 0 and k == at("END_IN"): end()
    if rank == 1 and k == at("FAIL_AT"):
        sys.stderr.write(f"rank 1 cannot serve request {k}\n"); sys.stderr.flush(); status("exit 3"); sys.exit(3)
    if rank == 1 and k == at("HANG_AT"): time.sleep(1000)
    open(f"{out}/answer{rank}", "w").write(f"{os.getpid()} {r['env'].get('DTRACE_LEVEL', '')}")
    ahead = os.environ.get("AHEAD")
    if ahead:
        os.makedirs(ahead, exist_ok=True)
        line = f"done {os.getpid()}" if rank == 0 else f"running {os.getpid()} 0 1" if os.environ.get("AHEAD_RUNNING") == "1" else ""
        if line: open(f"{ahead}/rank{rank}.status", "w").write(line + "\n")
    status(f"done {os.getpid()} {time.time_ns()}")
    if ahead: time.sleep(1000)
    if rank == 1 and k == at("DIE_AFTER"): os.kill(os.getpid(), signal.SIGKILL)
    if rank == 0 and k == at("END_AFTER"): end()
    k += 1
)";

Command session_command(const std::vector<std::pair<std::string, std::string>>& env = {}) {
  const std::string server = kServer;
  return Command{{"/bin/sh", "-c", "python3 -c \"$SERVER\" 0 & python3 -c \"$SERVER\" 1 & wait"},
                 [&] {
                   auto e = env;
                   e.emplace_back("SERVER", server);
                   return e;
                 }(),
                 "", 60, ""};
}

// A job of one process, rank 0, with no launcher: the replay command is the rank.
Command one_process_session(const std::vector<std::pair<std::string, std::string>>& env = {}) {
  return Command{{"python3", "-c", kServer, "0"}, env, "", 60, ""};
}

// The state of process PID ('R', 'S', 'Z', ...), '-' when there is none.
char pid_state(const std::string& pid_text) {
  std::ifstream stat("/proc/" + pid_text + "/stat");
  std::string skip, state;
  return stat >> skip >> skip >> state ? state.front() : '-';
}

// Whether this kernel keeps a reaped process's exit status for a pidfd held
// on it (Linux 6.15): without it, how a rank that its launcher reaped at once
// ended is not known.
bool kernel_keeps_reaped_status() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(5);
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  ::waitpid(child, nullptr, 0);
  if (fd < 0) return false;
  const auto status = dtrace::replay::reaped_wait_status(fd);
  ::close(fd);
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 5;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text;
}

// Whether a process named PID (as text) is running now (not a zombie).
bool pid_runs(const std::string& pid_text) {
  std::ifstream stat("/proc/" + pid_text + "/stat");
  std::string skip, state;
  return static_cast<bool>(stat >> skip >> skip >> state) && state != "Z";
}

}  // namespace

TEST_CASE("a session serves its requests in one launch, each answered by every rank") {
  dtrace::test::TempDir dir;
  auto session = SessionLaunch::start(session_command(), dir / "session", 2);
  REQUIRE(session.ok());
  std::vector<std::string> pids;
  for (const char* level : {"layer", "kernel", "step"}) {
    const std::string out = dir.path(std::string("req-") + level + "/x");
    const std::string out_dir = std::filesystem::path(out).parent_path().string();
    auto outcome = (*session)->request({{"DTRACE_LEVEL", level}, {"DTRACE_OUT_DIR", out_dir}}, out_dir, 30);
    REQUIRE(outcome.ok());
    INFO(outcome->describe() << " " << outcome->stderr_tail);
    REQUIRE(outcome->ok());
    for (int rank : {0, 1}) {
      const std::string answer = read_text(out_dir + "/answer" + std::to_string(rank));
      CHECK(answer.substr(answer.find(' ') + 1) == level);  // the request's variables reached it
      pids.push_back(answer.substr(0, answer.find(' ')));
    }
  }
  CHECK((*session)->requests() == 3);
  // The same two processes served all three requests.
  CHECK(pids[0] != pids[1]);
  CHECK(pids[2] == pids[0]);
  CHECK(pids[4] == pids[0]);
  CHECK(pids[5] == pids[1]);
  CHECK(pid_runs(pids[0]));
  (*session)->end();
  CHECK_FALSE((*session)->serving());
  CHECK(std::filesystem::exists(dir / "session/request.3.json"));  // the end request
  CHECK_FALSE(pid_runs(pids[0]));
  CHECK_FALSE(pid_runs(pids[1]));
}

TEST_CASE("a request every rank declines is answered declined, and the session serves the next") {
  dtrace::test::TempDir dir;
  const bool one_reason = GENERATE(true, false);
  std::vector<std::pair<std::string, std::string>> env{{"DECLINE_AT", "1"}};
  if (one_reason) env.emplace_back("DECLINE_REASON", "step 7 runs once per process");
  auto session = SessionLaunch::start(session_command(env), dir / "session", 2);
  REQUIRE(session.ok());
  for (const char* d : {"r0/x", "r1/x", "r2/x"}) dir.path(d);
  auto first = (*session)->request({{"DTRACE_OUT_DIR", dir / "r0"}}, dir / "r0", 30);
  REQUIRE(first.ok());
  REQUIRE(first->ok());
  auto declined = (*session)->request({{"DTRACE_OUT_DIR", dir / "r1"}}, dir / "r1", 30);
  REQUIRE(declined.ok());
  INFO(declined->describe());
  CHECK_FALSE(declined->ok());  // not an answer to read: the caller launches it
  CHECK(declined->faults.empty());
  CHECK(declined->request == 1);
  REQUIRE(declined->declined);
  // One reason once; reasons that differ, each with its rank.
  CHECK(*declined->declined == (one_reason ? "step 7 runs once per process"
                                           : "rank 0: rank 0 wants its own process; rank 1: rank 1 wants its own process"));
  CHECK(declined->describe() == "declined: " + *declined->declined);
  CHECK((*session)->serving());
  auto next = (*session)->request({{"DTRACE_OUT_DIR", dir / "r2"}}, dir / "r2", 30);
  REQUIRE(next.ok());
  REQUIRE(next->ok());
  // The same processes served the request after the declined one.
  const auto pid_of = [&](const std::string& file) {
    const std::string answer = read_text(file);
    return answer.substr(0, answer.find(' '));
  };
  CHECK(pid_of(dir / "r2/answer0") == pid_of(dir / "r0/answer0"));
  CHECK(pid_of(dir / "r2/answer1") == pid_of(dir / "r0/answer1"));
  CHECK_FALSE(std::filesystem::exists(dir / "r1/answer0"));
  CHECK((*session)->requests() == 3);
}

TEST_CASE("a request that some ranks decline and others answer fails, naming both, and ends the session") {
  dtrace::test::TempDir dir;
  auto session = SessionLaunch::start(
      session_command({{"DECLINE_AT", "0"}, {"DECLINE_RANKS", "1"}, {"DECLINE_REASON", "a fresh process"}}),
      dir / "session", 2);
  REQUIRE(session.ok());
  dir.path("r0/x");
  auto outcome = (*session)->request({{"DTRACE_OUT_DIR", dir / "r0"}}, dir / "r0", 30);
  REQUIRE(outcome.ok());
  CHECK_FALSE(outcome->ok());
  CHECK_FALSE(outcome->declined);
  REQUIRE(outcome->faults.size() == 1);
  CHECK(outcome->faults.front().rank == 1);
  CHECK(outcome->faults.front().kind == dtrace::replay::RankFault::Kind::declined);
  CHECK(outcome->answered_ranks == std::vector<int>{0});
  CHECK(outcome->describe() ==
        "rank 1 declined the request (a fresh process), which rank 0 answered: every rank of the run declines a "
        "request, or none does");
  CHECK_FALSE((*session)->serving());
}

TEST_CASE("a session's failed request names the rank, with its session stderr, and ends the session") {
  dtrace::test::TempDir dir;
  auto session = SessionLaunch::start(session_command({{"FAIL_AT", "1"}}), dir / "session", 2);
  REQUIRE(session.ok());
  const std::string first = dir.path("r0/x"), second = dir.path("r1/x");
  auto ok = (*session)->request({{"DTRACE_OUT_DIR", dir / "r0"}}, dir / "r0", 30);
  REQUIRE(ok.ok());
  REQUIRE(ok->ok());
  const std::string rank0 = read_text(dir / "r0/answer0");
  auto failed = (*session)->request({{"DTRACE_OUT_DIR", dir / "r1"}}, dir / "r1", 30);
  REQUIRE(failed.ok());
  CHECK_FALSE(failed->ok());
  REQUIRE_FALSE(failed->faults.empty());
  CHECK(failed->faults.front().rank == 1);
  CHECK(failed->faults.front().code == 3);
  CHECK_FALSE((*session)->serving());
  // Rank 0 answered and waits for the next request: killed with the session.
  CHECK_FALSE(pid_runs(rank0.substr(0, rank0.find(' '))));
  CHECK_FALSE((*session)->request({{"DTRACE_OUT_DIR", dir / "r2"}}, dir / "r2", 30).ok());
}

TEST_CASE("a session's rank that ends between requests fails the next request") {
  dtrace::test::TempDir dir;
  auto session = SessionLaunch::start(session_command({{"DIE_AFTER", "0"}}), dir / "session", 2);
  REQUIRE(session.ok());
  dir.path("r0/x");
  dir.path("r1/x");
  auto ok = (*session)->request({{"DTRACE_OUT_DIR", dir / "r0"}}, dir / "r0", 30);
  REQUIRE(ok.ok());
  REQUIRE(ok->ok());
  auto failed = (*session)->request({{"DTRACE_OUT_DIR", dir / "r1"}}, dir / "r1", 30);
  REQUIRE(failed.ok());
  CHECK_FALSE(failed->ok());
  CHECK_FALSE(failed->timed_out);  // seen when it ended, not at the timeout
  CHECK(failed->seconds < 20);
  REQUIRE_FALSE(failed->faults.empty());
  CHECK(failed->faults.front().rank == 1);
}

TEST_CASE("a session's request that is not answered in time names every rank that did not answer") {
  using Kind = dtrace::replay::RankFault::Kind;
  dtrace::test::TempDir dir;
  // Request 1 is answered by rank 0 before it is sent (AHEAD), and rank 1
  // either has started it and hangs, or never reads it: what each rank did by
  // the timeout does not depend on how busy the machine is.
  const bool running = GENERATE(true, false);
  CAPTURE(running);
  auto session = SessionLaunch::start(
      session_command({{"AHEAD", dir / "r1"}, {"AHEAD_RUNNING", running ? "1" : "0"}}), dir / "session", 2);
  REQUIRE(session.ok());
  dir.path("r0/x");
  auto answered = (*session)->request({{"DTRACE_OUT_DIR", dir / "r0"}}, dir / "r0", 60);
  REQUIRE(answered.ok());
  REQUIRE(answered->ok());
  const std::string rank1 = read_text(dir / "r0/answer1");
  auto outcome = (*session)->request({{"DTRACE_OUT_DIR", dir / "r1"}}, dir / "r1", 1);
  REQUIRE(outcome.ok());
  CHECK(outcome->timed_out);
  REQUIRE(outcome->faults.size() == 1);  // rank 0 answered
  CHECK(outcome->faults.front().rank == 1);
  CHECK(outcome->faults.front().kind == (running ? Kind::hung : Kind::unstarted));
  CHECK(outcome->describe() ==
        "timed out after 1 s: rank 1 " + (running ? std::string("hangs (at step 0 after 1 records)")
                                                  : "had not read the request (its process " +
                                                        rank1.substr(0, rank1.find(' ')) + " still ran)"));
  CHECK_FALSE((*session)->serving());
}

TEST_CASE("a timed-out request that no rank had started names every rank and says none had") {
  dtrace::test::TempDir dir;
  // A session whose ranks never start (the job's start-up outlives the timeout).
  auto session = SessionLaunch::start(Command{{"sleep", "1000"}, {}, "", 60, ""}, dir / "session", 2);
  REQUIRE(session.ok());
  dir.path("r0/x");
  auto outcome = (*session)->request({{"DTRACE_OUT_DIR", dir / "r0"}}, dir / "r0", 1);
  REQUIRE(outcome.ok());
  CHECK(outcome->timed_out);
  REQUIRE(outcome->faults.size() == 2);
  for (int rank : {0, 1}) {
    CHECK(outcome->faults[rank].rank == rank);
    CHECK(outcome->faults[rank].kind == dtrace::replay::RankFault::Kind::unstarted);
  }
  CHECK(outcome->describe() == "timed out after 1 s: no rank had started (ranks 0, 1 wrote no status)");
}

TEST_CASE("a session whose workload exits 0 without answering is not answered") {
  dtrace::test::TempDir dir;
  auto session = SessionLaunch::start(session_command({{"QUIT_AT", "0"}}), dir / "session", 2);
  REQUIRE(session.ok());
  dir.path("r0/x");
  auto outcome = (*session)->request({{"DTRACE_OUT_DIR", dir / "r0"}}, dir / "r0", 30);
  REQUIRE(outcome.ok());
  CHECK_FALSE(outcome->ok());
  CHECK(outcome->unanswered);
  CHECK(outcome->describe().find("does the workload serve sessions?") != std::string::npos);
}

TEST_CASE("ending one session leaves another session's processes running") {
  dtrace::test::TempDir dir;
  auto a = SessionLaunch::start(session_command(), dir / "a", 2);
  auto b = SessionLaunch::start(session_command(), dir / "b", 2);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  dir.path("ra/x");
  dir.path("rb/x");
  REQUIRE((*a)->request({{"DTRACE_OUT_DIR", dir / "ra"}}, dir / "ra", 30)->ok());
  REQUIRE((*b)->request({{"DTRACE_OUT_DIR", dir / "rb"}}, dir / "rb", 30)->ok());
  const std::string b0 = read_text(dir / "rb/answer0");
  (*a)->end();
  CHECK(pid_runs(b0.substr(0, b0.find(' '))));
  dir.path("rb2/x");
  auto again = (*b)->request({{"DTRACE_OUT_DIR", dir / "rb2"}}, dir / "rb2", 30);
  REQUIRE(again.ok());
  CHECK(again->ok());
}

TEST_CASE("a session's rank that ends in a request or between requests is named with its exit status or signal") {
  using Kind = dtrace::replay::RankFault::Kind;
  const std::string end = GENERATE("exit", "segv");
  const bool between = GENERATE(false, true);
  // One process that is rank 0 itself (dtrace reaps it), and two ranks
  // under a launcher that reaps them at once (sh's wait).
  const bool launcher = GENERATE(false, true);
  CAPTURE(end, between, launcher);
  if (launcher && !kernel_keeps_reaped_status()) {
    WARN("this kernel keeps no reaped process's exit status (PIDFD_INFO_EXIT, Linux 6.15): not checked");
    return;
  }
  dtrace::test::TempDir dir;
  // Request 0 is answered; rank 0 ends in request 1 or before it reads it.
  const std::vector<std::pair<std::string, std::string>> env{
      {"END", end}, {between ? "END_AFTER" : "END_IN", between ? "0" : "1"}, {"DTRACE_PID", std::to_string(::getpid())}};
  auto session = SessionLaunch::start(launcher ? session_command(env) : one_process_session(env), dir / "session",
                                      launcher ? 2 : 1);
  REQUIRE(session.ok());
  dir.path("r0/x");
  dir.path("r1/x");
  auto answered = (*session)->request({{"DTRACE_OUT_DIR", dir / "r0"}}, dir / "r0", 60);
  REQUIRE(answered.ok());
  REQUIRE(answered->ok());
  auto outcome = (*session)->request({{"DTRACE_OUT_DIR", dir / "r1"}}, dir / "r1", 60);
  REQUIRE(outcome.ok());
  CHECK_FALSE(outcome->timed_out);
  REQUIRE_FALSE(outcome->faults.empty());
  const auto& fault = outcome->faults.front();
  CHECK(fault.rank == 0);
  CHECK(fault.kind == (end == "exit" ? Kind::exited : Kind::signaled));
  CHECK(fault.code == (end == "exit" ? 5 : SIGSEGV));
  CHECK(fault.answered == (between ? 0 : -1));
  CHECK(outcome->request == 1);
  const std::string how = end == "exit" ? "rank 0 exited with status 5" : "rank 0 was killed by signal 11 (";
  CHECK_THAT(outcome->describe(), Catch::StartsWith(how));
  CHECK((outcome->describe().find("after answering request 0, before it read the next") != std::string::npos) ==
        between);
}

TEST_CASE("a launch of one process that ends without writing its exit is named with its status or signal") {
  using Kind = dtrace::replay::RankFault::Kind;
  const std::string end = GENERATE("exit 5", "kill -SEGV $$");
  CAPTURE(end);
  dtrace::test::TempDir dir;
  const std::string d = dir / "";
  // The rank's status file says it runs; the process ends without a word (a
  // shell writes no "exit" line, as _exit(2) or a crash in a recorder's program).
  auto outcome = run(Command{{"/bin/sh", "-c", "echo \"running $$\" >" + d + "rank0.status; " + end}, {}, "", 60, d});
  REQUIRE(outcome.ok());
  REQUIRE(outcome->faults.size() == 1);
  CHECK(outcome->faults.front().kind == (end == "exit 5" ? Kind::exited : Kind::signaled));
  CHECK(outcome->faults.front().code == (end == "exit 5" ? 5 : SIGSEGV));
}

TEST_CASE("a session whose process is gone is left to its own launch when another session fails") {
  dtrace::test::TempDir dir;
  // Side B's process answers and exits 5; then side A's request fails and A
  // ends. B's process is B's to reap: ending A neither takes its exit status
  // nor leaves B's end waiting for a process that is gone (for its 10 s).
  const std::string self = std::to_string(::getpid());
  auto a = SessionLaunch::start(one_process_session({{"END", "exit"}, {"END_IN", "1"}, {"DTRACE_PID", self}}),
                                dir / "a", 1);
  auto b = SessionLaunch::start(one_process_session({{"END", "exit"}, {"END_AFTER", "0"}, {"DTRACE_PID", self}}),
                                dir / "b", 1);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  for (const char* d : {"a0", "a1", "b0", "b1"}) dir.path(std::string(d) + "/x");
  REQUIRE((*a)->request({{"DTRACE_OUT_DIR", dir / "a0"}}, dir / "a0", 60)->ok());
  REQUIRE((*b)->request({{"DTRACE_OUT_DIR", dir / "b0"}}, dir / "b0", 60)->ok());
  const std::string b0 = read_text(dir / "b0/answer0");
  const std::string b_pid = b0.substr(0, b0.find(' '));
  for (int i = 0; i < 30000 && pid_state(b_pid) != 'Z'; ++i) ::usleep(1000);
  REQUIRE(pid_state(b_pid) == 'Z');  // B's process exited; nobody has reaped it
  auto failed = (*a)->request({{"DTRACE_OUT_DIR", dir / "a1"}}, dir / "a1", 60);
  REQUIRE(failed.ok());
  CHECK_FALSE(failed->ok());
  CHECK(pid_state(b_pid) == 'Z');  // still B's zombie: A's end did not reap it
  auto gone = (*b)->request({{"DTRACE_OUT_DIR", dir / "b1"}}, dir / "b1", 60);
  REQUIRE(gone.ok());
  CHECK(gone->describe() == "rank 0 exited with status 5 after answering request 0, before it read the next");
  CHECK(pid_state(b_pid) == '-');
}
