// Runs a workload for a replay (dtrace-fp(5), REPLAY PROTOCOL): argv executed directly (no
// shell), extra variables added to the environment, a timeout after which the
// whole process group is killed, and the tail of stderr kept for the report.
// When it ends, every process it started is killed: its process group, any
// process that left the group but still carries the replay's DTRACE_REPLAY_TAG
// variable, and every process left below ours (we are the subreaper of what we
// start, so one that detached and cleared its environment is still below us);
// processes below ours before the replay started are left alone.
//
// A job of several processes started through its own launcher (torchrun,
// mpirun, a script) is watched through the status files its ranks write in
// `rank_dir` (dtrace-replay/1.1, man/dtrace-fp.5 "Several processes, one
// replay"): the first rank that fails stops the whole replay at once, and at a
// timeout the rank furthest behind is named as the one that hangs. Several
// failed ranks are ordered by when they failed: a written exit's time, and the
// order in which the watched ranks' processes ended (pidfds).
#pragma once

#include <cstdint>
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
  std::string rank_dir;   // where the ranks leave rank<r>.status and rank<r>.stderr; empty: none
};

// A rank of the job that failed, or was still running at the timeout.
struct RankFault {
  enum class Kind {
    exited,    // wrote "exit CODE" with CODE != 0, or its zombie said so
    signaled,  // its zombie says a signal ended it
    vanished,  // its process is gone without writing how it ended
    hung,      // still running at the timeout, furthest behind
    waiting,   // still running at the timeout, further on (waiting for a hung rank)
  };
  int rank = 0;
  Kind kind = Kind::exited;
  int code = 0;  // the exit code, or the signal
  long pid = 0;
  std::int64_t step = -1, seq = -1;  // its last progress, when it said
  std::string stderr_tail;           // the end of rank<r>.stderr, when it wrote one
  bool stderr_file = false;          // rank<r>.stderr exists (empty or not)
  std::string describe() const;      // "rank 1 exited with status 3", ...
  // "rank 1's stderr", "rank 1's stderr (rank1.stderr) is empty", "rank 1
  // wrote no rank1.stderr": whose stderr_tail it is, or why there is none.
  std::string stderr_label() const;
};

struct Outcome {
  int exit_code = -1;      // the exit status when it exited
  int signal = 0;          // the signal that ended it, 0 if it exited
  bool timed_out = false;  // we killed it at the timeout
  double seconds = 0;
  std::string stderr_tail;  // the last few KiB it wrote to stderr
  // Ranks that failed (the first is the one that failed first; dtrace stopped
  // the replay then) or, after a timeout, that were still running (the hung
  // ones first). Empty for a workload that writes no status files.
  std::vector<RankFault> faults;
  bool ok() const { return !timed_out && signal == 0 && exit_code == 0 && faults.empty(); }
  // "exit 3", "killed by signal 11", "timed out after 5 s", "rank 1 exited with
  // status 3 (ranks 0, 2 failed after it)", "timed out after 5 s: rank 1 hangs ..."
  std::string describe() const;
  // The stderr that explains it: the first faulty rank's own (empty when it
  // wrote none: never the launcher's in its place), else the command's.
  const std::string& relevant_stderr() const;
  // Whose relevant_stderr() it is: "rank 1's stderr" or "its stderr".
  std::string relevant_stderr_label() const;
};

// An Error only when the command could not be started at all, or when dtrace
// was asked to stop (SIGINT, SIGTERM, SIGHUP) while it ran: the workload is
// killed and the caller unwinds, removing its temporary files.
Result<Outcome> run(const Command& command);

// Splits a command line the way a POSIX shell splits words (spaces, single and
// double quotes, backslash), without expanding anything: `--replay 'ARGV'`.
Result<std::vector<std::string>> split_words(const std::string& text);

}  // namespace dtrace::replay
