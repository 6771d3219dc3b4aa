#include "recorder/status.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
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

// Every open status file of the process, for the exit handler. Never freed:
// on_exit handlers may run after static destructors of other translation units.
struct OpenFiles {
  std::mutex mutex;
  std::vector<int> fds;
};

OpenFiles& open_files() {
  static auto* files = new OpenFiles;
  return *files;
}

// "exit CODE TIME": TIME, the wall clock in nanoseconds when the process
// exits, orders this rank's failure against the others' (dtrace-fp(5)): a
// file's modification time is too coarse for ranks that fail together, and a
// killed rank, which writes nothing, is ordered by dtrace from its end.
void write_exit_status(int code, void*) {
  OpenFiles& files = open_files();
  std::lock_guard lock(files.mutex);
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  char text[64];
  std::snprintf(text, sizeof text, "exit %d %lld", code,
                static_cast<long long>(now.tv_sec) * 1'000'000'000 + now.tv_nsec);
  for (int fd : files.fds) write_line(fd, text);
}

}  // namespace

StatusFile::StatusFile(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw RecorderError(path + ": cannot create the rank's status file: " + std::strerror(errno));
  }
  static std::once_flag registered;
  std::call_once(registered, [] { ::on_exit(write_exit_status, nullptr); });
  char text[32];
  std::snprintf(text, sizeof text, "running %ld", static_cast<long>(::getpid()));
  write_line(fd_, text);
  OpenFiles& files = open_files();
  std::lock_guard lock(files.mutex);
  files.fds.push_back(fd_);
}

// The descriptor stays open (and registered) for the exit handler: a recorder
// destroyed before the process exits still has its rank's exit to report. Its
// line is left as it was.
StatusFile::~StatusFile() = default;

void StatusFile::progress(std::int64_t step, std::int64_t seq) {
  char text[kLineWidth + 1];
  std::snprintf(text, sizeof text, "running %ld %lld %lld", static_cast<long>(::getpid()),
                static_cast<long long>(step), static_cast<long long>(seq));
  write_line(fd_, text);
}

}  // namespace dtrace::recording
