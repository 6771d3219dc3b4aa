#include "launcher.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
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

int launch_processes(const Config& config, const std::string& executable, char** argv) {
  std::error_code ec;
  if (fs::exists(config.out, ec)) {
    throw Error("run directory " + config.out +
                " exists; refusing to overwrite it (choose a new --out)");
  }
  std::string pattern = (fs::temp_directory_path() / "minitrain-nccl.XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw Error("cannot create a bootstrap directory");
  const std::string bootstrap = pattern;

  std::vector<pid_t> children;
  for (int r = 0; r < config.ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      setenv("MINITRAIN_RANK", std::to_string(r).c_str(), 1);
      setenv("MINITRAIN_BOOTSTRAP", bootstrap.c_str(), 1);
      execv(executable.c_str(), argv);
      _exit(127);
    }
    children.push_back(pid);
  }
  int worst = children.size() == static_cast<std::size_t>(config.ranks) ? 0 : 2;
  std::size_t running = children.size();
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    --running;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && worst == 0) {
      worst = 2;
      // The others would wait in a collective forever.
      for (pid_t child : children)
        if (child != pid) kill(child, SIGTERM);
    }
  }
  fs::remove_all(bootstrap, ec);
  return worst;
}

}  // namespace minitrain
