#include "replay/runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "replay/processes.hpp"

extern char** environ;

namespace dtrace::replay {

namespace {

constexpr std::size_t kTailBytes = 4096;
// How long a session's workload has to exit after the end request.
constexpr int kEndGraceSeconds = 10;

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


// ---- Ranks of a job of several processes (dtrace-replay/1.1) ----

// What a rank's status file says, as read now.
struct RankStatus {
  int rank = 0;
  bool exited = false;  // "exit CODE [TIME]"
  bool done = false;    // "done PID [TIME]": a session's rank answered the request
  bool declined = false;  // "declined PID REASON": a session's rank declined it (launch it instead)
  std::string reason;     // a decline's
  int code = 0;
  std::int64_t exit_ns = 0;  // TIME, or the file's mtime for a line without it
  long pid = 0;  // "running PID [STEP SEQ]"
  std::int64_t step = -1, seq = -1;
  std::int64_t changed_ns = 0;  // the file's mtime: when the rank last wrote it
};

std::optional<RankStatus> read_status(const std::filesystem::path& file, int rank) {
  std::ifstream in(file);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  std::istringstream words(line);
  std::string word;
  RankStatus status;
  status.rank = rank;
  if (!(words >> word)) return std::nullopt;
  if (word == "exit") {
    if (!(words >> status.code)) return std::nullopt;  // half written: read again later
    status.exited = true;
    // "exit CODE [TIME [PID]]": the pid says whose exit it is when dtrace
    // never read the rank's "running PID" (it failed within one look).
    if (std::int64_t time; words >> time && time > 0) {
      status.exit_ns = time;
      if (long pid; words >> pid && pid > 0) status.pid = pid;
    }
  } else if (word == "done") {
    // "done PID [TIME]": the pid keeps the rank's process watched between
    // requests even when dtrace never read its "running" line.
    if (!(words >> status.pid) || status.pid <= 0) return std::nullopt;
    status.done = true;
  } else if (word == "declined") {
    // "declined PID REASON": written whole (renamed into place), the reason
    // the rest of the line.
    if (!(words >> status.pid) || status.pid <= 0) return std::nullopt;
    std::getline(words >> std::ws, status.reason);
    status.reason.erase(status.reason.find_last_not_of(" \t\r") + 1);
    status.declined = true;
  } else if (word == "running") {
    if (!(words >> status.pid) || status.pid <= 0) return std::nullopt;
    if (std::int64_t step, seq; words >> step >> seq) {
      status.step = step;
      status.seq = seq;
    }
  } else {
    return std::nullopt;
  }
  struct stat info {};
  if (::stat(file.c_str(), &info) == 0) {
    status.changed_ns = std::int64_t{info.st_mtim.tv_sec} * 1'000'000'000 + info.st_mtim.tv_nsec;
  }
  // An older recorder's line has no TIME; one more than a second from the
  // file's mtime, which the same write set, is not nanoseconds of this clock
  // (seconds, say, or a line read torn): the mtime stands for it.
  if (status.exited && (status.exit_ns == 0 || status.changed_ns == 0 ||
                        std::abs(status.exit_ns - status.changed_ns) > 1'000'000'000)) {
    status.exit_ns = status.changed_ns;
  }
  return status;
}

// Every rank<r>.status in `dir`, by rank.
std::map<int, RankStatus> read_statuses(const std::string& dir) {
  namespace fs = std::filesystem;
  std::map<int, RankStatus> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("rank") || !name.ends_with(".status")) continue;
    const std::string number = name.substr(4, name.size() - 4 - 7);
    if (number.empty() || number.size() > 9 || number.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const int rank = std::stoi(number);
    if (auto status = read_status(it->path(), rank)) out[rank] = *status;
  }
  return out;
}

// How process `pid` stands: alive, or gone; a zombie (its parent, the
// launcher, has not reaped it yet) still tells how it ended (proc(5), field 52).
struct ProcessEnd {
  bool gone = false;
  std::optional<int> wait_status;
};

ProcessEnd process_end(long pid) {
  const auto process = describe_process(static_cast<pid_t>(pid));
  if (!process) return {true, std::nullopt};
  if (process->state != 'Z' && process->state != 'X') return {false, std::nullopt};
  return {true, process->wait_status};
}

std::string file_tail(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - static_cast<std::streamoff>(kTailBytes));
  in.seekg(from);
  std::string tail(static_cast<std::size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  if (from > 0) {  // start at a whole line
    const auto newline = tail.find('\n');
    if (newline != std::string::npos) tail.erase(0, newline + 1);
  }
  return tail;
}

// A rank's stderr is rank<r>.stderr in `dir`, else (a session's ranks write
// one for the whole session) in `fallback_dir`.
RankFault fault_of(const RankStatus& status, const std::string& dir, const std::string& fallback_dir) {
  RankFault fault;
  fault.rank = status.rank;
  fault.pid = status.pid;
  fault.step = status.step;
  fault.seq = status.seq;
  const std::string name = "rank" + std::to_string(status.rank) + ".stderr";
  auto stderr_file = std::filesystem::path(dir) / name;
  std::error_code ec;
  if (!fallback_dir.empty() && !std::filesystem::exists(stderr_file, ec)) {
    stderr_file = std::filesystem::path(fallback_dir) / name;
  }
  fault.stderr_file = std::filesystem::exists(stderr_file, ec);
  fault.stderr_tail = file_tail(stderr_file);
  return fault;
}



std::int64_t wall_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// The ranks' processes, each watched through a pidfd (Linux 5.3) from the
// first time dtrace reads its pid in a status file. The kernel queues a
// process's end on the epoll instance as it happens, in the order the ends
// happen, whoever reaps the process (the launcher does): so the order in which
// the watched ranks ended is exact, however fast a launcher that stops the
// others after the first failure follows it, and none of the ranks needs to
// write anything. Without pidfds nothing is watched, and past a quarter of
// the process's descriptors no more ranks are (failed_ranks says how the
// unwatched ranks are then ordered).
class RankWatch {
 public:
  struct End {
    std::size_t position = 0;  // 0 for the first watched process that ended, ...
    std::int64_t seen_ns = 0;  // when dtrace took it from the queue (wall clock)
  };
  RankWatch() : epoll_(::epoll_create1(EPOLL_CLOEXEC)), most_(most_pidfds()) {}
  ~RankWatch() {
    for (const auto& [pid, fd] : pidfds_) ::close(fd);
    for (const auto& [pid, fd] : ended_fds_) ::close(fd);
    if (epoll_ >= 0) ::close(epoll_);
  }
  RankWatch(const RankWatch&) = delete;
  RankWatch& operator=(const RankWatch&) = delete;

  // Readable when an end is queued; -1 without epoll.
  int fd() const { return epoll_; }

  // Starts watching PID, rank RANK's process, once. A process that has already
  // ended is left unwatched: its place in the queue would be the time we
  // looked, not its end.
  void watch(int rank, long pid) {
    if (pid > 0) rank_pids_[rank] = pid;
    if (epoll_ < 0 || pid <= 0 || pidfds_.contains(pid) || ends_.contains(pid) || unwatched_.contains(pid)) {
      return;
    }
    const int fd = pidfds_.size() + ended_fds_.size() < most_
                       ? static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0))
                       : -1;
    if (fd < 0) {
      unwatched_.insert(pid);
      return;
    }
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = static_cast<std::uint64_t>(pid);
    if (readable(fd)) {  // a zombie: kept for how it ended once its launcher reaps it
      ended_fds_[pid] = fd;
      unwatched_.insert(pid);
      return;
    }
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {
      ::close(fd);
      unwatched_.insert(pid);
      return;
    }
    pidfds_[pid] = fd;
  }

  // The process rank RANK ran in, as its status last said (its "exit" line does not).
  long pid_of(int rank) const {
    const auto it = rank_pids_.find(rank);
    return it == rank_pids_.end() ? 0 : it->second;
  }

  bool watched(long pid) const { return pidfds_.contains(pid) || ends_.contains(pid); }

  // Every rank whose process dtrace has read, with it.
  const std::map<int, long>& rank_pids() const { return rank_pids_; }

  // Whether watched process PID has ended, its end queued or not yet taken.
  bool ended(long pid) const {
    if (ends_.contains(pid)) return true;
    const auto it = pidfds_.find(pid);
    return it != pidfds_.end() && readable(it->second);
  }

  // Takes the queued ends, in their order.
  void collect() {
    epoll_event events[64];
    for (int got; epoll_ >= 0 && (got = ::epoll_wait(epoll_, events, 64, 0)) > 0;) {
      const std::int64_t now = wall_ns();
      for (int i = 0; i < got; ++i) {
        const long pid = static_cast<long>(events[i].data.u64);
        ends_[pid] = End{next_position_++, now};
        if (const auto it = pidfds_.find(pid); it != pidfds_.end()) {
          // Kept open: once the launcher reaps the process, it still says how it ended.
          ::epoll_ctl(epoll_, EPOLL_CTL_DEL, it->second, nullptr);
          ended_fds_[pid] = it->second;
          pidfds_.erase(it);
        }
      }
    }
  }

  // The end of each of PIDS that has ended: the kernel queues it in the same
  // step that makes the pidfd readable, so it is there or a moment away.
  void settle(const std::vector<long>& pids) {
    for (int round = 0; round < 1000; ++round) {
      collect();
      if (std::all_of(pids.begin(), pids.end(), [&](long pid) { return ends_.contains(pid); })) return;
      ::usleep(1000);
    }
  }

  std::optional<End> end_of(long pid) const {
    const auto it = ends_.find(pid);
    if (it == ends_.end()) return std::nullopt;
    return it->second;
  }

  // Process PID, dtrace's own child (a job of one process: the replay command
  // is the rank), was reaped by dtrace with WAIT_STATUS: no zombie is left to
  // read it from.
  void reaped(long pid, int wait_status) { reaped_[pid] = wait_status; }

  // How process PID ended, when it is gone and no zombie says: reaped by
  // dtrace, or by its launcher while dtrace held a pidfd on it.
  std::optional<int> reaped_status(long pid) const {
    if (const auto it = reaped_.find(pid); it != reaped_.end()) return it->second;
    for (const auto* fds : {&ended_fds_, &pidfds_}) {
      if (const auto it = fds->find(pid); it != fds->end()) return reaped_wait_status(it->second);
    }
    return std::nullopt;
  }

 private:
  // A quarter of the process's descriptors at most: dtrace still has to open
  // the ranks' status files and walk /proc with the rest (a pidfd on each of
  // more ranks than that took them all, and then a rank's exit went unread).
  static std::size_t most_pidfds() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    return limit.rlim_cur == RLIM_INFINITY ? 4096 : std::min<std::size_t>(limit.rlim_cur / 4, 4096);
  }

  static bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
  }

  int epoll_ = -1;
  std::size_t most_ = 0;
  std::size_t next_position_ = 0;
  std::map<long, int> pidfds_;
  std::map<long, int> ended_fds_;  // pidfds of ended processes (reaped_status)
  std::map<long, int> reaped_;     // wait statuses of dtrace's own children it reaped
  std::map<long, End> ends_;
  std::set<long> unwatched_;
  std::map<int, long> rank_pids_;
};

// Whether ranks 0 .. ranks-1 all say "done" or "declined" in `dir` (a
// session's request answered; SessionLaunch::request reads which). Each one's
// process is watched from here on: one that wrote "running" and "done"
// between two looks is watched until the next request all the same, so that
// how it ends between requests is known.
bool all_answered(const std::string& dir, int ranks, RankWatch& watch) {
  const auto statuses = read_statuses(dir);
  for (const auto& [rank, status] : statuses) {
    if (status.done || status.declined) watch.watch(rank, status.pid);
  }
  for (int rank = 0; rank < ranks; ++rank) {
    const auto it = statuses.find(rank);
    if (it == statuses.end() || !(it->second.done || it->second.declined)) return false;
  }
  return true;
}

// The ranks that have failed by now, the first to fail first (dtrace-fp(5)):
// "exit CODE" with CODE != 0, or "running PID" with PID gone. A process that
// wrote "exit 0" and ended between our two reads is read again, not blamed.
// Every rank still running is watched from here on.
//
// The order: a rank that wrote its exit failed when it wrote it (the line's
// time, or the file's mtime for an older recorder's line); a watched rank that
// ended without writing failed when it ended, and the watched ranks are in
// the order the kernel saw them end. A rank that ended before dtrace watched
// it, without writing, failed at a moment nobody knows: after every rank that
// wrote its failure (a launcher stopping the others kills them after the first
// failure, and a killed process writes nothing), and before the watched ones
// when no rank wrote one (it ended before dtrace could even watch it).
// A file's mtime alone named a killed rank's last progress, not its end.
//
// In a session (`request`, the request's number, >= 0), a rank whose process
// an earlier request named and that has ended without a status in this
// request's `dir` failed too: it ended between requests, after answering the
// one before. A rank that says "done" or "declined" has answered.
//
// How a rank that wrote nothing ended is read from its zombie, else from what
// dtrace kept when it or the launcher reaped it (RankWatch::reaped_status).
std::vector<RankFault> failed_ranks(const std::string& dir, RankWatch& watch, int request,
                                    const std::string& stderr_dir) {
  const bool session = request >= 0;
  struct Failure {
    RankFault fault;
    long pid = 0;                     // its process, when dtrace read it
    bool written = false;             // it wrote "exit CODE"
    std::int64_t time = 0;            // when it failed, as far as known
    std::optional<RankWatch::End> end;
  };
  std::vector<Failure> failed;
  std::vector<long> ended;
  auto statuses = read_statuses(dir);
  std::set<int> between;  // ranks with no status in this request's directory
  if (session) {
    // Read as the status it last wrote, "running PID", in a request it had not reached.
    for (const auto& [rank, pid] : watch.rank_pids()) {
      if (statuses.contains(rank)) continue;
      RankStatus status;
      status.rank = rank;
      status.pid = pid;
      statuses[rank] = status;
      between.insert(rank);
    }
  }
  for (const auto& [rank, status] : statuses) {
    if (!status.exited || status.pid > 0) watch.watch(rank, status.pid);
    if (status.done || status.declined) continue;
    Failure failure;
    failure.fault = fault_of(status, dir, stderr_dir);
    failure.pid = watch.pid_of(rank);
    RankFault& fault = failure.fault;
    if (fault.pid <= 0) fault.pid = failure.pid;  // an exit line without its pid
    if (between.contains(rank)) fault.answered = request - 1;
    if (status.exited) {
      if (status.code == 0 && !session) continue;  // in a session, an exit before "done" is a failure
      fault.kind = RankFault::Kind::exited;
      fault.code = status.code;
      failure.written = true;
      failure.time = status.exit_ns;
      if (watch.ended(failure.pid)) ended.push_back(failure.pid);
      failed.push_back(std::move(failure));
      continue;
    }
    const bool watched = watch.watched(status.pid);
    if (watched && !watch.ended(status.pid)) continue;
    ProcessEnd end = process_end(status.pid);
    if (!watched && !end.gone) continue;
    if (end.gone && !end.wait_status) end.wait_status = watch.reaped_status(status.pid);
    if (auto again = read_status(std::filesystem::path(dir) / ("rank" + std::to_string(rank) + ".status"), rank);
        again && again->exited) {
      if (again->code == 0 && !session) continue;
      fault.kind = RankFault::Kind::exited;
      fault.code = again->code;
      failure.written = true;
      failure.time = again->exit_ns;
    } else if (end.wait_status && WIFSIGNALED(*end.wait_status)) {
      fault.kind = RankFault::Kind::signaled;
      fault.code = WTERMSIG(*end.wait_status);
    } else if (end.wait_status && WIFEXITED(*end.wait_status) && WEXITSTATUS(*end.wait_status) != 0) {
      fault.kind = RankFault::Kind::exited;
      fault.code = WEXITSTATUS(*end.wait_status);
    } else {
      fault.kind = RankFault::Kind::vanished;
    }
    if (watched) ended.push_back(status.pid);
    if (!failure.written) failure.time = status.changed_ns;
    failed.push_back(std::move(failure));
  }
  watch.settle(ended);
  for (Failure& failure : failed) {
    if (!watch.watched(failure.pid)) continue;
    failure.end = watch.end_of(failure.pid);
    if (failure.end && !failure.written) failure.time = failure.end->seen_ns;
  }
  // The watched ends in the kernel's order, merged by time with the written
  // failures of ranks whose end was not seen; then the unwatched killed ranks.
  std::vector<const Failure*> seen, written, unwatched;
  for (const Failure& failure : failed) {
    (failure.end ? seen : failure.written ? written : unwatched).push_back(&failure);
  }
  std::stable_sort(seen.begin(), seen.end(),
                   [](const Failure* x, const Failure* y) { return x->end->position < y->end->position; });
  const auto by_time = [](const Failure* x, const Failure* y) { return x->time < y->time; };
  std::stable_sort(written.begin(), written.end(), by_time);
  std::stable_sort(unwatched.begin(), unwatched.end(), by_time);
  // A hand-written merge: the watched ends keep the kernel's order even where
  // their times (taken when dtrace saw them) do not follow it.
  std::vector<const Failure*> known;
  for (std::size_t w = 0, s = 0; w < written.size() || s < seen.size();) {
    const bool take_written = s == seen.size() || (w < written.size() && written[w]->time <= seen[s]->time);
    known.push_back(take_written ? written[w++] : seen[s++]);
  }
  const bool any_written = std::any_of(failed.begin(), failed.end(), [](const Failure& f) { return f.written; });
  std::vector<RankFault> out;
  for (const Failure* failure : any_written ? known : unwatched) out.push_back(failure->fault);
  for (const Failure* failure : any_written ? unwatched : known) out.push_back(failure->fault);
  return out;
}

// At a timeout: the ranks still running, those furthest behind (lowest step,
// then seq) first as hung, the others as waiting for them; then, when the
// job's `ranks` are known, every one of them with no status in `dir` (it had
// not started, or in a session had not read the request: `watch` knows its
// process from an earlier one), so that a timeout always names who did not
// answer. A launch whose ranks wrote no status at all may be of a workload
// that writes none (dtrace-replay/1.0): nobody is named then; a session's
// ranks always write one.
std::vector<RankFault> hung_ranks(const std::string& dir, const std::string& stderr_dir, int ranks,
                                  const RankWatch& watch, bool session) {
  std::vector<RankFault> running;
  const auto statuses = read_statuses(dir);
  for (const auto& [rank, status] : statuses) {
    if (status.exited || status.done || status.declined || process_end(status.pid).gone) continue;
    running.push_back(fault_of(status, dir, stderr_dir));
  }
  const auto behind = [](const RankFault& x, const RankFault& y) {
    return std::pair{x.step, x.seq} < std::pair{y.step, y.seq};
  };
  std::stable_sort(running.begin(), running.end(), behind);
  for (RankFault& fault : running) {
    fault.kind = behind(running.front(), fault) ? RankFault::Kind::waiting : RankFault::Kind::hung;
  }
  for (int rank = 0; rank < ranks && (session || !statuses.empty()); ++rank) {
    if (statuses.contains(rank)) continue;
    RankStatus status;
    status.rank = rank;
    status.pid = watch.pid_of(rank);
    RankFault fault = fault_of(status, dir, stderr_dir);
    fault.kind = RankFault::Kind::unstarted;
    running.push_back(std::move(fault));
  }
  return running;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

std::string rank_list(const std::vector<const RankFault*>& faults) {
  std::vector<int> ranks;
  for (const RankFault* fault : faults) ranks.push_back(fault->rank);
  return rank_list(ranks);
}

}  // namespace

std::string RankFault::describe() const {
  const std::string who = "rank " + std::to_string(rank);
  const std::string where =
      step >= 0 ? " (at step " + std::to_string(step) + " after " + std::to_string(seq) + " records)" : "";
  // A session's rank that ended between requests failed in none of them.
  const std::string when =
      answered >= 0 ? " after answering request " + std::to_string(answered) + ", before it read the next" : "";
  switch (kind) {
    case Kind::exited:
      // Status 0 is a failure only in a session, where a rank answers a request before it exits.
      return who + " exited with status " + std::to_string(code) +
             (answered >= 0 ? when : code == 0 ? " without answering the request" : "");
    case Kind::signaled:
      return who + " was killed by signal " + std::to_string(code) + " (" + strsignal(code) + ")" + when;
    case Kind::vanished:
      return who + " ended without writing its exit status" + when + " (process " + std::to_string(pid) +
             " is gone: killed by a signal, or it exited without its recorder)";
    case Kind::hung: return who + " hangs" + where;
    case Kind::waiting: return who + " was waiting" + where;
    case Kind::unstarted:
      return pid > 0 ? who + " had not read the request (its process " + std::to_string(pid) + " still ran)"
                     : who + " had not started (it wrote no status)";
    case Kind::declined:
      return who + " declined the request (" + (reason.empty() ? "no reason given" : reason) + ")";
  }
  return who;
}

std::string RankFault::stderr_label() const {
  const std::string who = "rank " + std::to_string(rank);
  const std::string file = "rank" + std::to_string(rank) + ".stderr";
  if (!stderr_file) return who + " wrote no " + file;
  if (stderr_tail.empty()) return who + "'s stderr (" + file + ") is empty";
  return who + "'s stderr";
}

const std::string& Outcome::relevant_stderr() const {
  return faults.empty() ? stderr_tail : faults.front().stderr_tail;
}

std::string Outcome::relevant_stderr_label() const {
  return faults.empty() ? "its stderr" : faults.front().stderr_label();
}

std::string Outcome::command_stderr_label() const {
  if (!faults.empty() && pid > 0 && faults.front().pid == pid) {
    return "rank " + std::to_string(faults.front().rank) + "'s stderr (the replay command's own)";
  }
  return "the launcher's stderr";
}

std::string Outcome::describe() const {
  if (!faults.empty() && timed_out) {
    // Every rank that did not answer is named: those that hang, those that
    // had not started, and those that waited for them.
    std::vector<const RankFault*> named, waiting, silent;
    for (const RankFault& fault : faults) {
      if (fault.kind == RankFault::Kind::waiting) waiting.push_back(&fault);
      else named.push_back(&fault);
      if (fault.kind == RankFault::Kind::unstarted && fault.pid <= 0) silent.push_back(&fault);
    }
    std::string text = "timed out after " + std::to_string(static_cast<long>(seconds)) + " s: ";
    if (silent.size() == faults.size()) return text + "no rank had started (" + rank_list(silent) + " wrote no status)";
    for (std::size_t i = 0; i < named.size(); ++i) text += (i > 0 ? "; " : "") + named[i]->describe();
    if (!waiting.empty()) text += "; " + rank_list(waiting) + " waited for " + (named.size() == 1 ? "it" : "them");
    return text;
  }
  if (!faults.empty() && faults.front().kind == RankFault::Kind::declined) {
    // Some ranks declined a request the others answered: neither a launch
    // nor the session's answer would be the run's (dtrace-fp(5)).
    std::string text;
    for (const RankFault& fault : faults) text += (text.empty() ? "" : "; ") + fault.describe();
    return text + ", which " + rank_list(answered_ranks) + " answered: every rank of the run declines a request, " +
           "or none does";
  }
  if (declined) return "declined: " + *declined;
  if (!faults.empty()) {
    std::string text = faults.front().describe();
    if (faults.size() > 1) {
      std::vector<const RankFault*> others;
      for (std::size_t i = 1; i < faults.size(); ++i) others.push_back(&faults[i]);
      text += " (then " + rank_list(others) + " failed too)";
    }
    return text;
  }
  if (timed_out) return "timed out after " + std::to_string(static_cast<long>(seconds)) + " s";
  if (unanswered) return "exit 0 before every rank answered the request (does the workload serve sessions?)";
  if (signal != 0) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit " + std::to_string(exit_code);
}

namespace {

// The live launches, by tag (as in /proc/PID/environ), with their launcher's
// pid: ending one launch while another runs (bisect keeps a session per side)
// kills none of the other's processes and reaps none of them, its launcher's
// zombie included (its exit status is the other launch's to read).
std::map<std::string, pid_t>& live_launches() {
  static std::map<std::string, pid_t> launches;
  return launches;
}

}  // namespace

// One started workload: its launcher process (in a process group of its
// own), the stderr it writes, the ranks it runs. run() waits for it to exit;
// a session waits, request after request, for its ranks' answers.
class Launch {
 public:
  Launch() = default;
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
  ~Launch() {
    if (pid_ > 0 && !finished_) {
      Outcome ignored;
      finish(ignored);
    }
    if (changes_ >= 0) ::close(changes_);
  }

  // Starts command.argv; an Error when it cannot be started at all.
  Result<void> start(const Command& command) {
    if (command.argv.empty()) return Error{"replay command is empty"};
    // Everything the child needs is built before fork: after it only
    // async-signal-safe calls are allowed.
    auto env = command.env;
    env.emplace_back(kTagVariable, new_tag());
    tag_ = std::string(kTagVariable) + "=" + env.back().second;  // as in /proc/PID/environ
    std::vector<std::string> env_strings = merged_environment(env);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = command.argv;
    for (auto& s : argv_copy) argv.push_back(s.data());
    argv.push_back(nullptr);

    int err_pipe[2];
    int exec_pipe[2];  // reports a failed exec (closed on a successful one)
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      return Error{std::string("cannot create a pipe: ") + std::strerror(errno)};
    }
    if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
      ::close(err_pipe[0]);
      ::close(err_pipe[1]);
      return Error{std::string("cannot create a pipe: ") + std::strerror(errno)};
    }
    // Whatever the replay starts stays below us (orphans come to us, not to
    // init) and is killed at its end; processes below us before it are not its.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    before_ = keys_of(descendants({}));
    start_ = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int e = errno;
      for (int fd : {err_pipe[0], err_pipe[1], exec_pipe[0], exec_pipe[1]}) ::close(fd);
      return Error{std::string("cannot fork: ") + std::strerror(e)};
    }
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
    pid_ = pid;
    live_launches()[tag_] = pid;
    ::setpgid(pid, pid);
    ::close(err_pipe[1]);
    ::close(exec_pipe[1]);
    err_fd_ = err_pipe[0];
    int exec_errno = 0;
    const bool exec_failed = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
    ::close(exec_pipe[0]);
    if (exec_failed) {
      Outcome ignored;
      finish(ignored);
      return Error{"cannot run " + command.argv[0] + ": " + std::strerror(exec_errno)};
    }
    return {};
  }

  // What a wait watches: the ranks' status files in `rank_dir` (none when
  // empty) of the job's `ranks` (0: unknown); for a session's request number
  // `request` (>= 0) it ends once ranks 0 .. ranks-1 all say "done" there,
  // else when the launcher exits.
  struct Watch {
    std::string rank_dir;
    int ranks = 0;
    int request = -1;
    std::string stderr_dir;  // where a rank's stderr is when rank_dir has none (a session's)
    bool session() const { return request >= 0; }
  };
  enum class Ended { exited, answered, failed, timed_out, stopped };

  // Waits until the watched thing happens, a rank fails, `deadline` passes or
  // dtrace is asked to stop; fills outcome's faults, timed_out and stderr_tail.
  Ended wait(const Watch& what, std::chrono::steady_clock::time_point deadline, const StopSignals& stop,
             Outcome& outcome) {
    char buffer[4096];
    auto next_look = std::chrono::steady_clock::now();
    // A session's request is answered the moment the last rank writes "done":
    // the request directory is watched (inotify) so that its answer is read
    // then, not at the next 50 ms look (eight requests waited 60 ms each).
    // Status files rewritten at every scope wake it at most every few ms.
    // One inotify instance for the launch's life, a watch per request: closing
    // an instance waits for the kernel's grace period (8-15 ms measured here),
    // which each request paid when it had one of its own (issue 41).
    if (what.session() && changes_ < 0) changes_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    const int watch =
        what.session() && changes_ >= 0
            ? ::inotify_add_watch(changes_, what.rank_dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY)
            : -1;
    const int changes = watch >= 0 ? changes_ : -1;
    const struct Unwatch {
      int fd, watch;
      ~Unwatch() {
        if (watch >= 0) ::inotify_rm_watch(fd, watch);
      }
    } unwatch{changes, watch};
    while (!exited_) {
      if ((stopped_by_ = stop.received()) != 0) return Ended::stopped;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        outcome.timed_out = true;
        if (!what.rank_dir.empty()) outcome.faults = hung_ranks(what.rank_dir, what.stderr_dir, what.ranks, watch_, what.session());
        return Ended::timed_out;
      }
      // The ranks' status files are read every few polls: a failed rank stops
      // the replay at once, its siblings would otherwise wait for it until the
      // timeout.
      if (!what.rank_dir.empty() && now >= next_look) {
        next_look = now + std::chrono::milliseconds(50);
        outcome.faults = failed_ranks(what.rank_dir, watch_, what.request, what.stderr_dir);
        if (!outcome.faults.empty()) return Ended::failed;
        if (what.session() && all_answered(what.rank_dir, what.ranks, watch_)) return Ended::answered;
      }
      // Waits for stderr and for the end of a watched rank, taken at once so
      // that its time is close to the end's.
      // No longer than until the next look at the status files: after a
      // change in the request directory (the last rank's "done", say) that is
      // 2 ms, where the poll's own 20 ms held every request's answer (issue 41).
      int wait_ms = pipe_open_ ? 20 : 5;
      if (!what.rank_dir.empty()) {
        const auto until = std::chrono::ceil<std::chrono::milliseconds>(next_look - std::chrono::steady_clock::now());
        wait_ms = static_cast<int>(std::clamp<std::int64_t>(until.count(), 0, wait_ms));
      }
      pollfd fds[3] = {{pipe_open_ ? err_fd_ : -1, POLLIN, 0}, {watch_.fd(), POLLIN, 0}, {changes, POLLIN, 0}};
      if (::poll(fds, 3, wait_ms) > 0) {
        if (fds[0].revents != 0) {
          const ssize_t got = ::read(err_fd_, buffer, sizeof buffer);
          if (got > 0) keep_stderr(buffer, got);
          else pipe_open_ = false;
        }
        if (fds[1].revents != 0) watch_.collect();
        if (fds[2].revents != 0) {
          while (::read(changes, buffer, sizeof buffer) > 0) {
          }
          next_look = std::min(next_look, std::chrono::steady_clock::now() + std::chrono::milliseconds(2));
        }
      }
      reap(WNOHANG);
    }
    if (pipe_open_) {  // what it wrote just before exiting
      ::fcntl(err_fd_, F_SETFL, O_NONBLOCK);
      for (ssize_t got; (got = ::read(err_fd_, buffer, sizeof buffer)) > 0;) keep_stderr(buffer, got);
      pipe_open_ = false;
    }
    // A rank whose process is gone while the launcher says all is well failed
    // too; in a session, so does the launcher's exit before every rank answered.
    if (!what.rank_dir.empty()) {
      outcome.faults = failed_ranks(what.rank_dir, watch_, what.request, what.stderr_dir);
      if (!outcome.faults.empty()) return Ended::failed;
      if (what.session() && all_answered(what.rank_dir, what.ranks, watch_)) return Ended::answered;
    }
    return Ended::exited;
  }

  // Whatever it left behind goes with it, in its group or not: no orphans. Fills
  // how the launcher ended (when it was not killed at a timeout) and the time.
  void finish(Outcome& outcome) {
    if (finished_ || pid_ <= 0) return;
    finished_ = true;
    live_launches().erase(tag_);
    ::kill(-pid_, SIGKILL);
    if (!exited_) reap(0);
    kill_tagged(tag_);
    // Another live launch's processes (a session of the other side) are not
    // this one's, though they too started after it: its launcher (a zombie
    // too, which has no environment left) and whatever carries its tag.
    std::set<ProcessKey> keep = before_;
    if (!live_launches().empty()) {
      for (const Process& process : descendants(before_)) {
        const auto environ_file = std::filesystem::path("/proc") / std::to_string(process.pid) / "environ";
        for (const auto& [other, launcher] : live_launches()) {
          if (process.pid == launcher || carries_tag(environ_file, other)) keep.insert({process.pid, process.start});
        }
      }
    }
    kill_descendants(keep);
    if (err_fd_ >= 0) {  // what it wrote since the last read: a rank may have died after writing it
      ::fcntl(err_fd_, F_SETFL, O_NONBLOCK);
      char buffer[4096];
      for (ssize_t got; pipe_open_ && (got = ::read(err_fd_, buffer, sizeof buffer)) > 0;) keep_stderr(buffer, got);
      ::close(err_fd_);
    }
    err_fd_ = -1;
    outcome.seconds = seconds();
    outcome.pid = pid_;
    if (!outcome.timed_out && status_known_) {  // after a rank failed: how the launcher ended when we killed it
      if (WIFEXITED(status_)) outcome.exit_code = WEXITSTATUS(status_);
      if (WIFSIGNALED(status_)) outcome.signal = WTERMSIG(status_);
    }
  }

  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  int stopped_by() const { return stopped_by_; }
  bool exited() const { return exited_; }
  int exit_status() const { return status_; }
  // The last few KiB of its stderr, since the last take.
  std::string stderr_tail() const {
    return stderr_.size() > kTailBytes ? stderr_.substr(stderr_.size() - kTailBytes) : stderr_;
  }
  std::string take_stderr() {
    std::string tail = std::move(stderr_);
    stderr_.clear();
    if (tail.size() > kTailBytes) tail.erase(0, tail.size() - kTailBytes);
    return tail;
  }

 private:
  // Waits for the launcher (`options` WNOHANG: only when it has ended). Its
  // wait status is kept for the rank whose process it is (a job of one
  // process). A launcher that is no longer ours to wait for (ECHILD: reaped
  // elsewhere) has ended too, how is unknown: waiting for it would last forever.
  void reap(int options) {
    const pid_t got = ::waitpid(pid_, &status_, options);
    if (got == pid_) {
      exited_ = status_known_ = true;
      watch_.reaped(pid_, status_);
    } else if (got < 0 && errno == ECHILD) {
      exited_ = true;
    }
  }

  void keep_stderr(const char* buffer, ssize_t got) {
    stderr_.append(buffer, static_cast<std::size_t>(got));
    if (stderr_.size() > 2 * kTailBytes) stderr_.erase(0, stderr_.size() - kTailBytes);
  }

  pid_t pid_ = -1;
  int err_fd_ = -1;
  int changes_ = -1;  // inotify, a session's request directories (wait)
  bool pipe_open_ = true;
  bool exited_ = false;
  bool status_known_ = false;  // status_ is the launcher's wait status
  bool finished_ = false;
  int status_ = 0;
  int stopped_by_ = 0;
  std::string tag_;
  std::string stderr_;
  std::set<ProcessKey> before_;
  std::chrono::steady_clock::time_point start_;
  RankWatch watch_;
};

namespace {

std::chrono::steady_clock::time_point after(std::chrono::steady_clock::time_point from, double seconds) {
  return from + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

Error interrupted(int signal) {
  return Error{std::string("interrupted by signal ") + std::to_string(signal) + " (" + strsignal(signal) +
               "): the workload and its processes were killed"};
}

}  // namespace

Result<Outcome> run(const Command& command) {
  const StopSignals stop_signals;
  Launch launch;
  if (auto started = launch.start(command); !started) return started.error();
  Outcome outcome;
  launch.wait({command.rank_dir, command.ranks, -1, ""}, after(std::chrono::steady_clock::now(), command.timeout_s), stop_signals,
              outcome);
  launch.finish(outcome);
  outcome.stderr_tail = launch.take_stderr();
  if (launch.stopped_by() != 0) return interrupted(launch.stopped_by());
  return outcome;
}

// ---- Replay sessions (dtrace-replay/1.2) ----

struct SessionLaunch::State {
  StopSignals stop;  // for the session's whole life: its processes are killed on a stop, never left
  Launch launch;
  std::string dir;
  int ranks = 1;
  int next = 0;       // the next request's number
  bool over = false;  // failed, timed out, interrupted or ended: serves nothing more
  bool closed = false;  // the end request is sent (close()): end() waits for the exit
};

namespace {

// Writes a session's request number `number` to `dir`/request.`number`.json,
// under another name first and renamed: a request is complete when it exists.
Result<void> post(const std::string& dir, int number, const nlohmann::json& request) {
  const std::string file = dir + "/request." + std::to_string(number) + ".json";
  {
    std::ofstream out(file + ".new");
    out << request.dump() << '\n';
    if (!out.flush()) return Error{file + ": cannot write the request"};
  }
  std::error_code ec;
  std::filesystem::rename(file + ".new", file, ec);
  if (ec) return Error{file + ": cannot write the request: " + ec.message()};
  return {};
}

// A request every rank answered: declined when every rank of the run said
// "declined" (outcome.declined, the reason: one, or each rank's where they
// differ); a failure when only some did (outcome.faults, a fault of kind
// declined per declining rank, its stderr looked for in `stderr_dir` too, with
// the ranks that answered "done").
void read_declines(const std::string& dir, int ranks, const std::string& stderr_dir, Outcome& outcome) {
  const auto statuses = read_statuses(dir);
  std::vector<const RankStatus*> declined;
  std::vector<int> done;
  for (int rank = 0; rank < ranks; ++rank) {
    const auto it = statuses.find(rank);
    if (it == statuses.end()) continue;  // all_answered saw it: not possible
    if (it->second.declined) declined.push_back(&it->second);
    else done.push_back(rank);
  }
  if (declined.empty()) return;
  if (done.empty()) {
    const bool one_reason = std::all_of(declined.begin(), declined.end(), [&](const RankStatus* status) {
      return status->reason == declined.front()->reason;
    });
    std::string reason;
    for (const RankStatus* status : declined) {
      if (one_reason) {
        reason = status->reason;
        break;
      }
      reason += (reason.empty() ? "rank " : "; rank ") + std::to_string(status->rank) + ": " + status->reason;
    }
    outcome.declined = reason.empty() ? "no reason given" : reason;
    return;
  }
  for (const RankStatus* status : declined) {
    RankFault fault = fault_of(*status, dir, stderr_dir);
    fault.kind = RankFault::Kind::declined;
    fault.reason = status->reason;
    outcome.faults.push_back(std::move(fault));
  }
  outcome.answered_ranks = std::move(done);
}

}  // namespace

SessionLaunch::SessionLaunch() : state_(std::make_unique<State>()) {}

SessionLaunch::~SessionLaunch() { end(); }

Result<std::unique_ptr<SessionLaunch>> SessionLaunch::start(const Command& command, const std::string& dir,
                                                            int ranks) {
  std::unique_ptr<SessionLaunch> session(new SessionLaunch());
  State& s = *session->state_;
  s.dir = dir;
  s.ranks = std::max(1, ranks);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error{dir + ": cannot create the session's directory: " + ec.message()};
  Command launched = command;
  launched.env.emplace_back("DTRACE_SESSION", dir);
  if (auto started = s.launch.start(launched); !started) return started.error();
  return session;
}

Result<Outcome> SessionLaunch::request(const std::vector<std::pair<std::string, std::string>>& variables,
                                       const std::string& rank_dir, double timeout_s) {
  State& s = *state_;
  if (s.over || s.closed) return Error{"the replay session has ended"};
  const auto begin = std::chrono::steady_clock::now();
  nlohmann::json request{{"request", s.next}, {"env", nlohmann::json::object()}};
  for (const auto& [name, value] : variables) request["env"][name] = value;
  if (auto posted = post(s.dir, s.next, request); !posted) return posted.error();
  const int number = s.next++;
  Outcome outcome;
  outcome.request = number;
  auto ended = s.launch.wait({rank_dir, s.ranks, number, s.dir}, after(begin, timeout_s), s.stop, outcome);
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (ended == Launch::Ended::answered) {
    outcome.exit_code = 0;
    // Left for a failure: a process that fails between requests may have said why before.
    outcome.stderr_tail = s.launch.stderr_tail();
    read_declines(rank_dir, s.ranks, s.dir, outcome);
    if (outcome.faults.empty()) return outcome;
    ended = Launch::Ended::failed;  // answered by some ranks, declined by others
  }
  // Anything else ends the session: its processes are killed as a launch's.
  s.over = true;
  const double seconds = outcome.seconds;
  s.launch.finish(outcome);
  outcome.seconds = seconds;
  outcome.stderr_tail = s.launch.take_stderr();
  if (ended == Launch::Ended::stopped) return interrupted(s.launch.stopped_by());
  if (ended == Launch::Ended::exited && outcome.faults.empty() && outcome.ok()) {
    // The launcher exited 0 before its ranks answered: not an answer.
    outcome.exit_code = -1;
    outcome.unanswered = true;
  }
  return outcome;
}

void SessionLaunch::close() {
  if (!state_) return;
  State& s = *state_;
  if (s.over || s.closed) return;
  s.closed = static_cast<bool>(post(s.dir, s.next, nlohmann::json{{"request", s.next}, {"end", true}}));
  // One that cannot be sent its end request is not waited for: end() kills it.
  if (!s.closed) s.over = true;
}

void SessionLaunch::end() {
  if (!state_) return;
  State& s = *state_;
  close();
  if (!s.over) {
    s.over = true;
    // Given a moment to exit as a program does; killed with everything it
    // started either way.
    Outcome ignored;
    s.launch.wait({}, std::chrono::steady_clock::now() + std::chrono::seconds(kEndGraceSeconds), s.stop, ignored);
  }
  Outcome ignored;
  s.launch.finish(ignored);
}

int SessionLaunch::requests() const { return state_->next; }

bool SessionLaunch::serving() const { return !state_->over && !state_->closed; }

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
