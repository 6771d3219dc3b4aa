#include "replay/processes.hpp"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace dtrace::replay {

std::optional<Process> describe_process(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;  // gone meanwhile
  const auto close = text.rfind(')');  // the command name may hold spaces and ')'
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  Process process;
  process.pid = pid;
  std::string state, skip;
  if (!(fields >> state >> process.parent) || state.empty()) return std::nullopt;
  process.state = state[0];
  // Fields 5 (pgrp) to 21 (itrealvalue), then 22: starttime.
  for (int field = 5; field <= 21; ++field) fields >> skip;
  if (!(fields >> process.start)) return std::nullopt;
  // Fields 23 .. 51, then 52: exit_code.
  for (int field = 23; field <= 51; ++field) fields >> skip;
  if (int code = 0; fields >> code) process.wait_status = code;
  return process;
}

// Every process below ours (children, theirs, ...) from /proc, leaving out
// the subtrees of the processes in `skip`.
std::vector<Process> descendants(const std::set<ProcessKey>& skip) {
  namespace fs = std::filesystem;
  std::multimap<pid_t, Process> by_parent;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.size() > 9 || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (auto process = describe_process(static_cast<pid_t>(std::stol(name)))) {
      by_parent.emplace(process->parent, *process);
    }
  }
  std::vector<Process> out;
  std::vector<pid_t> parents{::getpid()};
  while (!parents.empty()) {
    const pid_t parent = parents.back();
    parents.pop_back();
    const auto [first, last] = by_parent.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      if (skip.contains({it->second.pid, it->second.start})) continue;
      out.push_back(it->second);
      parents.push_back(it->second.pid);
    }
  }
  return out;
}

std::set<ProcessKey> keys_of(const std::vector<Process>& processes) {
  std::set<ProcessKey> out;
  for (const Process& process : processes) out.insert({process.pid, process.start});
  return out;
}

// How the process of `pidfd` ended, once its parent has reaped it: the
// kernel keeps a reaped process's wait status for whoever holds a pidfd on it
// (PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux 6.15; the struct and request as
// in linux/pidfd.h, which older headers lack). A launcher that reaps a rank at
// once (a shell's wait, torchrun) otherwise leaves nothing of how it ended.
// nullopt before it is reaped, or on an older kernel.
std::optional<int> reaped_wait_status(int pidfd) {
  struct PidfdInfo {
    std::uint64_t mask, cgroupid;
    std::uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    std::int32_t exit_code;
  };
  static_assert(sizeof(PidfdInfo) == 64, "PIDFD_INFO_SIZE_VER0");
  constexpr unsigned long kGetInfo = _IOWR(0xFF, 11, PidfdInfo);
  constexpr std::uint64_t kInfoExit = 1u << 3;
  PidfdInfo info{};
  info.mask = kInfoExit;
  if (::ioctl(pidfd, kGetInfo, &info) != 0 || (info.mask & kInfoExit) == 0) return std::nullopt;
  return info.exit_code;
}

// Sends SIGKILL to PROCESS, found below ours by a walk of /proc, and to no
// other: a grandchild may be reaped by its parent between the walk and the
// kill and its pid taken by a process that is not ours. A pidfd names one
// process for good; the one it names is PROCESS when its start time is the
// walk's. Without a pidfd (before Linux 5.3: ENOSYS; out of descriptors, with
// a pidfd held on each of many ranks: EMFILE), kill(2): a process left running
// is the worse mistake. Whether the signal was sent (not when the process is
// gone or not ours to signal).
bool kill_exactly(const Process& process) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, process.pid, 0));
  if (fd < 0) return errno != ESRCH && ::kill(process.pid, SIGKILL) == 0;
  const auto now = describe_process(process.pid);
  const bool sent = now && now->start == process.start &&
                    ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0) == 0;
  ::close(fd);
  return sent;
}

// Kills every process below ours but those in `keep` (there before the replay
// started) and reaps them. dtrace is the subreaper of what it starts
// (PR_SET_CHILD_SUBREAPER), so a process that detaches however it can (a new
// session, a double fork, an environment emptied of the replay's tag) stays
// below dtrace until it ends: an orphan comes to dtrace, not to init. Again
// until none is left, since a process may fork while it is being looked for;
// one that cannot be signalled (another user's: EPERM) or that will not die is
// given up after 10 s.
void kill_descendants(const std::set<ProcessKey>& keep) {
  const pid_t self = ::getpid();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    bool left = false;
    for (const Process& process : descendants(keep)) {
      if (process.state == 'X') continue;
      if (process.state == 'Z' && process.parent == self && ::waitpid(process.pid, nullptr, WNOHANG) == process.pid) {
        left = true;  // ours, reaped
        continue;
      }
      // A zombie not yet ours (its parent, killed, passes it on to us), or a
      // leader that ended before its threads, is signalled too: until it is
      // gone, it keeps us going.
      if (kill_exactly(process)) left = true;
    }
    if (!left) return;
    ::usleep(1000);
  }
}


}  // namespace dtrace::replay
