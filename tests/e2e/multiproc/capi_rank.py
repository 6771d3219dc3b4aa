#!/usr/bin/env python3
"""One rank of a replay started by torchrun, on libdtrace's recorder (the C API
through ctypes, no framework): the recorder writes the rank's log and status
file (rank<r>.status, "exit CODE TIME" as the process exits) in DTRACE_OUT_DIR.

  capi_rank.py LIBDTRACE
Opens a recorder for RANK of WORLD_SIZE and begins the replayed step. Rank
MP_EXIT_RANK then says so on its stderr and exits 3 (sys.exit: the recorder
writes its exit); the others wait, as ranks wait for a peer in a collective,
until they are killed. With MP_OWN_STDERR=1 each rank first sends its stderr
to DTRACE_OUT_DIR/rank<r>.stderr, as dtrace-fp(5) allows. With
MP_STOP_DTRACE=1 rank MP_EXIT_RANK waits until dtrace watches every rank's
process (a pidfd in its fdinfo), stops dtrace (SIGSTOP) and leaves a helper
that continues it once torchrun has ended the other ranks: when dtrace looks
again all three have failed, rank 1 first, whatever the machine's load.
"""
import ctypes
import os
import signal
import subprocess
import sys
import time

import rank_watch  # beside this file


class RunOptions(ctypes.Structure):
    _fields_ = [
        ("run_dir", ctypes.c_char_p),
        ("run_name", ctypes.c_char_p),
        ("rank", ctypes.c_int32),
        ("world_size", ctypes.c_int32),
        ("level", ctypes.c_int32),
        ("env_json", ctypes.c_char_p),
        ("config_json", ctypes.c_char_p),
        ("replay_argv", ctypes.POINTER(ctypes.c_char_p)),
        ("replay_argc", ctypes.c_size_t),
        ("replay_cwd", ctypes.c_char_p),
        ("replica_groups", ctypes.c_char_p),
        ("replica_per_rank", ctypes.c_char_p),
    ]


rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
out_dir = os.environ["DTRACE_OUT_DIR"]
if os.environ.get("MP_OWN_STDERR") == "1":
    os.dup2(os.open(f"{out_dir}/rank{rank}.stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 2)
lib = ctypes.CDLL(sys.argv[1])
handle = ctypes.c_void_p
lib.dtrace_run_options_init.argtypes = [ctypes.POINTER(RunOptions)]
lib.dtrace_recorder_open.argtypes = [ctypes.POINTER(RunOptions), ctypes.POINTER(handle)]
lib.dtrace_recorder_begin_step.argtypes = [handle, ctypes.c_int64]
lib.dtrace_recorder_last_error.argtypes = [handle]
lib.dtrace_recorder_last_error.restype = ctypes.c_char_p
options = RunOptions()
lib.dtrace_run_options_init(ctypes.byref(options))
options.run_dir = b"unused-outside-a-replay"
options.rank, options.world_size, options.level = rank, world, 1
recorder = handle()
if lib.dtrace_recorder_open(ctypes.byref(options), ctypes.byref(recorder)) != 0:
    sys.exit(f"rank {rank}: {lib.dtrace_recorder_last_error(recorder).decode()}")
lib.dtrace_recorder_begin_step(recorder, int(os.environ.get("DTRACE_REPLAY_STEP", "0")))


def dtrace_pid():
    """The dtrace running the replay: the nearest ancestor named dtrace."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
        if text[text.index("(") + 1 : text.rindex(")")] == "dtrace":
            return pid
        pid = int(text[text.rindex(")") + 2 :].split()[1])
    sys.exit(f"rank {rank}: no dtrace above this process")


def stop_dtrace_until_the_others_end():
    dtrace = dtrace_pid()
    pids = rank_watch.wait_until_watched(dtrace, out_dir, world)
    os.kill(dtrace, signal.SIGSTOP)
    others = [p for r, p in enumerate(pids) if r != rank]
    helper = (
        "import os, signal, sys, time\n"
        "def gone(pid):\n"
        "    try:\n"
        "        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] in 'ZX'\n"
        "    except OSError:\n"
        "        return True\n"
        "while not all(gone(p) for p in sys.argv[2:]):\n"
        "    time.sleep(0.01)\n"
        "os.kill(int(sys.argv[1]), signal.SIGCONT)\n"
    )
    subprocess.Popen([sys.executable, "-c", helper, str(dtrace), *others], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


if os.environ.get("MP_EXIT_RANK") == str(rank):
    if os.environ.get("MP_STOP_DTRACE") == "1":
        stop_dtrace_until_the_others_end()
    print(f"rank {rank}: leaving the replay with status 3", file=sys.stderr, flush=True)
    sys.exit(3)
time.sleep(1000)
