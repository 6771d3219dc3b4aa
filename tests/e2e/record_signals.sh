#!/bin/bash
# dtrace record outlives CMD: SIGINT sent to dtrace alone (a terminal sends it
# to both) leaves both running; SIGTERM sent to dtrace is passed on to CMD,
# and record then reports how CMD ended.
. "$(dirname "$0")/record-lib.sh"

# A driver starts dtrace with SIGINT at its default (a background job of this
# shell would start with it ignored) and sends the signals once CMD runs.
"$PY" - "$DTRACE" "$WORK" <<'PYEOF' || fail "signals"
import os, signal, subprocess, sys, time

dtrace, work = sys.argv[1], sys.argv[2]
script = """
trap 'echo INT >>got-int' INT
trap 'echo TERM >got-term; exit 0' TERM
touch started
while [ ! -e stop ]; do sleep 0.1; done
"""
with open(f"{work}/stderr", "w") as err:
    p = subprocess.Popen([dtrace, "record", "--out", "runs/s", "--", "sh", "-c", script], cwd=work, stderr=err)
try:
    deadline = time.monotonic() + 120
    while not os.path.exists(f"{work}/started"):
        if time.monotonic() > deadline or p.poll() is not None:
            sys.exit("CMD did not start")
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    time.sleep(0.5)
    if p.poll() is not None:
        sys.exit(f"dtrace ended at SIGINT (status {p.returncode}) while CMD ran")
    if os.path.exists(f"{work}/got-int"):
        sys.exit("SIGINT sent to dtrace alone reached CMD")
    p.send_signal(signal.SIGTERM)
    status = p.wait(timeout=120)
finally:
    open(f"{work}/stop", "w").close()
    if p.poll() is None:
        p.kill()
if not os.path.exists(f"{work}/got-term"):
    sys.exit("SIGTERM was not passed on to CMD")
if status != 2:
    sys.exit(f"dtrace exited {status}, expected 2 (CMD recorded nothing)")
PYEOF
err_has "recorded nothing in runs/s"
echo ok
