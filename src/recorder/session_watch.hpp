// How a replay session's workload waits for its next request (session.cpp):
// woken by inotify on the session's directory the moment dtrace renames a
// request into place, and looking again at an interval anyway, for a
// directory whose changes inotify does not see (written from another host on
// a network filesystem) or when inotify cannot be had (its limits reached).
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace dtrace::recording {

class DirectoryWatch {
 public:
  // Watches `dir` (created files and files renamed into it) from now on;
  // watching() is false when inotify could not be set up.
  explicit DirectoryWatch(std::string dir);
  ~DirectoryWatch();
  DirectoryWatch(const DirectoryWatch&) = delete;
  DirectoryWatch& operator=(const DirectoryWatch&) = delete;

  bool watching() const { return fd_ >= 0; }

  // How wait_for() found the file, or that it did not.
  enum class Found {
    present,   // there at the first look
    event,     // seen after a change in the directory woke the wait
    look,      // seen at a look after `look` passed without a change
    timed_out  // not there after `timeout`
  };
  // Waits until `dir`/`name` exists, for ever when `timeout` is unset.
  Found wait_for(const std::string& name, std::optional<std::chrono::milliseconds> timeout,
                 std::chrono::milliseconds look);

 private:
  std::string dir_;
  int fd_ = -1;
};

}  // namespace dtrace::recording
