#!/usr/bin/env python3
"""launch.py N COMMAND...: a plain launcher, as mpirun or a site's own script
would be: starts COMMAND N times with RANK=0..N-1, WORLD_SIZE=N and
LOCAL_RANK set, waits, and exits with the first failure's status (a signal
as 128+signal) after stopping the other ranks, or 0.

dtrace replays a job of several processes through its launcher (dtrace-fp(5),
"Several processes"): name it in DTRACE_PYTHON_LAUNCHER and the dtrace
package puts it in front of each rank's command in the replay command."""
import os
import signal
import subprocess
import sys
import time


def main(argv):
    if len(argv) < 3 or not argv[1].isdigit() or int(argv[1]) < 1:
        print("usage: launch.py N COMMAND...", file=sys.stderr)
        return 2
    n, command = int(argv[1]), argv[2:]
    ranks = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r))
        ranks.append(subprocess.Popen(command, env=env))
    status = 0
    running = list(ranks)
    while running:
        for p in list(running):
            code = p.poll()
            if code is None:
                continue
            running.remove(p)
            if code != 0 and status == 0:
                status = code if code > 0 else 128 - code
                for other in running:  # a failed rank stops the job, as launchers do
                    other.send_signal(signal.SIGTERM)
        time.sleep(0.02)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
