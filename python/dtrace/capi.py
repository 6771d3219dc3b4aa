"""The ctypes binding of libdtrace's C API (<dtrace/dtrace.h>, <dtrace/recorder.h>,
dtrace-recorder(3)): the one place in Python that declares its functions and
structs, as the newest recorder.h has them. dtrace.recording and dtrace_torch
are built on it; a program may use it directly (docs/python.md, "The C API").

Nothing here is compiled against a Python or framework version. The protocol
(log, replay request, captures, multi-process outputs, sessions) is libdtrace's;
this file only moves arguments across the C boundary and turns error codes into
exceptions carrying libdtrace's own message.

Where libdtrace is looked for, first found wins:
  1. DTRACE_LIBRARY, a path to libdtrace.so (the one variable for a build tree);
  2. the path meson wrote into _paths.py when it installed or built this package;
  3. the dynamic linker's search path (ldconfig, LD_LIBRARY_PATH).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import List, Optional, Sequence, Tuple

from .errors import CaptureError, CudaUnavailable, LibraryNotFound, RecorderError

LEVEL_STEP, LEVEL_LAYER, LEVEL_KERNEL = 0, 1, 2
LEVELS = {"step": LEVEL_STEP, "layer": LEVEL_LAYER, "kernel": LEVEL_KERNEL}
IO_IN, IO_OUT, IO_STATE, IO_METRIC, IO_TIMING = 0, 1, 2, 3, 4

OK, ERROR_NOT_FOUND, ERROR_CUDA_UNAVAILABLE, ERROR_NO_DEVICE = 0, 10, 2, 3

_c = ctypes
_p = _c.c_void_p


class RunOptions(_c.Structure):
    _fields_ = [("run_dir", _c.c_char_p), ("run_name", _c.c_char_p), ("rank", _c.c_int32),
                ("world_size", _c.c_int32), ("level", _c.c_int32), ("env_json", _c.c_char_p),
                ("config_json", _c.c_char_p), ("replay_argv", _c.POINTER(_c.c_char_p)),
                ("replay_argc", _c.c_size_t), ("replay_cwd", _c.c_char_p),
                # DTRACE_1.1. ctypes binds to the newest symbol versions, so this is the
                # struct of the newest recorder.h, whole (recorder.h, "Versions").
                ("replica_groups", _c.c_char_p), ("replica_per_rank", _c.c_char_p)]


class CapturedRecord(_c.Structure):
    _fields_ = [("scope", _c.c_char_p), ("op", _c.c_char_p), ("io", _c.c_int32),
                ("occurrence", _c.c_int32), ("name", _c.c_char_p), ("dtype", _c.c_char_p),
                ("shape", _c.POINTER(_c.c_int64)), ("ndim", _c.c_size_t), ("bytes", _c.c_uint64),
                ("digest", _c.c_uint64), ("step", _c.c_int64), ("seq", _c.c_int64),
                ("file", _c.c_char_p)]


def _candidates() -> List[str]:
    found = []
    explicit = os.environ.get("DTRACE_LIBRARY")
    if explicit:
        return [explicit]
    try:
        from . import _paths  # written by meson (install and build tree)
        found.append(_paths.LIBDTRACE)
    except ImportError:
        pass
    system = ctypes.util.find_library("dtrace")
    found.append(system or "libdtrace.so")
    return found


def _load() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        if not hasattr(lib, "dtrace_recorder_open"):
            tried.append(f"{path} (a libdtrace without the recorder C API)")
            continue
        if not hasattr(lib, "dtrace_recorder_tensors"):  # the newest function _declare binds
            tried.append(f"{path} (a libdtrace older than this package: no dtrace_recorder_tensors, "
                         f"symbol version DTRACE_1.5)")
            continue
        return lib
    raise LibraryNotFound("libdtrace could not be loaded; tried: " + "; ".join(tried) +
                          ". Set DTRACE_LIBRARY to the path of libdtrace.so (in a build tree: "
                          "build/src/capi/libdtrace.so), or install dtrace with `meson install`.")


def _declare(lib: ctypes.CDLL) -> None:
    i32p, i64p = _c.POINTER(_c.c_int32), _c.POINTER(_c.c_int64)
    strp = _c.POINTER(_c.c_char_p)
    sig = {
        "dtrace_fingerprint_host": ([_p, _c.c_size_t, _c.POINTER(_c.c_uint64)], _c.c_int),
        "dtrace_fingerprint_device_batch": ([_c.POINTER(_p), _c.POINTER(_c.c_size_t), _c.c_size_t, _p,
                                             _c.POINTER(_c.c_uint64)], _c.c_int),
        "dtrace_version": ([], _c.c_char_p),
        "dtrace_error_string": ([_c.c_int], _c.c_char_p),
        "dtrace_run_options_init": ([_c.POINTER(RunOptions)], None),
        "dtrace_recorder_open": ([_c.POINTER(RunOptions), _c.POINTER(_p)], _c.c_int),
        "dtrace_recorder_close": ([_p], _c.c_int),
        "dtrace_recorder_last_error": ([_p], _c.c_char_p),
        "dtrace_recorder_level": ([_p, i32p], _c.c_int),
        "dtrace_recorder_wants": ([_p, _c.c_int32, i32p], _c.c_int),
        "dtrace_recorder_captures": ([_p, i32p], _c.c_int),
        "dtrace_recorder_is_replay": ([_p, i32p], _c.c_int),
        "dtrace_recorder_replay_step": ([_p, i64p], _c.c_int),
        "dtrace_recorder_scope_prefix": ([_p, strp], _c.c_int),
        "dtrace_recorder_capture_dir": ([_p, strp], _c.c_int),
        "dtrace_recorder_isolate_scope": ([_p, strp], _c.c_int),
        "dtrace_recorder_isolate_op": ([_p, strp], _c.c_int),
        "dtrace_recorder_isolate_occurrence": ([_p, i32p], _c.c_int),
        "dtrace_recorder_inputs_dir": ([_p, strp], _c.c_int),
        "dtrace_recorder_repeat": ([_p, i32p], _c.c_int),
        "dtrace_recorder_checkpoint_dir": ([_p, strp], _c.c_int),
        "dtrace_recorder_stop_at": ([_p, i64p], _c.c_int),
        "dtrace_recorder_resume_at": ([_p, i64p], _c.c_int),
        "dtrace_recorder_deterministic": ([_p, i32p], _c.c_int),
        "dtrace_recorder_push_scope": ([_p, _c.c_char_p], _c.c_int),
        "dtrace_recorder_pop_scope": ([_p], _c.c_int),
        "dtrace_recorder_current_scope": ([_p, strp], _c.c_int),
        "dtrace_recorder_begin_step": ([_p, _c.c_int64], _c.c_int),
        "dtrace_recorder_end_step": ([_p], _c.c_int),
        "dtrace_recorder_discard_step": ([_p], _c.c_int),
        "dtrace_recorder_fast_forward": ([_p, _c.c_int64], _c.c_int),
        "dtrace_recorder_tensor": ([_p, _c.c_int32, _c.c_char_p, _c.c_int32, _c.c_char_p, _c.c_char_p,
                                    i64p, _c.c_size_t, _p, _c.c_size_t], _c.c_int),
        "dtrace_recorder_tensor_digest": ([_p, _c.c_int32, _c.c_char_p, _c.c_int32, _c.c_char_p,
                                           _c.c_char_p, i64p, _c.c_size_t, _c.c_uint64, _p,
                                           _c.c_size_t], _c.c_int),
        "dtrace_recorder_scalar": ([_p, _c.c_int32, _c.c_char_p, _c.c_int32, _c.c_char_p, _c.c_char_p,
                                    _c.c_uint64, _c.c_double], _c.c_int),
        "dtrace_recorder_begin_repetition": ([_p, _c.c_int32], _c.c_int),
        "dtrace_recorder_captured_count": ([_p, _c.POINTER(_c.c_size_t)], _c.c_int),
        "dtrace_recorder_captured_record": ([_p, _c.c_size_t, _c.POINTER(CapturedRecord)], _c.c_int),
        "dtrace_recorder_captured_find": ([_p, _c.c_char_p, _c.c_char_p, _c.c_int32, _c.c_char_p,
                                           _c.c_int32, _c.POINTER(_c.c_size_t)], _c.c_int),
        "dtrace_recorder_captured_read": ([_p, _c.c_size_t, _p, _c.c_size_t], _c.c_int),
        # Replay sessions (DTRACE_1.2, recorder.h "Replay sessions").
        "dtrace_session_open": ([i32p, _c.c_size_t, _c.POINTER(_p)], _c.c_int),
        "dtrace_session_next": ([_p, _c.c_int64, i32p], _c.c_int),
        "dtrace_session_done": ([_p], _c.c_int),
        "dtrace_session_decline": ([_p, _c.c_char_p], _c.c_int),  # DTRACE_1.3
        "dtrace_session_step": ([_p, i64p], _c.c_int),
        "dtrace_session_first_step_request": ([_p, i32p], _c.c_int),
        "dtrace_session_variable": ([_p, _c.c_char_p, _c.POINTER(_c.c_char_p)], _c.c_int),
        "dtrace_session_last_error": ([_p], _c.c_char_p),
        "dtrace_session_close": ([_p], _c.c_int),
        "dtrace_recorder_open_session": ([_c.POINTER(RunOptions), _p, _c.POINTER(_p)], _c.c_int),
        # Pinned ops (DTRACE_1.4, recorder.h "Pinned ops").
        "dtrace_recorder_open_pinning": ([_c.POINTER(RunOptions), _p, _c.POINTER(_p)], _c.c_int),
        "dtrace_recorder_pins": ([_p, i32p], _c.c_int),
        "dtrace_recorder_pinned": ([_p, _c.c_char_p, _c.c_char_p, _p, _c.c_size_t, i32p], _c.c_int),
        # Several tensors in one call (DTRACE_1.5, recorder.h).
        "dtrace_recorder_tensors": ([_p, _c.c_int32, _c.c_size_t, strp, i32p, strp, strp,
                                     _c.POINTER(i64p), _c.POINTER(_c.c_size_t), _c.POINTER(_p),
                                     _c.POINTER(_c.c_size_t), _c.POINTER(_c.c_uint64), i32p], _c.c_int),
    }
    for name, (argtypes, restype) in sig.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype


_LIB: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """libdtrace, loaded and declared on first use (importing the package loads nothing)."""
    global _LIB
    if _LIB is None:
        loaded = _load()
        _declare(loaded)
        _LIB = loaded
    return _LIB


def _b(text: Optional[str]) -> Optional[bytes]:
    return None if text is None else text.encode()


def _s(raw: Optional[bytes]) -> Optional[str]:
    return None if raw is None else raw.decode()


def version() -> str:
    return _s(lib().dtrace_version())


def fingerprint_host(address: int, nbytes: int) -> int:
    out = _c.c_uint64()
    code = lib().dtrace_fingerprint_host(_p(address), nbytes, _c.byref(out))
    if code != OK:
        raise RecorderError(f"dtrace_fingerprint_host: {_s(lib().dtrace_error_string(code))}")
    return out.value


def fingerprint_device_batch(addresses: Sequence[int], sizes: Sequence[int], stream: int) -> List[int]:
    n = len(addresses)
    data = (_p * n)(*addresses)
    nbytes = (_c.c_size_t * n)(*sizes)
    out = (_c.c_uint64 * n)()
    code = lib().dtrace_fingerprint_device_batch(data, nbytes, n, _p(stream or None), out)
    if code == ERROR_CUDA_UNAVAILABLE:
        raise CudaUnavailable(_s(lib().dtrace_error_string(code)))
    if code != OK:
        raise RecorderError(f"dtrace_fingerprint_device_batch: {_s(lib().dtrace_error_string(code))}")
    return list(out)


class Session:
    """The replay session this process was started for (DTRACE_SESSION,
    dtrace-fp(5) "Replay sessions"): libdtrace reads the requests and writes the
    ranks' statuses; the recorder serves each request as a launch would."""

    def __init__(self, handle):
        self._lib, self._h = lib(), handle

    @classmethod
    def open(cls, ranks: Sequence[int]) -> Optional["Session"]:
        """None without DTRACE_SESSION; RecorderError naming what is wrong with it."""
        handle = _p()
        wanted = (_c.c_int32 * len(ranks))(*ranks)
        code = lib().dtrace_session_open(wanted, len(ranks), _c.byref(handle))
        if code != OK:
            message = _s(lib().dtrace_session_last_error(handle)) if handle else ""
            lib().dtrace_session_close(handle)
            raise RecorderError(message or _s(lib().dtrace_error_string(code)))
        return cls(handle) if handle.value else None

    def _check(self, code: int) -> None:
        if code != OK:
            raise RecorderError(_s(self._lib.dtrace_session_last_error(self._h)) or
                                _s(self._lib.dtrace_error_string(code)))

    def next(self) -> bool:
        """Waits for the next request: True to serve it, False at the end request."""
        more = _c.c_int32()
        self._check(self._lib.dtrace_session_next(self._h, -1, _c.byref(more)))
        return bool(more.value)

    def done(self) -> None: self._check(self._lib.dtrace_session_done(self._h))

    def decline(self, reason: str) -> None:
        """Declines the request instead of serving it (dtrace-fp(5), "Replay
        sessions"): dtrace launches it with the same variables and names
        `reason` (one line, not empty) in its report; the next next() reads the
        next request. Call it before the request's recorder opens or after it
        is closed. RecorderError without a request, or for a bad reason."""
        self._check(self._lib.dtrace_session_decline(self._h, _b(reason)))

    def step(self) -> int:
        out = _c.c_int64()
        self._check(self._lib.dtrace_session_step(self._h, _c.byref(out)))
        return out.value

    def first_step_request(self) -> bool:
        out = _c.c_int32()
        self._check(self._lib.dtrace_session_first_step_request(self._h, _c.byref(out)))
        return bool(out.value)

    def variable(self, name: str) -> Optional[str]:
        """The request's value of `name` (None when the request does not set it)."""
        out = _c.c_char_p()
        self._check(self._lib.dtrace_session_variable(self._h, name.encode(), _c.byref(out)))
        return _s(out.value) if out.value is not None else None

    @property
    def handle(self):
        return self._h

    def close(self) -> None:
        if self._h is not None:
            h, self._h = self._h, None
            self._lib.dtrace_session_close(h)


class Native:
    """One dtrace_recorder handle (one rank). `session`: open it for a program
    that serves replay sessions (its header announces dtrace-replay/1.2): with a
    Session serving a request, for that request; with None, from the environment.
    `honours_pins` (with sessions): the program asks pinned() for every op
    output it records at kernel level, and the header announces 1.3."""

    def __init__(self, *, run_dir: Optional[str], run_name: str, rank: int, world_size: int, level: int,
                 env_json: str, config_json: str, replay_argv: Sequence[str], replay_cwd: Optional[str],
                 replica_groups: Optional[str] = None, replica_per_rank: Optional[str] = None,
                 serves_sessions: bool = False, session: Optional[Session] = None,
                 honours_pins: bool = False):
        self._lib = lib()
        self._dims: dict = {}  # shape -> its int64[] (tensor())
        self._text: dict = {}  # op, name, dtype -> bytes (tensor())
        self._plans: dict = {}  # records -> their C arrays (tensor_batch())
        self._seen: set = set()  # records handed over once, without a plan (tensor_batch())
        self._wanted: dict = {}  # wants() at step and layer level, until a step begins or ends
        options = RunOptions()
        self._lib.dtrace_run_options_init(_c.byref(options))
        # The bytes objects must outlive the call: keep them on the instance.
        self._keep = [_b(run_dir), _b(run_name), _b(env_json), _b(config_json), _b(replay_cwd),
                      _b(replica_groups), _b(replica_per_rank)]
        argv = [_b(a) for a in replay_argv]
        self._keep.append(argv)
        options.run_dir, options.run_name = self._keep[0], self._keep[1]
        options.rank, options.world_size, options.level = rank, world_size, level
        options.env_json, options.config_json = self._keep[2], self._keep[3]
        options.replay_argv = (_c.c_char_p * max(1, len(argv)))(*argv)
        options.replay_argc = len(argv)
        options.replay_cwd = self._keep[4]
        options.replica_groups, options.replica_per_rank = self._keep[5], self._keep[6]
        handle = _p()
        if honours_pins:
            code = self._lib.dtrace_recorder_open_pinning(_c.byref(options), session.handle if session else None,
                                                          _c.byref(handle))
        elif serves_sessions or session is not None:
            code = self._lib.dtrace_recorder_open_session(_c.byref(options), session.handle if session else None,
                                                          _c.byref(handle))
        else:
            code = self._lib.dtrace_recorder_open(_c.byref(options), _c.byref(handle))
        self._h = handle
        if code != OK:
            message = self._message(code)
            self._lib.dtrace_recorder_close(handle)
            self._h = None
            raise RecorderError(message)
        # What the request fixes for the recorder's life, asked once: the level
        # in force (level_in_force; wants() answers False above it without
        # crossing into C)
        # and whether anything is captured at all (captures()).
        self.level_in_force = self._level = self.level()
        self._may_capture = self.capture_dir() is not None
        # The scope set_scope() names, and the one it pushed to libdtrace: the
        # push waits until something that reads the scope is called (_sync).
        self._scope: Optional[str] = None
        self._pushed: Optional[str] = None
        self._stale = False

    def _message(self, code: int) -> str:
        text = _s(self._lib.dtrace_recorder_last_error(self._h)) if self._h else ""
        return text or _s(self._lib.dtrace_error_string(code))

    def _check(self, code: int) -> None:
        if code != OK:
            raise RecorderError(self._message(code))

    def _get(self, fn, ctype):
        out = ctype()
        self._check(fn(self._h, _c.byref(out)))
        return out.value

    # The request and the level in force.
    def level(self) -> int: return self._get(self._lib.dtrace_recorder_level, _c.c_int32)

    def captures(self) -> bool:
        if not self._may_capture:
            return False
        if self._stale:
            self._sync()
        return bool(self._get(self._lib.dtrace_recorder_captures, _c.c_int32))
    def is_replay(self) -> bool: return bool(self._get(self._lib.dtrace_recorder_is_replay, _c.c_int32))

    def wants(self, level: int) -> bool:
        if self._level < level <= LEVEL_KERNEL:  # never, whatever the scope and step (recorder.h)
            return False
        if level < LEVEL_KERNEL:
            # Step and layer level: the answer depends on the step alone, not the
            # scope (recorder.h), so it is asked once per step (and once between).
            wanted = self._wanted.get(level)
            if wanted is not None:
                return wanted
        elif self._stale:
            self._sync()
        out = _c.c_int32()
        self._check(self._lib.dtrace_recorder_wants(self._h, level, _c.byref(out)))
        wanted = bool(out.value)
        if level < LEVEL_KERNEL:
            self._wanted[level] = wanted
        return wanted

    def _opt_int(self, fn, ctype=_c.c_int64) -> Optional[int]:
        v = self._get(fn, ctype)
        return None if v < 0 else v

    def replay_step(self) -> Optional[int]: return self._opt_int(self._lib.dtrace_recorder_replay_step)
    def stop_at(self) -> Optional[int]: return self._opt_int(self._lib.dtrace_recorder_stop_at)
    def resume_at(self) -> Optional[int]: return self._opt_int(self._lib.dtrace_recorder_resume_at)

    def deterministic(self) -> Optional[bool]:
        v = self._get(self._lib.dtrace_recorder_deterministic, _c.c_int32)
        return None if v < 0 else bool(v)

    def isolate_occurrence(self) -> Optional[int]:
        return self._opt_int(self._lib.dtrace_recorder_isolate_occurrence, _c.c_int32)

    def repeat(self) -> int: return self._get(self._lib.dtrace_recorder_repeat, _c.c_int32)
    def scope_prefix(self) -> str: return _s(self._get(self._lib.dtrace_recorder_scope_prefix, _c.c_char_p)) or ""
    def capture_dir(self) -> Optional[str]: return _s(self._get(self._lib.dtrace_recorder_capture_dir, _c.c_char_p))
    def isolate_scope(self) -> Optional[str]: return _s(self._get(self._lib.dtrace_recorder_isolate_scope, _c.c_char_p))
    def isolate_op(self) -> Optional[str]: return _s(self._get(self._lib.dtrace_recorder_isolate_op, _c.c_char_p))
    def inputs_dir(self) -> Optional[str]: return _s(self._get(self._lib.dtrace_recorder_inputs_dir, _c.c_char_p))
    def checkpoint_dir(self) -> Optional[str]: return _s(self._get(self._lib.dtrace_recorder_checkpoint_dir, _c.c_char_p))

    # Scopes and steps.
    def set_scope(self, path: Optional[str]) -> None:
        """Records inside scope `path` (a whole path, fwd/layer.1; None: the
        scope below it) from now on, as pop_scope() of the last path set and
        push_scope(path) would, but without crossing into C: the push waits
        until a call that reads the scope (a record, wants, captures, pinned,
        current_scope, push_scope, pop_scope), so a scope inside which nothing
        is recorded at the level in force costs no C call. libdtrace's scope
        is right whenever it is read, and its status line's progress
        (dtrace-fp(5), "running PID STEP SEQ", refreshed by each push) is
        refreshed when a record is written in a scope newly entered."""
        self._scope = path
        self._stale = path != self._pushed

    def _sync(self) -> None:
        """Pushes the scope set_scope() named (popping the one it pushed before)."""
        pushed, self._pushed, self._stale = self._pushed, self._scope, False
        if pushed is not None:
            self._check(self._lib.dtrace_recorder_pop_scope(self._h))
        if self._scope is not None:
            self._check(self._lib.dtrace_recorder_push_scope(self._h, self._scope.encode()))

    def push_scope(self, part: str) -> None:
        if self._stale:
            self._sync()
        self._check(self._lib.dtrace_recorder_push_scope(self._h, part.encode()))

    def pop_scope(self) -> None:
        if self._stale:
            self._sync()
        self._check(self._lib.dtrace_recorder_pop_scope(self._h))

    def current_scope(self) -> str:
        if self._stale:
            self._sync()
        return _s(self._get(self._lib.dtrace_recorder_current_scope, _c.c_char_p))

    # Each of these may change what wants() answers at step and layer level.
    def begin_step(self, step: int) -> None:
        self._wanted.clear()
        self._check(self._lib.dtrace_recorder_begin_step(self._h, step))

    def end_step(self) -> None:
        self._wanted.clear()
        self._check(self._lib.dtrace_recorder_end_step(self._h))

    def discard_step(self) -> None:
        self._wanted.clear()
        self._check(self._lib.dtrace_recorder_discard_step(self._h))

    def fast_forward(self, until: int) -> None:
        self._wanted.clear()
        self._check(self._lib.dtrace_recorder_fast_forward(self._h, until))

    def begin_repetition(self, k: int) -> None:
        self._wanted.clear()
        self._check(self._lib.dtrace_recorder_begin_repetition(self._h, k))

    # Records.
    def tensor(self, level: int, op: str, io: int, name: str, dtype: str, shape: Tuple[int, ...],
               address: int, nbytes: int, digest: Optional[int] = None) -> None:
        # The per-call Python work is most of a small tensor's cost (tools/bench,
        # torch_recording.py): names and shapes repeat every step, so their C
        # forms are made once.
        dims = self._dims.get(shape)
        if dims is None:
            if len(self._dims) > 4096:  # shapes that vary (kernel level): keep it bounded
                self._dims.clear()
                self._text.clear()
            dims = self._dims[shape] = (_c.c_int64 * max(1, len(shape)))(*shape)
        if self._stale:
            self._sync()
        text = self._text
        op_b = text.get(op) or text.setdefault(op, op.encode())
        name_b = text.get(name) or text.setdefault(name, name.encode())
        dtype_b = text.get(dtype) or text.setdefault(dtype, dtype.encode())
        if digest is None:
            code = self._lib.dtrace_recorder_tensor(self._h, level, op_b, io, name_b, dtype_b,
                                                    dims, len(shape), address or None, nbytes)
        else:
            code = self._lib.dtrace_recorder_tensor_digest(self._h, level, op_b, io, name_b,
                                                           dtype_b, dims, len(shape), digest,
                                                           address or None, nbytes)
        if code:
            self._check(code)

    def tensor_batch(self, level: int, records: Tuple[Tuple[str, int, str, str, Tuple[int, ...], int], ...],
                addresses: Sequence[int]) -> None:
        """Host tensors in one call (dtrace_recorder_tensors): records[i] is
        (op, io, name, dtype, shape, nbytes), its bytes at addresses[i] (0 when
        nbytes is 0), each as tensor() records it, in order, at `level`.

        A ctypes call converts each of its arguments, 2-3 us for tensor()'s
        ten, so one call for a step's state is most of the saving; the rest
        is that `records` repeat from step to step (the same parameters): the
        C arrays of names, dtypes and shapes are made once per distinct
        `records` (a plan) the second time they are given, and only the
        addresses are written each call."""
        plan = self._plans.get(records)
        if plan is None:
            if records not in self._seen:
                # Seen for the first time: one call each, as tensor() records them.
                # A plan costs several single calls to make, so only records that
                # come again get one (a step's state from its second step on, not
                # the layers of a mixture of experts whose shapes follow the data).
                if len(self._seen) > 4096:
                    self._seen.clear()
                self._seen.add(records)
                for (op, io, name, dtype, shape, nbytes), address in zip(records, addresses):
                    self.tensor(level, op, io, name, dtype, shape, address, nbytes)
                return
            plan = self._plan(records)
        data, arrays = plan[0], plan[1]
        data[:] = addresses
        if self._stale:
            self._sync()
        code = self._lib.dtrace_recorder_tensors(self._h, level, len(records), *arrays)
        if code:
            self._check(code)

    def _plan(self, records) -> list:
        """The C arrays of dtrace_recorder_tensors for `records` (Native.tensor_batch),
        kept while records repeat: (data, the call's arguments after count,
        data among them and filled per call, what they point to)."""
        if len(self._plans) > 4096:  # records that vary (a batch of another shape every step): bounded
            self._plans.clear()
        n = len(records)
        text = self._text
        word = lambda w: text.get(w) or text.setdefault(w, w.encode())  # noqa: E731
        dims = [(_c.c_int64 * max(1, len(r[4])))(*r[4]) for r in records]
        words = [[word(r[k]) for r in records] for k in (0, 2, 3)]
        data = (_p * n)()
        arrays = ((_c.c_char_p * n)(*words[0]), (_c.c_int32 * n)(*[r[1] for r in records]),
                  (_c.c_char_p * n)(*words[1]), (_c.c_char_p * n)(*words[2]),
                  (_c.POINTER(_c.c_int64) * n)(*[_c.cast(d, _c.POINTER(_c.c_int64)) for d in dims]),
                  (_c.c_size_t * n)(*[len(r[4]) for r in records]), data,
                  (_c.c_size_t * n)(*[r[5] for r in records]), None, None)
        plan = self._plans[records] = (data, arrays, dims, words)
        return plan

    def scalar(self, level: int, op: str, io: int, name: str, dtype: str, bits: int, value: float) -> None:
        if self._stale:
            self._sync()
        text = self._text  # the names of tensor(), made once
        code = self._lib.dtrace_recorder_scalar(self._h, level, text.get(op) or text.setdefault(op, op.encode()), io,
                                                text.get(name) or text.setdefault(name, name.encode()),
                                                text.get(dtype) or text.setdefault(dtype, dtype.encode()), bits, value)
        if code:
            self._check(code)

    # Captures (isolation).
    def captured(self) -> List[dict]:
        """This rank's captured records of the captured step, in seq order."""
        count = self._get(self._lib.dtrace_recorder_captured_count, _c.c_size_t)
        records = []
        for i in range(count):
            r = CapturedRecord()
            self._check(self._lib.dtrace_recorder_captured_record(self._h, i, _c.byref(r)))
            records.append({"index": i, "scope": _s(r.scope), "op": _s(r.op), "io": r.io,
                             "occurrence": r.occurrence, "name": _s(r.name), "dtype": _s(r.dtype),
                             "shape": tuple(r.shape[k] for k in range(r.ndim)), "bytes": r.bytes,
                             "step": r.step, "seq": r.seq, "file": _s(r.file)})
        return records

    def captured_find(self, scope: str, op: str, io: int, name: str, occurrence: int) -> Optional[int]:
        index = _c.c_size_t()
        code = self._lib.dtrace_recorder_captured_find(self._h, scope.encode(), op.encode(), io, name.encode(),
                                                       occurrence, _c.byref(index))
        if code == ERROR_NOT_FOUND:
            return None
        self._check(code)
        return index.value

    def captured_read(self, index: int, address: int, capacity: int) -> None:
        code = self._lib.dtrace_recorder_captured_read(self._h, index, _p(address or None), capacity)
        if code != OK:
            raise CaptureError(self._message(code))

    def pins(self) -> bool:
        """True while the open step may hold a pinned call (DTRACE_PIN)."""
        return bool(self._get(self._lib.dtrace_recorder_pins, _c.c_int32))

    def pinned(self, op: str, name: str, address: int, nbytes: int) -> bool:
        """Asks whether this call's output `name` of `op` in the current scope is
        pinned; if so its pinned bytes (exactly nbytes) are written at address
        and True is returned. Ask once per output of every call (recorder.h)."""
        if self._stale:
            self._sync()
        flag = _c.c_int32()
        self._check(self._lib.dtrace_recorder_pinned(self._h, op.encode(), name.encode(), _p(address or None),
                                                     nbytes, _c.byref(flag)))
        return bool(flag.value)

    def close(self) -> None:
        if self._h is not None:
            h, self._h = self._h, None
            code = self._lib.dtrace_recorder_close(h)
            if code != OK:
                raise RecorderError(_s(self._lib.dtrace_error_string(code)))

    def __del__(self):
        try:
            if getattr(self, "_h", None) is not None:
                self._lib.dtrace_recorder_close(self._h)
        except Exception:
            pass
