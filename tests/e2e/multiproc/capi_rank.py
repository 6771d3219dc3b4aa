#!/usr/bin/env python3
"""One rank of a replay started by torchrun, on libdtrace's recorder (the C API
through ctypes, no framework): the recorder writes the rank's log and status
file (rank<r>.status, "exit CODE TIME" as the process exits) in DTRACE_OUT_DIR.

  capi_rank.py LIBDTRACE
Opens a recorder for RANK of WORLD_SIZE and begins the replayed step. Rank
MP_EXIT_RANK then says so on its stderr and exits 3 (sys.exit: the recorder
writes its exit); the others wait, as ranks wait for a peer in a collective,
until they are killed. With MP_OWN_STDERR=1 each rank first sends its stderr
to DTRACE_OUT_DIR/rank<r>.stderr, as dtrace-fp(5) allows.
"""
import ctypes
import os
import sys
import time


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
if os.environ.get("MP_EXIT_RANK") == str(rank):
    print(f"rank {rank}: leaving the replay with status 3", file=sys.stderr, flush=True)
    sys.exit(3)
time.sleep(1000)
