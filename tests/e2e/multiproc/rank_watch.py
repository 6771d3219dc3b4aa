"""Shared by the test ranks worker.py and capi_rank.py: wait until dtrace
watches every rank's process (a pidfd on it, which the replay runner opens
once it reads the rank's "running PID" status line), so that a failure planted
after that is ordered by the kernel, whatever the machine's load."""
import os
import time


def running_pids(run_dir, world):
    """Each rank's pid, once every rank's status file says "running PID"."""
    while True:
        pids = []
        for r in range(world):
            try:
                words = open(f"{run_dir}/rank{r}.status").read().split()
            except OSError:
                words = []
            if len(words) >= 2 and words[0] == "running":
                pids.append(words[1])
        if len(pids) == world:
            return pids
        time.sleep(0.01)


def wait_until_watched(dtrace_pid, run_dir, world):
    """Each rank's pid, once dtrace holds a pidfd on every rank's process (its
    fdinfo's "Pid:" lines)."""
    pids = running_pids(run_dir, world)
    fdinfo = f"/proc/{dtrace_pid}/fdinfo"
    while True:
        watched = set()
        for fd in os.listdir(fdinfo):
            try:
                watched.update(line.split()[1] for line in open(f"{fdinfo}/{fd}") if line.startswith("Pid:"))
            except (OSError, IndexError):
                pass
        if set(pids) <= watched:
            return pids
        time.sleep(0.01)
