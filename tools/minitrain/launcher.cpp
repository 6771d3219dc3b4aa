#include "launcher.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "checkpoint.hpp"

namespace minitrain {

namespace fs = std::filesystem;

void publish_unique_id(const std::string& dir, const void* id, std::size_t bytes) {
  const fs::path temporary = fs::path(dir) / "nccl-id.tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    out.write(static_cast<const char*>(id), static_cast<std::streamsize>(bytes));
    if (!out) throw Error("cannot write the NCCL unique id to " + temporary.string());
  }
  std::error_code ec;
  fs::rename(temporary, fs::path(dir) / "nccl-id", ec);
  if (ec) throw Error("cannot publish the NCCL unique id in " + dir + ": " + ec.message());
}

void await_unique_id(const std::string& dir, void* id, std::size_t bytes, int rank,
                     int timeout_ms) {
  const fs::path path = fs::path(dir) / "nccl-id";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(static_cast<char*>(id), static_cast<std::streamsize>(bytes))) return;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw Error("rank " + std::to_string(rank) + ": no NCCL unique id from rank 0 in " +
              path.string() + " after " + std::to_string(timeout_ms / 1000) + " s");
}

void apply_process_environment(Config& config) {
  const char* rank = std::getenv("MINITRAIN_RANK");
  if (rank == nullptr || *rank == '\0') return;
  char* end = nullptr;
  const long value = std::strtol(rank, &end, 10);
  if (*end != '\0' || value < 0 || value >= config.ranks) {
    throw Error("MINITRAIN_RANK=" + std::string(rank) + ": not a rank of --ranks " +
                std::to_string(config.ranks));
  }
  const char* dir = std::getenv("MINITRAIN_BOOTSTRAP");
  if (dir == nullptr || *dir == '\0') throw Error("MINITRAIN_RANK without MINITRAIN_BOOTSTRAP");
  config.process_rank = static_cast<int>(value);
  config.bootstrap_dir = dir;
}

int launch_processes(const Config& config, const std::string& executable, char** argv,
                     const dtrace::ReplayRequest& request) {
  std::error_code ec;
  if (!request.is_replay() && fs::exists(config.out, ec)) {
    throw Error("run directory " + config.out +
                " exists; refusing to overwrite it (choose a new --out)");
  }
  // Each process writes its own rank's records, status and capture index
  // (dtrace-replay/1.1, man/dtrace-fp.5): there is nothing to merge. One file
  // for the whole job (1.0) would take merging, which this launcher no longer does.
  if ((request.out || request.capture) && !request.out_dir) {
    throw Error(std::string(request.out ? "DTRACE_OUT" : "DTRACE_CAPTURE") +
                " without DTRACE_OUT_DIR: a job of several processes answers a replay with "
                "one file per rank (dtrace-replay/1.1, which dtrace speaks); set DTRACE_OUT_DIR");
  }
  std::string pattern = (fs::temp_directory_path() / "minitrain-nccl.XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw Error("cannot create a bootstrap directory");
  const fs::path bootstrap = pattern;
  // Removed however the launch ends.
  struct Remove {
    fs::path path;
    ~Remove() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } remove{bootstrap};
  // Under a replay each rank's stderr goes beside its status, where dtrace
  // shows its last lines if the rank fails.
  std::vector<std::string> stderr_files;
  for (int r = 0; r < config.ranks; ++r) {
    stderr_files.push_back(request.out_dir ? (fs::path(*request.out_dir) /
                                              ("rank" + std::to_string(r) + ".stderr"))
                                                 .string()
                                           : std::string());
  }

  // Each rank's environment, made before fork: between fork and exec the child
  // may only make async-signal-safe calls (no malloc: another thread may have
  // held its lock when the process was copied).
  std::vector<std::vector<std::string>> environments;
  for (int r = 0; r < config.ranks; ++r) {
    std::vector<std::string> env{"MINITRAIN_RANK=" + std::to_string(r),
                                 "MINITRAIN_BOOTSTRAP=" + bootstrap.string()};
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view entry(*e);
      const auto name = entry.substr(0, entry.find('=') + 1);
      if (name != "MINITRAIN_RANK=" && name != "MINITRAIN_BOOTSTRAP=") env.emplace_back(entry);
    }
    environments.push_back(std::move(env));
  }
  std::vector<std::vector<char*>> envps;
  for (auto& env : environments) {
    envps.emplace_back();
    for (auto& entry : env) envps.back().push_back(entry.data());
    envps.back().push_back(nullptr);
  }

  // A signal between fork and exec must not run a handler the process set (a
  // test framework's, which may malloc: a forked child of a threaded process
  // then deadlocks, seen in minitrain_launcher_test on a loaded machine, a
  // rank SIGTERMed as its sibling failed). As posix_spawn's SETSIGDEF: every
  // signal is blocked across fork, and the child sets each handled one back
  // to its default (ignored ones stay ignored, as exec keeps them) before it
  // unblocks them.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  std::vector<pid_t> children;
  for (int r = 0; r < config.ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      for (int s = 1; s < NSIG; ++s) {
        struct sigaction current {};
        if (sigaction(s, nullptr, &current) != 0 || current.sa_handler == SIG_IGN ||
            current.sa_handler == SIG_DFL) {
          continue;
        }
        struct sigaction reset {};
        reset.sa_handler = SIG_DFL;
        sigemptyset(&reset.sa_mask);
        sigaction(s, &reset, nullptr);
      }
      sigprocmask(SIG_SETMASK, &before, nullptr);
      const std::string& stderr_file = stderr_files[static_cast<std::size_t>(r)];
      if (!stderr_file.empty()) {
        const int fd = open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) dup2(fd, STDERR_FILENO);
      }
      execve(executable.c_str(), argv, envps[static_cast<std::size_t>(r)].data());
      _exit(127);
    }
    children.push_back(pid);
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  bool failed = children.size() != static_cast<std::size_t>(config.ranks);
  int ran_nothing = 0;
  std::size_t running = children.size();
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    --running;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == kExitNothingIsolated) {
      ++ran_nothing;
    } else if (code != 0 && !failed) {
      failed = true;
      // The others would wait in a collective forever.
      for (pid_t child : children)
        if (child != pid) kill(child, SIGTERM);
    }
  }
  if (failed) return 2;
  if (request.isolate && ran_nothing == config.ranks) {
    throw Error("DTRACE_ISOLATE=" + *request.isolate +
                ": no rank ran it (no such layer or op in this model, or DTRACE_INPUTS lacks its "
                "inputs)");
  }
  return 0;
}

}  // namespace minitrain
