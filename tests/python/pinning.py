"""Pinned ops (dtrace-fp(5), "Pinned ops") driven by hand, without dtrace
bisect, for tests/python/test_pins*.py: a run's replay command run with the
replay variables (a capture of step N at kernel level, step replays with
DTRACE_PIN), the pin capture bisect would write (every out record of the
pinned (scope, op)s, renumbered from seq 0 per rank), and the replays'
records compared identity by identity.

The pin capture is written here from the format dtrace-fp(5) gives capture
directories (a dtrace-fp/1 log, capture.jsonl, whose records name their
bytes' file), not by dtrace's code: the recorder must read what the format
says, whoever wrote it."""
from __future__ import annotations

import ctypes
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from typing import Dict, Iterable, List, Optional, Sequence, Tuple
from unittest import mock

Identity = Tuple[str, str, str, str, int]  # scope, op, io, name, occurrence


def clean_environment(**variables: str) -> Dict[str, str]:
    """This process's environment without any replay or workflow variable of
    the caller's, plus `variables`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DTRACE_", "PYTHON_DTRACE_", "TORCH_DTRACE_", "RANK", "WORLD_SIZE"))}
    env.update(variables)
    return env


class Scratch(unittest.TestCase):
    """A test in a directory of its own, under a clean environment
    (clean_environment() plus environment()), whose programs run there."""

    def environment(self) -> Dict[str, str]:
        return {}

    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.dir = self._dir.name
        self._env = mock.patch.dict(os.environ, clean_environment(**self.environment()), clear=True)
        self._env.start()

    def tearDown(self):
        self._env.stop()
        self._dir.cleanup()

    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def run_command(self, argv: Sequence[str], **env: str) -> str:
        done = subprocess.run(list(argv), cwd=self.dir, env=clean_environment(**self.environment(), **env),
                              capture_output=True, text=True, timeout=900)
        self.assertEqual(done.returncode, 0, done.stderr[-4000:])
        return done.stdout

    def run_program(self, *argv: str) -> str:
        """A Python program of this interpreter's."""
        return self.run_command([sys.executable, *argv])


class PinningNative:
    """libdtrace's recorder as a Sink (and dtrace_torch's dispatch mode) asks
    it about pins: pinned() answers from `pins` ({(op, name): bytes}) and
    remembers every asking; kernel records are wanted or not (`kernel`, a
    kernel- or layer-level step), and every tensor recorded is kept."""

    def __init__(self, pins, kernel: bool = True):
        self.pins, self.kernel, self.asked, self.tensors = pins, kernel, [], []

    def wants(self, level):
        from dtrace import capi
        return self.kernel or level < capi.LEVEL_KERNEL

    def captures(self):
        return False

    def pinned(self, op, name, address, nbytes):
        self.asked.append((op, name))
        data = self.pins.get((op, name))
        if data is None:
            return False
        assert len(data) == nbytes, (op, name, len(data), nbytes)
        if nbytes:
            ctypes.memmove(address, data, nbytes)
        return True

    def tensor(self, level, op, io, name, dtype, shape, address, nbytes, digest=None):
        self.tensors.append((op, name, ctypes.string_at(address, nbytes) if nbytes else b""))

    def tensor_batch(self, level, records, addresses):  # as dtrace_recorder_tensors: one by one
        for (op, io, name, dtype, shape, nbytes), address in zip(records, addresses):
            self.tensor(level, op, io, name, dtype, shape, address, nbytes)


def header(run_dir: str, rank: int = 0) -> dict:
    with open(os.path.join(run_dir, f"rank{rank}.jsonl")) as f:
        return json.loads(f.readline())


def replay(run_dir: str, out_dir: str, step: int, level: str = "layer", **variables: str) -> str:
    """Runs the run's replay command (its header's argv, in its cwd) for step
    `step` at `level` into `out_dir` (DTRACE_OUT_DIR), with further replay
    variables (DTRACE_PIN=..., DTRACE_CAPTURE=...); returns out_dir. A replay
    that fails raises AssertionError with its stderr."""
    os.makedirs(out_dir, exist_ok=True)
    h = header(run_dir)
    env = clean_environment(DTRACE_REPLAY_STEP=str(step), DTRACE_LEVEL=level, DTRACE_OUT_DIR=out_dir,
                            **variables)
    done = subprocess.run(h["replay"]["argv"], cwd=h["replay"]["cwd"], env=env, capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise AssertionError(f"replay of step {step} ({variables}) exited {done.returncode}:\n{done.stderr[-4000:]}")
    return out_dir


def capture(run_dir: str, out_dir: str, step: int, scope: str) -> str:
    """A kernel-level replay of step `step` capturing scope `scope`; returns the capture directory."""
    cap = out_dir + ".capture"
    replay(run_dir, out_dir, step, "kernel", DTRACE_SCOPE=scope, DTRACE_CAPTURE=cap)
    return cap


def pin_capture(captures: Sequence[str], pins: Iterable[Tuple[str, str]], dst: str) -> int:
    """Writes the pin capture `dst` from the captures of one step: every out
    record of each pinned (scope, op), per rank in the order captured, its
    seq renumbered from 0 and its bytes copied under their new name. Returns
    how many records it holds (what rank<r>.pins must count, one rank)."""
    pins = set(pins)
    os.makedirs(dst)
    head, chosen, step = None, {}, None
    for cap in captures:
        for index in sorted(glob.glob(os.path.join(cap, "capture*.jsonl"))):
            with open(index) as f:
                lines = [json.loads(line) for line in f if line.strip()]
            if head is None:
                head = dict(lines[0])
                head.pop("rank", None)  # one index for every rank
            for r in lines[1:]:
                if "seq" in r and r["io"] == "out" and (r["scope"], r["op"]) in pins:
                    chosen.setdefault(r["rank"], []).append((cap, r))
                    step = r["step"]
    total = 0
    with open(os.path.join(dst, "capture.jsonl"), "w") as out:
        out.write(json.dumps(head, separators=(",", ":")) + "\n")
        for rank, records in sorted(chosen.items()):
            for seq, (cap, r) in enumerate(records):
                name = f"r{rank}-s{step}-q{seq}.bin"
                shutil.copyfile(os.path.join(cap, r["file"]), os.path.join(dst, name))
                r = dict(r, seq=seq, file=name)
                out.write(json.dumps(r, separators=(",", ":")) + "\n")
            out.write(json.dumps({"step": step, "rank": rank, "end": True, "count": len(records)},
                                 separators=(",", ":")) + "\n")
            total += len(records)
    return total


def records(out_dir: str, rank: int = 0) -> List[dict]:
    """The replay's records of rank `rank`, in seq order (end records left out)."""
    with open(os.path.join(out_dir, f"rank{rank}.jsonl")) as f:
        lines = [json.loads(line) for line in f][1:]
    return [r for r in lines if "seq" in r]


def by_identity(recs: Sequence[dict], io: Optional[Sequence[str]] = ("in", "out", "state", "metric")
                ) -> Dict[Identity, str]:
    """{(scope, op, io, name, occurrence): hash} of the records whose io is in
    `io` (a metric by its bits; timing records, which differ in every run, are
    left out by default)."""
    seen: Dict[Tuple[str, str, str, str], int] = {}
    out: Dict[Identity, str] = {}
    for r in recs:
        if io is not None and r["io"] not in io:
            continue
        key = (r["scope"], r["op"], r["io"], r["name"])
        k = seen.get(key, 0)
        seen[key] = k + 1
        out[key + (k,)] = r.get("hash", r.get("bits"))
    return out


def first_difference(a: str, b: str, rank: int = 0) -> Optional[Identity]:
    """The first record (in a's order) whose hash differs between two replays'
    logs, or is missing from b; None when they agree."""
    ra, rb = by_identity(records(a, rank)), by_identity(records(b, rank))
    for identity, digest in ra.items():
        if rb.get(identity) != digest:
            return identity
    return None


def pins_taken(out_dir: str, rank: int = 0) -> List[dict]:
    """The lines of rank<r>.pins: {"step": k, "pinned": n} per step or repetition."""
    path = os.path.join(out_dir, f"rank{rank}.pins")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f]


def answered(status: str) -> bool:
    """Whether a rank's status file says its request is done."""
    try:
        with open(status) as f:
            return f.read().startswith("done ")
    except FileNotFoundError:
        return False


def session(run_dir: str, session_dir: str, step: int, requests: Sequence[Tuple[str, Dict[str, str]]],
            timeout: float = 300) -> None:
    """The run's replay command serving a replay session (dtrace-fp(5),
    "Replay sessions") driven by hand as dtrace's runner drives one: each
    request (out_dir, variables) replays `step` into out_dir (DTRACE_OUT_DIR)
    with the variables, its file renamed into place and its answer awaited
    (rank0.status saying done), then the end request; the process must exit 0.
    AssertionError naming what went wrong otherwise."""
    import time
    os.makedirs(session_dir)
    h = header(run_dir)
    env = clean_environment(DTRACE_SESSION=session_dir, DTRACE_REPLAY_STEP=str(step))
    with open(session_dir + ".err", "w") as err:
        process = subprocess.Popen(h["replay"]["argv"], cwd=h["replay"]["cwd"], env=env,
                                   stdout=subprocess.DEVNULL, stderr=err)
    try:
        def send(k: int, body: dict) -> None:
            temporary = os.path.join(session_dir, f".request.{k}")
            with open(temporary, "w") as f:
                json.dump(body, f)
            os.replace(temporary, os.path.join(session_dir, f"request.{k}.json"))

        for k, (out_dir, variables) in enumerate(requests):
            os.makedirs(out_dir, exist_ok=True)
            send(k, {"request": k, "env": {"DTRACE_REPLAY_STEP": str(step), "DTRACE_OUT_DIR": out_dir,
                                           **variables}})
            status = os.path.join(out_dir, "rank0.status")
            deadline = time.monotonic() + timeout
            while not answered(status):
                if process.poll() is not None or time.monotonic() > deadline:
                    with open(session_dir + ".err") as f:
                        raise AssertionError(f"session request {k} ({variables}) not answered "
                                             f"(exit {process.poll()}):\n{f.read()[-4000:]}")
                time.sleep(0.01)
        send(len(requests), {"request": len(requests), "end": True})
        code = process.wait(timeout=60)
        if code != 0:
            with open(session_dir + ".err") as f:
                raise AssertionError(f"the session exited {code} after its end request:\n{f.read()[-4000:]}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
