"""The recorder's C API through ctypes, as a Python binding drives it.

Usage: recorder_smoke.py LIBDTRACE RUN_DIR

Opens a recorder for RUN_DIR, records one step (a tensor in host memory, a
tensor by a digest computed with dtrace_fingerprint_host, a scalar by its
bits), closes it, and checks that bad calls return error codes with messages.
`dtrace check RUN_DIR` then certifies the log (tests/e2e/capi_python.sh).
Exit 0 on success; a failed check raises.
"""
import ctypes
import struct
import sys

OK, INVALID_ARGUMENT, ENVIRONMENT, ORDER = 0, 1, 7, 9
STEP, LAYER, KERNEL = 0, 1, 2
IN, OUT, STATE, METRIC = 0, 1, 2, 3


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
        # DTRACE_1.1: ctypes reaches the newest symbol versions (recorder.h, Versions)
        ("replica_groups", ctypes.c_char_p),
        ("replica_per_rank", ctypes.c_char_p),
    ]


def load(path):
    lib = ctypes.CDLL(path)
    handle = ctypes.c_void_p
    lib.dtrace_run_options_init.argtypes = [ctypes.POINTER(RunOptions)]
    lib.dtrace_run_options_init.restype = None
    lib.dtrace_recorder_open_with.argtypes = [ctypes.POINTER(RunOptions),
                                              ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                                              ctypes.POINTER(handle)]
    lib.dtrace_recorder_close.argtypes = [handle]
    lib.dtrace_recorder_last_error.argtypes = [handle]
    lib.dtrace_recorder_last_error.restype = ctypes.c_char_p
    lib.dtrace_error_string.restype = ctypes.c_char_p
    lib.dtrace_recorder_begin_step.argtypes = [handle, ctypes.c_int64]
    lib.dtrace_recorder_end_step.argtypes = [handle]
    lib.dtrace_recorder_push_scope.argtypes = [handle, ctypes.c_char_p]
    lib.dtrace_recorder_pop_scope.argtypes = [handle]
    lib.dtrace_recorder_level.argtypes = [handle, ctypes.POINTER(ctypes.c_int32)]
    tensor_args = [handle, ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p,
                   ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t]
    lib.dtrace_recorder_tensor.argtypes = tensor_args + [ctypes.c_void_p, ctypes.c_size_t]
    lib.dtrace_recorder_tensor_digest.argtypes = tensor_args + [ctypes.c_uint64, ctypes.c_void_p,
                                                                ctypes.c_size_t]
    lib.dtrace_recorder_scalar.argtypes = [handle, ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32,
                                           ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64,
                                           ctypes.c_double]
    lib.dtrace_fingerprint_host.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.POINTER(ctypes.c_uint64)]
    return lib


def open_recorder(lib, run_dir, variables=()):
    options = RunOptions()
    lib.dtrace_run_options_init(ctypes.byref(options))
    options.run_dir = run_dir.encode()
    options.run_name = b"python-smoke"
    options.level = KERNEL
    options.env_json = b'{"NCCL_ALGO":"Ring"}'
    options.config_json = b'{"binding":"ctypes"}'
    encoded = (ctypes.c_char_p * max(1, len(variables)))(*[v.encode() for v in variables])
    recorder = ctypes.c_void_p()
    code = lib.dtrace_recorder_open_with(ctypes.byref(options), encoded, len(variables),
                                         ctypes.byref(recorder))
    return code, recorder


def expect(lib, recorder, code, want, contains=""):
    message = lib.dtrace_recorder_last_error(recorder).decode()
    if code != want:
        raise SystemExit(f"code {code} ({lib.dtrace_error_string(code).decode()}: {message}), "
                         f"expected {want}")
    if contains not in message:
        raise SystemExit(f"message {message!r} lacks {contains!r}")


def main():
    lib = load(sys.argv[1])
    run_dir = sys.argv[2]

    # A bad DTRACE_* variable: the handle exists and says which one.
    code, bad = open_recorder(lib, run_dir + "-never", ["DTRACE_REPEAT=0"])
    expect(lib, bad, code, ENVIRONMENT, "DTRACE_REPEAT=0")
    lib.dtrace_recorder_close(bad)

    code, rec = open_recorder(lib, run_dir)
    expect(lib, rec, code, OK)
    level = ctypes.c_int32(-1)
    expect(lib, rec, lib.dtrace_recorder_level(rec, ctypes.byref(level)), OK)
    assert level.value == KERNEL, level.value

    values = (ctypes.c_float * 6)(1.0, -2.5, 0.0, 3.25, -0.0, 7.0)
    shape = (ctypes.c_int64 * 2)(2, 3)
    nbytes = ctypes.sizeof(values)
    expect(lib, rec, lib.dtrace_recorder_tensor(rec, KERNEL, b"gemm", OUT, b"y", b"f32", shape, 2,
                                                values, nbytes), ORDER, "outside a step")

    expect(lib, rec, lib.dtrace_recorder_begin_step(rec, 0), OK)
    expect(lib, rec, lib.dtrace_recorder_push_scope(rec, b"fwd"), OK)
    expect(lib, rec, lib.dtrace_recorder_push_scope(rec, b"layer.0"), OK)
    expect(lib, rec, lib.dtrace_recorder_tensor(rec, KERNEL, b"gemm", IN, b"x", b"f32", shape, 2,
                                                values, nbytes), OK)
    digest = ctypes.c_uint64()
    expect(lib, rec, lib.dtrace_fingerprint_host(values, nbytes, ctypes.byref(digest)), OK)
    expect(lib, rec, lib.dtrace_recorder_tensor_digest(rec, KERNEL, b"gemm", OUT, b"y", b"f32",
                                                       shape, 2, digest.value, None, nbytes), OK)
    # Bad records are refused and leave the step intact.
    expect(lib, rec, lib.dtrace_recorder_tensor(rec, KERNEL, b"gemm", OUT, b"y", b"f32", shape, 2,
                                                values, nbytes - 4),
           INVALID_ARGUMENT, "20 bytes, but 6 elements of f32 take 24")
    expect(lib, rec, lib.dtrace_recorder_tensor(rec, KERNEL, b"gemm", OUT, b"y", b"float", shape,
                                                2, values, nbytes),
           INVALID_ARGUMENT, "unknown dtype 'float'")
    expect(lib, rec, lib.dtrace_recorder_tensor(rec, KERNEL, b"gemm", OUT, None, b"f32", shape, 2,
                                                values, nbytes), INVALID_ARGUMENT, "name is NULL")
    expect(lib, rec, lib.dtrace_recorder_pop_scope(rec), OK)
    expect(lib, rec, lib.dtrace_recorder_pop_scope(rec), OK)
    expect(lib, rec, lib.dtrace_recorder_pop_scope(rec), ORDER, "without a scope")
    loss = 0.6931
    bits = struct.unpack("<I", struct.pack("<f", loss))[0]
    expect(lib, rec, lib.dtrace_recorder_scalar(rec, STEP, b"loss", METRIC, b"loss", b"f32", bits,
                                                loss), OK)
    expect(lib, rec, lib.dtrace_recorder_end_step(rec), OK)
    expect(lib, None, lib.dtrace_recorder_close(rec), OK)
    print(f"recorded step 0 in {run_dir}: digest {digest.value:016x}")


if __name__ == "__main__":
    main()
