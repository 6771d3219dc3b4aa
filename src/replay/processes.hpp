// The processes a replay starts, as /proc shows them: what runner.cpp needs
// to tell how a rank ended and to end every process a replay left behind
// (dtrace(1): every process a replay starts is killed at its end).
#pragma once

#include <sys/types.h>

#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace dtrace::replay {

// A process, from its /proc/PID/stat (describe_process, the one reader of
// that file in dtrace).
struct Process {
  pid_t pid = 0;
  pid_t parent = 0;
  char state = '?';
  unsigned long long start = 0;  // clock ticks after boot: a pid and it name one process
  std::optional<int> wait_status;  // a zombie's, as waitpid gives it (field 52, exit_code)
};

// A process as /proc/PID/stat describes it now; nullopt when it is gone.
std::optional<Process> describe_process(pid_t pid);

// How the process a pidfd names ended, once its parent reaped it (Linux
// 6.15, PIDFD_INFO_EXIT); nullopt before that or on an older kernel.
std::optional<int> reaped_wait_status(int pidfd);

using ProcessKey = std::pair<pid_t, unsigned long long>;  // pid and start time

// Every process below ours (children, theirs, ...) from /proc, leaving out
// the subtrees of the processes in `skip`.
std::vector<Process> descendants(const std::set<ProcessKey>& skip);
std::set<ProcessKey> keys_of(const std::vector<Process>& processes);

// Sends SIGKILL to `process`, found by a walk of /proc, and to no other: its
// pid may meanwhile name another process (its start time then differs).
// Whether the signal was sent.
bool kill_exactly(const Process& process);

// Kills every process below ours but those in `keep` and reaps them.
void kill_descendants(const std::set<ProcessKey>& keep);

}  // namespace dtrace::replay
