#include "recorder/status.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "dtrace/recorder.hpp"

namespace dtrace::recording {

namespace {

// The line is rewritten in place at a fixed width, so a reader never sees the
// tail of a longer earlier line; one pwrite of a few dozen bytes is what a
// reader racing it sees whole or (rarely) not yet, and it then reads again.
constexpr std::size_t kLineWidth = 63;

void write_line(int fd, const char* text) {
  char line[kLineWidth + 1];
  std::memset(line, ' ', kLineWidth);
  const std::size_t length = std::min(std::strlen(text), kLineWidth);
  std::memcpy(line, text, length);
  line[kLineWidth] = '\n';
  (void)!::pwrite(fd, line, sizeof line, 0);
}

std::string normal(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

std::int64_t now_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// getpid() for each progress line without its system call (a step and each
// scope pushed write one): read once, and again in a child after fork(),
// whose pid is another (pthread_atfork), so a line always names its writer.
std::atomic<long> cached_pid{0};

void forget_pid() { cached_pid.store(0, std::memory_order_relaxed); }

long process_id() {
  long pid = cached_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    static std::once_flag registered;
    std::call_once(registered, [] { ::pthread_atfork(nullptr, nullptr, forget_pid); });
    pid = static_cast<long>(::getpid());
    cached_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

}  // namespace

struct StatusFile::Entry {
  std::string key;  // the normalised path
  int fd = -1;
  // Set once the file says "done": nothing writes it again.
  std::atomic<bool> finished{false};
  ~Entry() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

// Every unfinished status file of the process, for the exit handler. Never
// freed: on_exit handlers may run after static destructors of other
// translation units.
struct OpenFiles {
  std::mutex mutex;
  std::vector<std::shared_ptr<StatusFile::Entry>> entries;
};

OpenFiles& open_files() {
  static auto* files = new OpenFiles;
  return *files;
}

// "exit CODE TIME PID": TIME, the wall clock in nanoseconds when the process
// exits, orders this rank's failure against the others' (dtrace-fp(5)): a
// file's modification time is too coarse for ranks that fail together, and a
// killed rank, which writes nothing, is ordered by dtrace from its end. PID
// names the process that failed when dtrace never read its "running" line.
void write_exit_status(int code, void*) {
  OpenFiles& files = open_files();
  std::lock_guard lock(files.mutex);
  char text[64];
  std::snprintf(text, sizeof text, "exit %d %lld %ld", code, static_cast<long long>(now_ns()),
                static_cast<long>(::getpid()));
  for (const auto& entry : files.entries) {
    if (!entry->finished) write_line(entry->fd, text);
  }
}

}  // namespace

std::string status_path(const std::string& dir, int rank) {
  return (std::filesystem::path(dir) / ("rank" + std::to_string(rank) + ".status")).string();
}

StatusFile::StatusFile(const std::string& path) {
  static std::once_flag registered;
  std::call_once(registered, [] { ::on_exit(write_exit_status, nullptr); });
  const std::string key = normal(path);
  OpenFiles& files = open_files();
  std::lock_guard lock(files.mutex);
  for (const auto& entry : files.entries) {
    if (entry->key == key) entry_ = entry;
  }
  if (!entry_) {
    auto entry = std::make_shared<Entry>();
    entry->key = key;
    entry->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (entry->fd < 0) {
      throw RecorderError(path + ": cannot create the rank's status file: " + std::strerror(errno));
    }
    files.entries.push_back(entry);
    entry_ = std::move(entry);
  }
  char text[32];
  std::snprintf(text, sizeof text, "running %ld", process_id());
  write_line(entry_->fd, text);
}

// The descriptor stays open (and registered) for the exit handler: a recorder
// destroyed before the process exits still has its rank's exit to report. Its
// line is left as it was.
StatusFile::~StatusFile() = default;

void StatusFile::progress(std::int64_t step, std::int64_t seq) {
  if (entry_->finished) return;
  char text[kLineWidth + 1];
  std::snprintf(text, sizeof text, "running %ld %lld %lld", process_id(),
                static_cast<long long>(step), static_cast<long long>(seq));
  write_line(entry_->fd, text);
}

namespace {

// Takes `path`'s status file off the exit handler's list and marks it
// finished: nothing this process does later (a progress, its exit) writes it
// again. Null when this process has none open.
std::shared_ptr<StatusFile::Entry> take_entry(const std::string& path) {
  const std::string key = normal(path);
  OpenFiles& files = open_files();
  std::lock_guard lock(files.mutex);
  auto it = std::find_if(files.entries.begin(), files.entries.end(),
                         [&](const auto& e) { return e->key == key; });
  if (it == files.entries.end()) return nullptr;
  std::shared_ptr<StatusFile::Entry> entry = *it;
  files.entries.erase(it);
  entry->finished = true;
  return entry;
}

}  // namespace

void finish_status(const std::string& path) {
  const std::shared_ptr<StatusFile::Entry> entry = take_entry(path);
  char text[64];
  // "done PID TIME" (dtrace-fp(5)): the pid keeps this process watched between
  // requests, as "running PID" did during one.
  std::snprintf(text, sizeof text, "done %ld %lld", static_cast<long>(::getpid()),
                static_cast<long long>(now_ns()));
  if (entry) {
    write_line(entry->fd, text);
    return;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw RecorderError(path + ": cannot write the rank's status file: " + std::strerror(errno));
  }
  write_line(fd, text);
  ::close(fd);
}

void decline_status(const std::string& path, const std::string& reason) {
  // Off the exit handler's list first: after the rename its descriptor names
  // a file nobody reads, and the next request's exit must not land here.
  (void)take_entry(path);
  // "declined PID REASON" (dtrace-fp(5)): the pid keeps this process watched
  // until the next request, as "done PID" does.
  const std::string line = "declined " + std::to_string(::getpid()) + " " + reason + "\n";
  const std::filesystem::path file(path);
  // A name dtrace does not read as a rank's status (it starts with a dot).
  const std::string temporary =
      (file.parent_path() / ("." + file.filename().string() + "." + std::to_string(::getpid()))).string();
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool written = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int error = errno;
  if (fd >= 0) written = ::close(fd) == 0 && written;
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int e = written ? errno : error;
    ::unlink(temporary.c_str());
    throw RecorderError(path + ": cannot write the rank's status file: " + std::strerror(e));
  }
}

}  // namespace dtrace::recording
