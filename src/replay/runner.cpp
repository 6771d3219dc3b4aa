#include "replay/runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

extern char** environ;

namespace dtrace::replay {

namespace {

constexpr std::size_t kTailBytes = 4096;

// Every process a replay starts carries this variable in its environment, with
// a value no other replay shares: a process that left the replay's process
// group (setsid, a daemonizing helper) is still found by it and killed.
constexpr char kTagVariable[] = "DTRACE_REPLAY_TAG";

std::string new_tag() {
  static std::atomic<unsigned> serial{0};
  std::random_device random;
  return std::to_string(::getpid()) + "-" + std::to_string(serial++) + "-" +
         std::to_string(random());
}

bool carries_tag(const std::filesystem::path& environ_file, const std::string& entry) {
  std::ifstream in(environ_file, std::ios::binary);
  std::string variable;
  while (std::getline(in, variable, '\0')) {
    if (variable == entry) return true;
  }
  return false;
}

// Kills every process of ours that carries ENTRY ("DTRACE_REPLAY_TAG=..."),
// again until none is left, since a process may fork while it is being looked
// for. Zombies have no environment left and are not counted.
void kill_tagged(const std::string& entry) {
  namespace fs = std::filesystem;
  const pid_t self = ::getpid();
  for (int round = 0; round < 100; ++round) {
    bool found = false;
    std::error_code ec;
    for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(name));
      if (pid == self || !carries_tag(it->path() / "environ", entry)) continue;
      ::kill(pid, SIGKILL);
      found = true;
    }
    if (!found) return;
    ::usleep(2000);
  }
}

// The signals that end dtrace at a user's or a scheduler's request: while a
// replay runs they stop it (its processes killed, its temporary files removed
// by the caller) instead of ending dtrace with the workload left running in a
// process group of its own, which neither Ctrl-C nor the dying dtrace reaches.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
volatile std::sig_atomic_t g_stop_signal = 0;

void note_stop_signal(int signal) { g_stop_signal = signal; }

class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = note_stop_signal;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
      ::sigaction(kStopSignals[i], nullptr, &old_[i]);
      // A signal ignored when dtrace started (nohup, a background job) stays ignored.
      if (old_[i].sa_handler != SIG_IGN) ::sigaction(kStopSignals[i], &action, nullptr);
    }
  }
  ~StopSignals() {
    for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
      ::sigaction(kStopSignals[i], &old_[i], nullptr);
    }
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  int received() const { return g_stop_signal; }

 private:
  struct sigaction old_[std::size(kStopSignals)]{};
};

std::vector<std::string> merged_environment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : extra) env[key] = value;
  std::vector<std::string> out;
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

}  // namespace

std::string Outcome::describe() const {
  if (timed_out) return "timed out after " + std::to_string(static_cast<long>(seconds)) + " s";
  if (signal != 0) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit " + std::to_string(exit_code);
}

Result<Outcome> run(const Command& command) {
  if (command.argv.empty()) return Error{"replay command is empty"};
  // Everything the child needs is built before fork: after it only
  // async-signal-safe calls are allowed.
  auto env = command.env;
  env.emplace_back(kTagVariable, new_tag());
  const std::string tag = std::string(kTagVariable) + "=" + env.back().second;  // as in /proc/PID/environ
  std::vector<std::string> env_strings = merged_environment(env);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = command.argv;
  for (auto& s : argv_copy) argv.push_back(s.data());
  argv.push_back(nullptr);

  int err_pipe[2];
  int exec_pipe[2];  // reports a failed exec (closed on a successful one)
  if (::pipe2(err_pipe, O_CLOEXEC) != 0 || ::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    return Error{std::string("cannot create a pipe: ") + std::strerror(errno)};
  }
  const StopSignals stop_signals;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return Error{std::string("cannot fork: ") + std::strerror(errno)};
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group: a timeout kills it with its children
    const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(devnull, STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    if (!command.cwd.empty() && ::chdir(command.cwd.c_str()) != 0) {
      const int e = errno;
      (void)!::write(exec_pipe[1], &e, sizeof e);
      ::_exit(127);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    (void)!::write(exec_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  int exec_errno = 0;
  const bool exec_failed = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  ::close(exec_pipe[0]);

  Outcome outcome;
  const auto deadline = start + std::chrono::duration<double>(command.timeout_s);
  char buffer[4096];
  int status = 0;
  bool exited = false;
  auto keep = [&](ssize_t got) {
    outcome.stderr_tail.append(buffer, static_cast<std::size_t>(got));
    if (outcome.stderr_tail.size() > 2 * kTailBytes) {
      outcome.stderr_tail.erase(0, outcome.stderr_tail.size() - kTailBytes);
    }
  };
  // Read stderr while it runs; a grandchild holding the pipe open does not
  // keep us waiting once the workload itself has exited.
  bool pipe_open = true;
  int stopped_by = 0;
  while (!exited) {
    if ((stopped_by = stop_signals.received()) != 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      outcome.timed_out = true;
      break;
    }
    if (pipe_open) {
      pollfd p{err_pipe[0], POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) {
        const ssize_t got = ::read(err_pipe[0], buffer, sizeof buffer);
        if (got > 0) keep(got);
        else pipe_open = false;
      }
    } else {
      ::usleep(5000);
    }
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
  }
  if (exited && pipe_open) {  // what it wrote just before exiting
    ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
    for (ssize_t got; (got = ::read(err_pipe[0], buffer, sizeof buffer)) > 0;) keep(got);
  }
  // Whatever it left behind goes with it, in its group or not: no orphans.
  ::kill(-pid, SIGKILL);
  if (!exited) ::waitpid(pid, &status, 0);
  kill_tagged(tag);
  ::close(err_pipe[0]);
  outcome.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (outcome.stderr_tail.size() > kTailBytes) {
    outcome.stderr_tail.erase(0, outcome.stderr_tail.size() - kTailBytes);
  }
  if (exec_failed) {
    return Error{"cannot run " + command.argv[0] + ": " + std::strerror(exec_errno)};
  }
  if (stopped_by != 0) {
    return Error{std::string("interrupted by signal ") + std::to_string(stopped_by) + " (" +
                 strsignal(stopped_by) + "): the workload and its processes were killed"};
  }
  if (!outcome.timed_out) {
    if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
  }
  return outcome;
}

Result<std::vector<std::string>> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\'') {
      const auto end = text.find('\'', i + 1);
      if (end == std::string::npos) return Error{"unterminated ' in: " + text};
      word += text.substr(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      ++i;
      while (i < text.size() && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < text.size() && std::strchr("\"\\$`", text[i + 1])) ++i;
        word += text[i++];
      }
      if (i >= text.size()) return Error{"unterminated \" in: " + text};
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) return Error{"empty command"};
  return words;
}

}  // namespace dtrace::replay
