#include "launcher.hpp"

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

namespace {

// Appends `from` to `to`, without its first line unless `with_header`.
void append_log(std::ofstream& to, const std::string& from, bool with_header) {
  std::ifstream in(from, std::ios::binary);
  if (!in) throw Error("cannot read the rank log " + from);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (!first || with_header) to << line << '\n';
    first = false;
  }
}

}  // namespace

void merge_logs(const std::vector<std::string>& parts, const std::string& out) {
  std::ofstream to(out, std::ios::binary | std::ios::trunc);
  if (!to) throw Error("cannot write " + out);
  bool header = true;
  for (const std::string& part : parts) {
    std::error_code ec;
    if (!fs::exists(part, ec)) continue;
    append_log(to, part, header);
    header = false;
  }
  if (!to.flush()) throw Error("cannot write " + out);
}

void merge_captures(const std::vector<std::string>& parts, const std::string& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw Error("DTRACE_CAPTURE " + out + ": cannot create directory: " + ec.message());
  std::vector<std::string> indexes;
  for (const std::string& part : parts) {
    if (!fs::is_directory(part, ec)) continue;
    for (const auto& entry : fs::directory_iterator(part)) {
      if (entry.path().filename() == "capture.jsonl") {
        indexes.push_back(entry.path().string());
        continue;
      }
      fs::rename(entry.path(), fs::path(out) / entry.path().filename(), ec);
      if (ec) throw Error("cannot move " + entry.path().string() + " to " + out);
    }
  }
  if (!indexes.empty()) merge_logs(indexes, (fs::path(out) / "capture.jsonl").string());
}

int launch_processes(const Config& config, const std::string& executable, char** argv,
                     const dtrace::ReplayRequest& request) {
  std::error_code ec;
  if (!request.is_replay() && fs::exists(config.out, ec)) {
    throw Error("run directory " + config.out +
                " exists; refusing to overwrite it (choose a new --out)");
  }
  if (request.out && fs::exists(*request.out, ec) && fs::file_size(*request.out, ec) > 0) {
    throw Error("DTRACE_OUT " + *request.out +
                " exists and is not empty; refusing to overwrite it");
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
  auto part = [&](const char* kind, int r) {
    return (bootstrap / (std::string(kind) + ".rank" + std::to_string(r))).string();
  };

  // Each rank's environment, made before fork: between fork and exec the child
  // may only make async-signal-safe calls (no malloc: another thread may have
  // held its lock when the process was copied).
  std::vector<std::vector<std::string>> environments;
  for (int r = 0; r < config.ranks; ++r) {
    std::vector<std::string> env{"MINITRAIN_RANK=" + std::to_string(r),
                                 "MINITRAIN_BOOTSTRAP=" + bootstrap.string()};
    // Each process writes its own replay log and capture; merged below.
    if (request.out) env.push_back("DTRACE_OUT=" + part("out", r));
    if (request.capture) env.push_back("DTRACE_CAPTURE=" + part("capture", r));
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view entry(*e);
      const auto name = entry.substr(0, entry.find('=') + 1);
      if (name != "MINITRAIN_RANK=" && name != "MINITRAIN_BOOTSTRAP=" &&
          !(request.out && name == "DTRACE_OUT=") &&
          !(request.capture && name == "DTRACE_CAPTURE=")) {
        env.emplace_back(entry);
      }
    }
    environments.push_back(std::move(env));
  }
  std::vector<std::vector<char*>> envps;
  for (auto& env : environments) {
    envps.emplace_back();
    for (auto& entry : env) envps.back().push_back(entry.data());
    envps.back().push_back(nullptr);
  }

  std::vector<pid_t> children;
  for (int r = 0; r < config.ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      execve(executable.c_str(), argv, envps[static_cast<std::size_t>(r)].data());
      _exit(127);
    }
    children.push_back(pid);
  }
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
  if (!failed) {
    std::vector<std::string> outs, captures;
    for (int r = 0; r < config.ranks; ++r) {
      outs.push_back(part("out", r));
      captures.push_back(part("capture", r));
    }
    if (request.out) merge_logs(outs, *request.out);
    if (request.capture) merge_captures(captures, *request.capture);
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
