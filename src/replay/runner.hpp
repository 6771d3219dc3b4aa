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
// timeout the rank furthest behind is named as the one that hangs (and, with
// the job's ranks known, every rank that had not started). How a rank that
// wrote no exit ended is read from its zombie, from dtrace's own wait when the
// command is the rank's process, or from the pidfd dtrace held on it once its
// launcher reaped it (Linux 6.15). Several
// failed ranks are ordered by when they failed: a written exit's time, and the
// order in which the watched ranks' processes ended (pidfds).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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
  // How many ranks write status files in rank_dir (0: unknown). Known, every
  // rank that has not finished at a timeout is named, one that never wrote a
  // status included.
  int ranks = 0;
};

// A rank of the job that failed, or was still running at the timeout.
struct RankFault {
  enum class Kind {
    exited,    // wrote "exit CODE" with CODE != 0, or its zombie said so
    signaled,  // its zombie says a signal ended it
    vanished,  // its process is gone without writing how it ended
    hung,      // still running at the timeout, furthest behind
    waiting,   // still running at the timeout, further on (waiting for a hung rank)
    unstarted,  // at the timeout, no status of it in the replay's (the request's) directory
    declined,   // a session's rank declined a request that other ranks answered
  };
  int rank = 0;
  Kind kind = Kind::exited;
  int code = 0;  // the exit code, or the signal
  long pid = 0;                      // its process, when dtrace learnt it
  std::int64_t step = -1, seq = -1;  // its last progress, when it said
  std::string reason;                // a decline's (Kind::declined)
  // In a session: its process ended after answering this request and before
  // it read the next (-1: it ended in the request that failed).
  int answered = -1;
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
  // A session's launcher exited 0 before every rank answered the request.
  bool unanswered = false;
  int request = -1;  // a session's request number; -1 for a launch
  // A session's request that every rank declined ("declined PID REASON",
  // dtrace-fp(5) "Replay sessions"): the reason. Not ok(): the caller
  // launches the request instead, and the session serves the next.
  std::optional<std::string> declined;
  // With faults of Kind::declined (a failure): the ranks that answered the
  // request the others declined.
  std::vector<int> answered_ranks;
  double seconds = 0;
  std::string stderr_tail;  // the last few KiB it wrote to stderr
  long pid = 0;             // the replay command's process
  // Ranks that failed (the first is the one that failed first; dtrace stopped
  // the replay then) or, after a timeout, that were still running (the hung
  // ones first). Empty for a workload that writes no status files.
  std::vector<RankFault> faults;
  bool ok() const {
    return !timed_out && !unanswered && !declined && signal == 0 && exit_code == 0 && faults.empty();
  }
  // "exit 3", "killed by signal 11", "timed out after 5 s", "rank 1 exited with
  // status 3 (ranks 0, 2 failed after it)", "timed out after 5 s: rank 1 hangs ...",
  // "declined: REASON", "rank 1 declined the request (REASON), which rank 0 answered: ..."
  std::string describe() const;
  // The stderr that explains it: the first faulty rank's own (empty when it
  // wrote none: never the launcher's in its place), else the command's.
  const std::string& relevant_stderr() const;
  // Whose relevant_stderr() it is: "rank 1's stderr" or "its stderr".
  std::string relevant_stderr_label() const;
  // Whose stderr_tail is: "the launcher's stderr", or, when the replay command
  // is itself the first faulty rank's process (a job of one process, no
  // launcher), "rank 0's stderr (the replay command's own)".
  std::string command_stderr_label() const;
};

// An Error only when the command could not be started at all, or when dtrace
// was asked to stop (SIGINT, SIGTERM, SIGHUP) while it ran: the workload is
// killed and the caller unwinds, removing its temporary files.
Result<Outcome> run(const Command& command);

// A replay session (man/dtrace-fp.5, "Replay sessions", dtrace-replay/1.2):
// one launch of the workload that serves requests, each the variables a
// launch of the same replay would get, one after another. Its processes are
// watched as a launch's are, and killed with everything they started when the
// session ends, however it ends (a failed or timed-out request ends it).
class SessionLaunch {
 public:
  // Starts `command` with DTRACE_SESSION=`dir` (created; its requests go
  // there); `ranks` is how many ranks answer each request (the run's world
  // size). An Error when it cannot be started at all.
  static Result<std::unique_ptr<SessionLaunch>> start(const Command& command, const std::string& dir, int ranks);
  ~SessionLaunch();  // end()
  SessionLaunch(const SessionLaunch&) = delete;
  SessionLaunch& operator=(const SessionLaunch&) = delete;

  // Sends one request and waits until every rank wrote "done" (or
  // "declined") in `rank_dir` (its DTRACE_OUT_DIR), one failed, the launcher
  // exited, or `timeout_s` passed. A request every rank declined is an
  // Outcome with `declined` set, the session still serving; one that some
  // ranks declined and others answered is a failure (faults of
  // Kind::declined) and ends the session. An Outcome as a launch's (ok() when answered; seconds is the
  // request's; request its number; stderr_tail the end of what the session's
  // command wrote so far, earlier requests' included, since a rank that fails
  // between requests may have said why before); an Error when dtrace was
  // asked to stop (the session is then killed) or the session is over.
  Result<Outcome> request(const std::vector<std::pair<std::string, std::string>>& variables,
                          const std::string& rank_dir, double timeout_s);
  // False once a request failed or timed out, or after close() or end(): it serves no more.
  bool serving() const;
  // Sends the end request without waiting for the workload to exit, so that
  // sessions closed together exit together (end() one after the other waited
  // for each in turn; issue 41); end() then waits. Idempotent.
  void close();
  // The end request (unless close() sent it), a moment for the workload to
  // exit (none when it has already: another launch's end leaves it to this
  // one), then every process of the session killed. Idempotent.
  void end();
  // Requests sent so far (the end request not counted).
  int requests() const;

 private:
  SessionLaunch();
  struct State;
  std::unique_ptr<State> state_;
};

// Splits a command line the way a POSIX shell splits words (spaces, single and
// double quotes, backslash), without expanding anything: `--replay 'ARGV'`.
Result<std::vector<std::string>> split_words(const std::string& text);

}  // namespace dtrace::replay
