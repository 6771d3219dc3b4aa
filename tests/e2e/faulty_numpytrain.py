#!/usr/bin/env python3
"""examples/numpy/numpytrain.py with a fault planted in its replays
(e2e/python_session_failures):
FAULT=HOW:WHEN:K, HOW exit (os._exit(5)) or segv (SIGSEGV), WHEN in (once it
has read its replay session's request K, or in a launch under --launches) or
after (once it has answered request K, before it reads the next)."""
import os, resource, signal, sys
import dtrace.capi as capi

how, when, k = (os.environ.get("FAULT") or "::-1").split(":")
k = int(k)

def die():
    print(f"faulty: {how} {when} request {k}", file=sys.stderr, flush=True)
    if how == "exit":
        os._exit(5)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind
    os.kill(os.getpid(), signal.SIGSEGV)

served = -1
next_, done_, native_ = capi.Session.next, capi.Session.done, capi.Native.__init__

def next_request(self):
    global served
    more = next_(self)
    served += 1
    if more and when == "in" and served == k:
        die()
    return more

def done(self):
    done_(self)
    if when == "after" and served == k:
        die()

def native(self, *args, **kwargs):
    native_(self, *args, **kwargs)
    if when == "in" and os.environ.get("DTRACE_REPLAY_STEP") and not os.environ.get("DTRACE_SESSION"):
        die()

capi.Session.next, capi.Session.done, capi.Native.__init__ = next_request, done, native
sys.path.insert(0, os.path.join(os.environ["SOURCE_ROOT"], "examples/numpy"))
import numpytrain  # imported, not run: the runs' replay command is this file
sys.exit(numpytrain.main())
