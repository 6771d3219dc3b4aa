// A rank's status file (dtrace-replay/1.1, man/dtrace-fp.5 "Several processes,
// one replay"): the line by which dtrace, watching a replay it started through
// a launcher, tells a rank that is working from one that failed or hangs,
// and by which `dtrace watch` knows a rank of any run it follows has ended
// ("The end of a run").
//
// "running PID STEP SEQ" from the moment the rank's recorder opens, refreshed
// as it makes progress (dtrace names the rank furthest behind when a replay
// hangs), and "exit CODE TIME" when the process exits normally (glibc's on_exit
// hands over the code; TIME orders ranks that fail together). A process killed by a signal cannot write: it leaves
// "running" with a PID that is gone, which dtrace reads as a failure too.
//
// In a replay session (dtrace-replay/1.2) one process answers many requests,
// each in its own directory: a status file is finished with "done PID TIME" when
// the request is answered (finish_status), and from then on the exit handler
// leaves it alone, so the session's exit 0 (or a failure in a later request)
// lands only in the directory of the request being served. A request the
// program declines (it needs a fresh process) is finished with "declined PID
// REASON" instead (decline_status), and dtrace launches it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace dtrace::recording {

class StatusFile {
 public:
  // Creates (or truncates) `path` and writes "running PID". Throws
  // RecorderError when it cannot be created.
  explicit StatusFile(const std::string& path);
  ~StatusFile();
  StatusFile(const StatusFile&) = delete;
  StatusFile& operator=(const StatusFile&) = delete;

  // Rewrites the line as "running PID STEP SEQ". Errors are ignored: a status
  // that cannot be refreshed must not stop the training it describes.
  void progress(std::int64_t step, std::int64_t seq);

  struct Entry;

 private:
  // Shared by every StatusFile of one path in this process (a session writes
  // "running" before the request's Recorder opens the same file).
  std::shared_ptr<Entry> entry_;
};

// <dir>/rank<r>.status: the one place its name is spelled.
std::string status_path(const std::string& dir, int rank);

// Writes "done PID TIME" to `path` (dtrace-fp(5), "Replay sessions") and stops
// every StatusFile of it: no later progress or exit line reaches the file.
// Creates the file when this process has none open. Throws RecorderError
// when it cannot be written.
void finish_status(const std::string& path);

// Writes "declined PID REASON" to `path` (dtrace-fp(5), "Replay sessions":
// the program declines the request, dtrace launches it) and stops every
// StatusFile of it, as finish_status does. The line is longer than a status
// rewritten in place, so it replaces the file whole (a new file renamed over
// it): a reader never sees part of the reason. `reason` is one line. Throws
// RecorderError when it cannot be written.
void decline_status(const std::string& path, const std::string& reason);

}  // namespace dtrace::recording
