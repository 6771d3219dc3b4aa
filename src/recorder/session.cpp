// A replay session, the workload's side (dtrace-replay/1.2, man/dtrace-fp.5
// "Replay sessions"; include/dtrace/recorder.hpp, ReplaySession).
//
// The request's variables become a ReplayRequest through
// ReplayRequest::from_variables, the one rule for what a replay may ask, so a
// request is refused exactly where the same variables in a launch's
// environment would be. The status files are the recorder's
// (recorder/status.hpp): next() opens each rank's in the request's directory
// before the program does anything for the request, so the exit handler
// reports a failure there, and done() finishes them (decline() too, with
// "declined": dtrace then launches the request).
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#include "dtrace/recorder.hpp"
#include "recorder/session_watch.hpp"
#include "recorder/status.hpp"

namespace dtrace {

namespace {

namespace fs = std::filesystem;
using Kind = RecorderError::Kind;

// Between looks for the next request when no change in the session's
// directory woke the wait (inotify wakes it at once where it sees the rename):
// nothing next to a replay (dtrace-fp(5)).
constexpr auto kPollInterval = std::chrono::milliseconds(10);

std::optional<std::string> lookup(const std::map<std::string, std::string>& variables,
                                  const char* name) {
  auto it = variables.find(name);
  if (it == variables.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::map<std::string, std::string> process_variables() {
  std::map<std::string, std::string> variables;
  for (const char* name : {"DTRACE_SESSION", "DTRACE_REPLAY_STEP"}) {
    if (const char* value = std::getenv(name)) variables.emplace(name, value);
  }
  return variables;
}

}  // namespace

namespace recording {

DirectoryWatch::DirectoryWatch(std::string dir) : dir_(std::move(dir)) {
  fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd_ >= 0 && ::inotify_add_watch(fd_, dir_.c_str(), IN_MOVED_TO | IN_CREATE | IN_CLOSE_WRITE) < 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

DirectoryWatch::~DirectoryWatch() {
  if (fd_ >= 0) ::close(fd_);
}

DirectoryWatch::Found DirectoryWatch::wait_for(const std::string& name,
                                               std::optional<std::chrono::milliseconds> timeout,
                                               std::chrono::milliseconds look) {
  const std::string path = (fs::path(dir_) / name).string();
  const auto started = std::chrono::steady_clock::now();
  Found how = Found::present;
  while (true) {
    // Changes queued since the last wait (earlier requests, the .new files
    // renamed into them) say nothing now: read before looking, so that a
    // change after the look wakes the poll below.
    char buffer[4096];
    if (fd_ >= 0) {
      while (::read(fd_, buffer, sizeof buffer) > 0) {
      }
    }
    std::error_code ec;
    if (fs::exists(path, ec)) return how;
    auto wait = look;
    if (timeout) {
      const auto left = *timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - started);
      if (left <= std::chrono::milliseconds(0)) return Found::timed_out;
      wait = std::min(wait, left);
    }
    if (fd_ < 0) {
      std::this_thread::sleep_for(wait);
      how = Found::look;
      continue;
    }
    pollfd p{fd_, POLLIN, 0};
    const int woke = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(wait.count(), 1 << 30)));
    how = woke > 0 ? Found::event : Found::look;
  }
}

}  // namespace recording

struct ReplaySession::State {
  std::string dir;
  std::int64_t step = 0;
  std::vector<int> ranks;
  std::int64_t next = 0;       // the number of the request to wait for
  bool serving = false;        // request next-1 is being served
  bool ended = false;          // the end request was read
  bool seen_step_replay = false;
  bool first_step_request = false;
  std::optional<std::string> out_dir;  // of the request being served
  std::map<std::string, std::string> variables;  // of the request being served
  std::vector<std::unique_ptr<recording::StatusFile>> statuses;
  // Set up at the first next(), kept for the session's life.
  std::unique_ptr<recording::DirectoryWatch> watch;
};

ReplaySession::ReplaySession(std::unique_ptr<State> state) : state_(std::move(state)) {}
ReplaySession::~ReplaySession() = default;

std::unique_ptr<ReplaySession> ReplaySession::from_environment(std::vector<int> ranks) {
  return from_variables(process_variables(), std::move(ranks));
}

std::unique_ptr<ReplaySession> ReplaySession::from_variables(
    const std::map<std::string, std::string>& variables, std::vector<int> ranks) {
  const auto dir = lookup(variables, "DTRACE_SESSION");
  if (!dir) return nullptr;
  std::error_code ec;
  if (!fs::is_directory(*dir, ec)) {
    throw RecorderError("DTRACE_SESSION=" + *dir + ": not a directory (the session's, where requests arrive)",
                        Kind::environment);
  }
  const auto text = lookup(variables, "DTRACE_REPLAY_STEP");
  if (!text) {
    throw RecorderError("DTRACE_SESSION=" + *dir + " needs DTRACE_REPLAY_STEP, the step the session replays",
                        Kind::environment);
  }
  // The request rules read the step: one spelling of what a step number is.
  const ReplayRequest launch = ReplayRequest::from_variables({{"DTRACE_REPLAY_STEP", *text}});
  if (ranks.empty()) throw RecorderError("a replay session needs the ranks this process runs", Kind::argument);
  for (int rank : ranks) {
    if (rank < 0) throw RecorderError("rank " + std::to_string(rank) + " is negative", Kind::argument);
  }
  auto state = std::make_unique<State>();
  state->dir = *dir;
  state->step = *launch.step;
  state->ranks = std::move(ranks);
  return std::unique_ptr<ReplaySession>(new ReplaySession(std::move(state)));
}

std::optional<ReplayRequest> ReplaySession::next(std::optional<std::chrono::milliseconds> timeout) {
  State& s = *state_;
  if (s.serving) {
    throw RecorderError("ReplaySession::next() while request " + std::to_string(s.next - 1) +
                            " is not done (call done() first)",
                        Kind::order);
  }
  if (s.ended) return std::nullopt;
  const std::string path = (fs::path(s.dir) / ("request." + std::to_string(s.next) + ".json")).string();
  if (!s.watch) s.watch = std::make_unique<recording::DirectoryWatch>(s.dir);
  const std::string name = "request." + std::to_string(s.next) + ".json";
  if (s.watch->wait_for(name, timeout, kPollInterval) == recording::DirectoryWatch::Found::timed_out) {
    throw RecorderError(path + ": no request after " + std::to_string(timeout->count()) + " ms");
  }
  // dtrace renames a complete file into place: what exists is whole.
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw RecorderError(path + ": cannot read the request");
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) -> RecorderError {
    return RecorderError(path + ": not a replay request: " + why);
  };
  if (json.is_discarded() || !json.is_object()) throw bad("not a JSON object");
  const auto number = json.find("request");
  if (number == json.end() || !number->is_number_integer() || number->get<std::int64_t>() != s.next) {
    throw bad("\"request\" is not " + std::to_string(s.next));
  }
  if (const auto end = json.find("end"); end != json.end()) {
    if (!end->is_boolean()) throw bad("\"end\" is not true or false");
    if (end->get<bool>()) {
      s.ended = true;
      return std::nullopt;
    }
  }
  const auto env = json.find("env");
  if (env == json.end() || !env->is_object()) throw bad("no \"env\" object");
  std::map<std::string, std::string> variables;
  for (const auto& [name, value] : env->items()) {
    if (!value.is_string()) throw bad("env " + name + " is not a string");
    variables[name] = value.get<std::string>();
  }
  // The ranks' status first, wherever the request names a directory: a
  // request this process then refuses fails as a launch would, its exit code
  // in that directory (dtrace-fp(5)).
  s.statuses.clear();
  if (const auto dir = lookup(variables, "DTRACE_OUT_DIR")) {
    std::error_code ec;
    fs::create_directories(*dir, ec);
    if (!fs::is_directory(*dir, ec)) {
      throw RecorderError("DTRACE_OUT_DIR " + *dir + " (" + path + "): cannot create directory");
    }
    for (int rank : s.ranks) {
      s.statuses.push_back(std::make_unique<recording::StatusFile>(recording::status_path(*dir, rank)));
    }
  }
  // Only the request's variables: one the process's environment holds and
  // the request lacks is unset for this request (dtrace-fp(5)).
  ReplayRequest request;
  try {
    request = ReplayRequest::from_variables(variables);
  } catch (const RecorderError& e) {
    throw RecorderError(path + ": " + e.what(), e.kind());
  }
  if (!request.out_dir) throw bad("no DTRACE_OUT_DIR (every request names its directory)");
  if (request.step != s.step) {
    throw RecorderError(path + ": DTRACE_REPLAY_STEP=" +
                            (request.step ? std::to_string(*request.step) : std::string("(unset)")) +
                            ": this session replays step " + std::to_string(s.step),
                        Kind::environment);
  }
  const bool step_replay = request.step && !request.isolate;
  s.first_step_request = step_replay && !s.seen_step_replay;
  s.seen_step_replay = s.seen_step_replay || step_replay;
  s.out_dir = request.out_dir;
  s.variables = std::move(variables);
  s.serving = true;
  ++s.next;
  return request;
}

void ReplaySession::done() {
  State& s = *state_;
  if (!s.serving) throw RecorderError("ReplaySession::done() without a request being served", Kind::order);
  for (int rank : s.ranks) recording::finish_status(recording::status_path(*s.out_dir, rank));
  s.statuses.clear();
  s.variables.clear();
  s.serving = false;
}

void ReplaySession::decline(std::string reason) {
  State& s = *state_;
  if (!s.serving) throw RecorderError("ReplaySession::decline() without a request being served", Kind::order);
  // One line of the status file, which dtrace shows in its report.
  if (reason.find_first_not_of(" \t") == std::string::npos) {
    throw RecorderError("ReplaySession::decline(): the reason is empty (dtrace's report shows it)", Kind::argument);
  }
  if (reason.find_first_of("\n\r") != std::string::npos) {
    throw RecorderError("ReplaySession::decline(): the reason is more than one line", Kind::argument);
  }
  for (int rank : s.ranks) recording::decline_status(recording::status_path(*s.out_dir, rank), reason);
  // A declined first step replay reached nothing: the next step request is
  // the one that restores step N from the checkpoint.
  if (s.first_step_request) s.seen_step_replay = false;
  s.first_step_request = false;
  s.statuses.clear();
  s.variables.clear();
  s.serving = false;
}

std::int64_t ReplaySession::step() const { return state_->step; }
const std::string& ReplaySession::directory() const { return state_->dir; }
std::int64_t ReplaySession::request_number() const { return state_->next - 1; }
bool ReplaySession::first_step_request() const { return state_->serving && state_->first_step_request; }
const std::map<std::string, std::string>& ReplaySession::variables() const { return state_->variables; }

}  // namespace dtrace
