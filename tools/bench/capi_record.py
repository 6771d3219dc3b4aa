"""The cost of one recorded tensor through the recorder's C API from Python.

Usage: /usr/bin/python3 tools/bench/capi_record.py BUILD_DIR [REPEATS]

A PyTorch binding (ctypes over libdtrace) pays, per recorded tensor: building
the ctypes arguments (the shape array), crossing into C, the recorder's checks
and line, and the fingerprint. This script times, in the same process and run,
interleaved, medians of REPEATS (default 7) batches:
  bare     a ctypes call that does nothing (dtrace_version): the floor;
  hash     dtrace_fingerprint_host of the tensor's bytes: the work itself;
  record   dtrace_recorder_tensor of the same bytes (shape array built per
           call, as a binding does), into a DTRACE_OUT log, end_step every
           1,000 records (the line flush included);
  digest   dtrace_recorder_tensor_digest with a precomputed digest (what a
           binding that hashed on the device pays on the host);
for tensors of 256 B, 64 KiB and 4 MiB, and prints nanoseconds per call and
record / hash, record / bare. Times are the thread's CPU time
(time.thread_time_ns), so a machine shared with other jobs slows the figures
less than wall-clock time would; the log's writes are counted in the system
time they take.
"""
import ctypes
import os
import shutil
import statistics
import sys
import tempfile
import time

KERNEL, OUT = 2, 1


class RunOptions(ctypes.Structure):
    _fields_ = [("run_dir", ctypes.c_char_p), ("run_name", ctypes.c_char_p),
                ("rank", ctypes.c_int32), ("world_size", ctypes.c_int32),
                ("level", ctypes.c_int32), ("env_json", ctypes.c_char_p),
                ("config_json", ctypes.c_char_p),
                ("replay_argv", ctypes.POINTER(ctypes.c_char_p)),
                ("replay_argc", ctypes.c_size_t), ("replay_cwd", ctypes.c_char_p),
                # DTRACE_1.1: ctypes reaches the newest symbol versions (recorder.h)
                ("replica_groups", ctypes.c_char_p), ("replica_per_rank", ctypes.c_char_p)]


def main():
    build = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    lib = ctypes.CDLL(os.path.join(build, "src/capi/libdtrace.so"))
    handle = ctypes.c_void_p
    lib.dtrace_version.restype = ctypes.c_char_p
    lib.dtrace_fingerprint_host.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.POINTER(ctypes.c_uint64)]
    lib.dtrace_run_options_init.argtypes = [ctypes.POINTER(RunOptions)]
    lib.dtrace_recorder_open_with.argtypes = [ctypes.POINTER(RunOptions),
                                              ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                                              ctypes.POINTER(handle)]
    lib.dtrace_recorder_close.argtypes = [handle]
    lib.dtrace_recorder_begin_step.argtypes = [handle, ctypes.c_int64]
    lib.dtrace_recorder_end_step.argtypes = [handle]
    lib.dtrace_recorder_last_error.argtypes = [handle]
    lib.dtrace_recorder_last_error.restype = ctypes.c_char_p
    args = [handle, ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p,
            ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t]
    lib.dtrace_recorder_tensor.argtypes = args + [ctypes.c_void_p, ctypes.c_size_t]
    lib.dtrace_recorder_tensor_digest.argtypes = args + [ctypes.c_uint64, ctypes.c_void_p,
                                                         ctypes.c_size_t]

    scratch = tempfile.mkdtemp(prefix="capi-bench-")
    out = os.path.join(scratch, "bench.jsonl")
    options = RunOptions()
    lib.dtrace_run_options_init(ctypes.byref(options))
    options.level = KERNEL
    variables = (ctypes.c_char_p * 1)(f"DTRACE_OUT={out}".encode())
    rec = handle()
    if lib.dtrace_recorder_open_with(ctypes.byref(options), variables, 1, ctypes.byref(rec)) != 0:
        sys.exit(lib.dtrace_recorder_last_error(rec).decode())
    state = {"step": 0, "in_step": 0}

    def step_guard():
        if state["in_step"] == 1000:
            lib.dtrace_recorder_end_step(rec)
            state["in_step"] = 0
        if state["in_step"] == 0:
            lib.dtrace_recorder_begin_step(rec, state["step"])
            state["step"] += 1
        state["in_step"] += 1

    print(f"libdtrace {lib.dtrace_version().decode()}, {repeats} batches each, medians of CPU time")
    print(f"{'bytes':>9} {'calls':>6} {'bare ns':>9} {'hash ns':>9} {'record ns':>10} "
          f"{'digest ns':>10} {'record/hash':>12} {'record/bare':>12}")
    for nbytes in (256, 65536, 4 << 20):
        elements = nbytes // 4
        buffer = (ctypes.c_float * elements)(*[float(i % 251) for i in range(elements)])
        address = ctypes.addressof(buffer)
        dims = (16, elements // 16)
        calls = max(20, min(5000, (64 << 20) // nbytes // 4))
        out_digest = ctypes.c_uint64()

        def bare():
            for _ in range(calls):
                lib.dtrace_version()

        def hash_():
            for _ in range(calls):
                lib.dtrace_fingerprint_host(address, nbytes, ctypes.byref(out_digest))

        def record():
            for _ in range(calls):
                step_guard()
                shape = (ctypes.c_int64 * 2)(*dims)
                code = lib.dtrace_recorder_tensor(rec, KERNEL, b"gemm", OUT, b"y", b"f32", shape,
                                                  2, address, nbytes)
                if code != 0:
                    sys.exit(lib.dtrace_recorder_last_error(rec).decode())

        def digest():
            for _ in range(calls):
                step_guard()
                shape = (ctypes.c_int64 * 2)(*dims)
                code = lib.dtrace_recorder_tensor_digest(rec, KERNEL, b"gemm", OUT, b"y", b"f32",
                                                         shape, 2, 0x1234, None, nbytes)
                if code != 0:
                    sys.exit(lib.dtrace_recorder_last_error(rec).decode())

        times = {name: [] for name in ("bare", "hash", "record", "digest")}
        for _ in range(repeats):
            for name, body in (("bare", bare), ("hash", hash_), ("record", record),
                               ("digest", digest)):
                start = time.thread_time_ns()
                body()
                times[name].append((time.thread_time_ns() - start) / calls)
        m = {name: statistics.median(values) for name, values in times.items()}
        print(f"{nbytes:>9} {calls:>6} {m['bare']:>9.0f} {m['hash']:>9.0f} {m['record']:>10.0f} "
              f"{m['digest']:>10.0f} {m['record'] / m['hash']:>12.2f} "
              f"{m['record'] / m['bare']:>12.1f}")
    lib.dtrace_recorder_end_step(rec)
    lib.dtrace_recorder_close(rec)
    print(f"log: {os.path.getsize(out)} bytes")
    shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
