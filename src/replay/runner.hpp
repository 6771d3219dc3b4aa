// Runs a workload for a replay (dtrace-fp(5), REPLAY PROTOCOL): argv executed directly (no
// shell), extra variables added to the environment, a timeout after which the
// whole process group is killed, and the tail of stderr kept for the report.
// When it ends, every process it started is killed: its process group, and any
// process that left the group but still carries the replay's DTRACE_REPLAY_TAG
// variable (a process that clears its own environment escapes this).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "util/result.hpp"

namespace dtrace::replay {

struct Command {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing in) ours
  std::string cwd;        // empty: ours
  double timeout_s = 600;
};

struct Outcome {
  int exit_code = -1;      // the exit status when it exited
  int signal = 0;          // the signal that ended it, 0 if it exited
  bool timed_out = false;  // we killed it at the timeout
  double seconds = 0;
  std::string stderr_tail;  // the last few KiB it wrote to stderr
  bool ok() const { return !timed_out && signal == 0 && exit_code == 0; }
  std::string describe() const;  // "exit 3", "killed by signal 11", "timed out after 5 s"
};

// An Error only when the command could not be started at all, or when dtrace
// was asked to stop (SIGINT, SIGTERM, SIGHUP) while it ran: the workload is
// killed and the caller unwinds, removing its temporary files.
Result<Outcome> run(const Command& command);

// Splits a command line the way a POSIX shell splits words (spaces, single and
// double quotes, backslash), without expanding anything: `--replay 'ARGV'`.
Result<std::vector<std::string>> split_words(const std::string& text);

}  // namespace dtrace::replay
