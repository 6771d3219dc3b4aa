"""The Recorder: what a training loop in any Python program adds to become a
dtrace workload (docs/python.md, "Recording").

    rec = dtrace.Recorder({"model": model, "data": sampler}, run_dir="runs/a",
                          checkpoint_dir="ckpt/a", checkpoint_every=10, isolate=isolate)
    for step in rec.steps(total_steps):
        with rec.step(step, batch=x):
            with rec.scope("fwd"), rec.scope("layer.0"):
                rec.record("layer.0", {"x": x, "w": w}, io="in", level="layer")
                ...
            rec.metric("loss", loss)

The log, the replay request, captures, multi-process outputs and replay
sessions are libdtrace's (through its C API, dtrace.capi); this class holds the
loop every recorder shares: where to start and stop, checkpoints and restore,
replays of one step, isolation requests, sessions. What state a step depends
on is the program's: objects with state_dict()/load_state_dict() (or plain
dicts), checkpointed, restored and recorded. dtrace_torch's Recorder is this
one with PyTorch's state and hooks (the methods marked "a subclass's")."""
from __future__ import annotations

import contextlib
import json
import operator
import os
import platform
import shlex
import shutil
import sys
import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import capi, checkpoints
from .errors import CaptureError, CheckpointError, Error
from .generators import Drawn
from .isolation import Isolation
from .records import Sink, state_values

# The variables `dtrace env` checks (dtrace(1), DESIGN.md §6) and the ones
# PyTorch reads: they go into the header, where `dtrace diff` compares them.
DETERMINISM_VARIABLES = ("NCCL_ALGO", "NVTE_ALLOW_NONDETERMINISTIC_ALGO", "CUBLAS_WORKSPACE_CONFIG",
                         "TRITON_CACHE_AUTOTUNING", "TRITON_CACHE_DIR", "TRITON_PRINT_AUTOTUNING",
                         "MAMBA_DETERMINISTIC", "CAUSAL_CONV1D_DETERMINISTIC", "NCCL_PROTO",
                         "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")

# Where launchers put a process's rank and the world size, first found wins.
LAUNCHER_RANKS = (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                  ("PMI_RANK", "PMI_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))


# `dtrace record -- CMD` (dtrace(1), RECORD) runs a program with these set: the
# run's replay command (a JSON array: dtrace record again, in front of the
# command as typed) and the directory it runs in. Every recorder of the process
# records them as its replay command, so a replay goes through `dtrace record`
# again and reaches every rank the way the recording did.
RECORD_REPLAY_ARGV_VARIABLE = "DTRACE_RECORD_REPLAY_ARGV"
RECORD_CWD_VARIABLE = "DTRACE_RECORD_CWD"

# The recorders of this process: a program with its own Recorder is recorded by
# it alone, and dtrace record's automatic one stands down (dtrace_torch.auto).
explicit_recorders = 0
automatic_recording: Optional[str] = None  # what the automatic recorder is recording, once it began


def recorded_command() -> Optional[List[str]]:
    """The replay command `dtrace record` handed this process, or None."""
    text = os.environ.get(RECORD_REPLAY_ARGV_VARIABLE)
    if not text:
        return None
    try:
        argv = json.loads(text)
    except ValueError:
        argv = None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise Error(f"{RECORD_REPLAY_ARGV_VARIABLE}={text!r}: not a JSON array of strings (dtrace record sets it)")
    return argv


def launcher_rank() -> Tuple[int, int]:
    """(rank, world size) as the process's launcher set them, else (0, 1)."""
    for rank, size in LAUNCHER_RANKS:
        if os.environ.get(rank) and os.environ.get(size):
            try:
                return int(os.environ[rank]), int(os.environ[size])
            except ValueError:
                raise Error(f"{rank}={os.environ[rank]!r}, {size}={os.environ[size]!r}: not numbers") from None
    return 0, 1


def replica_groups_text(replicas: Union[None, str, Sequence[Sequence[int]]]) -> Optional[str]:
    """The header's replica groups in `dtrace replicas --groups`' grammar
    ("0,1:2,3"), which libdtrace checks (an invalid value is a RecorderError
    naming it)."""
    if replicas is None or isinstance(replicas, str):
        return replicas
    # operator.index: ranks are integers, not 1.0 or "1".
    return ":".join(",".join(str(operator.index(r)) for r in group) for group in replicas)


RECORD_IOS = {"in": capi.IO_IN, "out": capi.IO_OUT, "state": capi.IO_STATE}


class Scope:
    """`with rec.scope(part):` (Recorder.scope): the sink's scope while the
    block runs. A plain object, not a generator's context manager, and one per
    part and recorder, made once: a step may enter hundreds of scopes, most
    recording nothing at the level in force. The scopes it was entered from
    are a stack, so the same part may be entered inside itself."""

    __slots__ = ("rec", "part", "previous", "paths")

    def __init__(self, rec: "Recorder", part: str):
        self.rec, self.part, self.previous = rec, part, []
        self.paths: Dict[Optional[str], str] = {}  # the whole path, by the scope entered from

    def __enter__(self) -> str:
        sink = self.rec.sink
        if sink is None:
            self.previous.append(None)
            return self.part
        current = sink._scope
        inner = self.paths.get(current)
        if inner is None:
            if len(self.paths) > 256:  # entered from scopes named by a counter: bounded
                self.paths.clear()
            inner = self.paths[current] = \
                self.part if current is None or current == "step" else f"{current}/{self.part}"
        sink.set_scope(inner)
        self.previous.append(current)
        return inner

    def __exit__(self, *exc) -> None:
        previous = self.previous.pop() if self.previous else None
        sink = self.rec.sink
        if sink is not None:
            sink.set_scope(previous)


class _Timed:
    """Recorder._timed(): a plain object, not a generator's context manager
    (a step enters three or four)."""

    __slots__ = ("rec", "wall", "cpu")

    def __init__(self, rec: "Recorder"):
        self.rec = rec

    def __enter__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def __exit__(self, *exc) -> None:
        rec = self.rec
        rec.record_seconds += time.perf_counter() - self.wall
        rec.record_cpu_seconds += time.process_time() - self.cpu


class _Step:
    """`with rec.step(number, batch):` (Recorder.step). A plain object rather
    than a generator's context manager: a few microseconds a step less."""

    __slots__ = ("rec", "number", "batch", "started", "context")

    def __init__(self, rec: "Recorder", number: int, batch: Any):
        self.rec, self.number, self.batch, self.context = rec, number, batch, None

    def __enter__(self) -> "Recorder":
        rec = self.rec
        if rec._unrecorded:  # a step before an isolation: run, not recorded
            return rec
        self.started = time.perf_counter()
        rec._begin_step(self.number, self.batch)
        try:
            context = rec._step_context()
            context.__enter__()
        except BaseException:
            rec._step_over()
            raise
        self.context = context
        return rec

    def __exit__(self, kind, value, traceback) -> bool:
        context, self.context = self.context, None
        if context is None:
            return False
        rec = self.rec
        try:
            # The step context sees the body's exception first; a step whose body
            # ended normally (or whose exception that context swallowed) is ended.
            swallowed = bool(context.__exit__(kind, value, traceback))
            if kind is None or swallowed:
                rec._end_step(self.started)
            return swallowed
        finally:
            rec._step_over()


class Recorder:
    """Records one rank of a Python training program and answers dtrace's replays.

    state: what a step depends on, by name: objects with state_dict() and
      load_state_dict() (the model, the optimizer, the data sampler) or plain
      dicts. Checkpointed, restored, and recorded at each step's start as
      state records (op: the name; names: the paths in its state_dict).
    run_dir: where the run's log goes (<run_dir>/rank<r>.jsonl); never appended to.
    checkpoint_dir, checkpoint_every: the state at the start of every
      checkpoint_every-th step (and of step 0) goes to <checkpoint_dir>/step-<K>.pkl;
      replays restore from the newest at or before the step they replay.
    level: "step", "layer" or "kernel" for a normal run (DTRACE_LEVEL overrides).
    rank, world_size: default from the launcher's variables (RANK/WORLD_SIZE,
      OMPI_COMM_WORLD_*, PMI_*, SLURM_PROCID/SLURM_NTASKS), else 0 of 1.
    config: the program's own switches, for the header (`dtrace diff` shows a
      difference as a suspect).
    replay_argv: the command that runs this rank again; default this Python
      program with its arguments, behind the launcher named by `launcher` (a
      command line, as a shell splits it) or by DTRACE_PYTHON_LAUNCHER.
    replicas, per_rank: the data-parallel replica groups for `dtrace replicas`
      ([[0, 1, 2]] or "0-2") and the step-scope state ops that are each rank's
      own (default: "rng"; add your data sampler's name).
    resume_at: the program's own resume (DTRACE_RESUME_AT overrides it).
    isolate: a function of one dtrace.Isolation that re-runs the layer or op it
      names from the captured inputs (dtrace.isolation); without it a replay
      asking for isolation fails naming what is missing, and `dtrace bisect`
      stops there (exit 2, after naming the suspect layer on stderr).
    """

    # dtrace record's automatic recorder (dtrace_torch.auto) says so: it does not
    # count as the program's own Recorder.
    _automatic = False

    # The private variables through which a replay command carries what the
    # workflow variables changed (DTRACE_* workflow variables are refused in a
    # replay), and the one naming the launcher. A subclass's names.
    CHECKPOINT_DIR_VARIABLE = "PYTHON_DTRACE_CHECKPOINT_DIR"
    DETERMINISTIC_VARIABLE = "PYTHON_DTRACE_DETERMINISTIC"
    LAUNCHER_VARIABLE = "DTRACE_PYTHON_LAUNCHER"

    def __init__(self, state: Optional[Mapping[str, Any]] = None, *, run_dir: Optional[str] = None,
                 checkpoint_dir: Optional[str] = None, checkpoint_every: int = 0, level: str = "step",
                 run_name: Optional[str] = None, rank: Optional[int] = None, world_size: Optional[int] = None,
                 config: Optional[Mapping[str, Any]] = None, replay_argv: Optional[Sequence[str]] = None,
                 launcher: Optional[str] = None, replicas: Union[None, str, Sequence[Sequence[int]]] = None,
                 per_rank: Optional[Sequence[str]] = None, resume_at: Optional[int] = None,
                 isolate: Optional[Callable[[Isolation], None]] = None):
        if level not in capi.LEVELS:
            raise ValueError(f"level={level!r}: not one of step, layer, kernel")
        if not self._automatic:
            global explicit_recorders
            if automatic_recording is not None:
                raise Error(f"dtrace record already records this process ({automatic_recording}): a program "
                            f"with its own Recorder must create it before its model's first forward, so that "
                            f"it records the run alone")
            explicit_recorders += 1
        if checkpoint_every < 0:
            raise ValueError(f"checkpoint_every={checkpoint_every}: not >= 0")
        if resume_at is not None and (isinstance(resume_at, bool) or operator.index(resume_at) < 0):
            raise ValueError(f"resume_at={resume_at!r}: not a step number >= 0")
        self.resume_at = None if resume_at is None else operator.index(resume_at)
        self.state: Dict[str, Any] = dict(state or {})
        self._check_state()
        self.checkpoint_every = checkpoint_every
        self._isolate_with = isolate
        default_rank, default_world = self._default_rank()
        self.rank = default_rank if rank is None else rank
        self.world_size = default_world if world_size is None else world_size
        own = self._default_per_rank() if per_rank is None else list(per_rank)
        for op in own:
            if not op or "," in op:
                raise ValueError(f"per_rank: {op!r} is not an op name (empty, or has a ',')")

        # Workflow variables that must survive into this run's replays, and the
        # private ones a replay command carries them in.
        workflow_dir = os.environ.get("DTRACE_CHECKPOINT_DIR") or None
        pinned_dir = os.environ.get(self.CHECKPOINT_DIR_VARIABLE) or None
        deterministic = (os.environ.get("DTRACE_DETERMINISTIC") or os.environ.get(self.DETERMINISTIC_VARIABLE)
                         or None)
        #: DTRACE_DETERMINISTIC as the program must apply it: True, False, or None (unset).
        self.deterministic: Optional[bool] = {"1": True, "0": False}.get(deterministic or "")
        if self.deterministic is not None:
            self._apply_deterministic(self.deterministic)
        self.checkpoint_dir = workflow_dir or pinned_dir or checkpoint_dir
        if self.checkpoint_dir and self.world_size > 1:
            # Each rank's state is its own (its data shard, its generators): one
            # subdirectory per rank, so ranks never overwrite each other's checkpoints.
            self.checkpoint_dir = checkpoints.rank_directory(self.checkpoint_dir, self.rank)
        header_config = self._header_config(dict(config or {}))
        if self.deterministic is not None:
            header_config["deterministic"] = self.deterministic
        recorded = recorded_command() if replay_argv is None else None
        if recorded is not None:
            # Under `dtrace record` the replay command is the recorded command,
            # launcher and all; the workflow variables are the run's own there.
            argv = recorded
        else:
            argv = list(replay_argv) if replay_argv is not None else self._replay_argv(
                workflow_dir or pinned_dir, deterministic, launcher)
        # How libdtrace's recorder is opened: once here, or once per request of a
        # replay session (dtrace-fp(5), "Replay sessions"), which this class
        # serves, and honouring pins (record(), "Pinned ops"): its headers
        # announce dtrace-replay/1.3.
        self._native_options = dict(
            run_dir=run_dir, run_name=run_name or (os.path.basename(run_dir) if run_dir else ""),
            rank=self.rank, world_size=self.world_size, level=capi.LEVELS[level],
            env_json=json.dumps({k: os.environ[k] for k in DETERMINISM_VARIABLES if os.environ.get(k)}),
            config_json=json.dumps(header_config), replay_argv=argv,
            replay_cwd=os.environ.get(RECORD_CWD_VARIABLE) or None if recorded is not None else None,
            replica_groups=self._replica_groups(replicas), replica_per_rank=",".join(own),
            serves_sessions=True, honours_pins=True)
        self.restored_at: Optional[int] = None
        self._unrecorded = False
        self._generators = Drawn()
        self._scopes: Dict[str, Scope] = {}  # scope(): one Scope per part
        self._dropped: frozenset = frozenset()  # record()'s levels dropped at once (_attach)
        self.current_step: Optional[int] = None
        self._steps_entered = 0  # rec.step() blocks entered: none means nothing was recorded
        # The recorder's own time inside steps (state, batch, gradients; not
        # record(), metric() or the generators at a step's end, where reading
        # the clocks would cost about what they do), wall and CPU: what
        # tools/bench reports at step level.
        self.record_seconds = 0.0
        self.record_cpu_seconds = 0.0
        # Under DTRACE_SESSION each request opens its own recorder (steps());
        # until the first, nothing is recorded and nothing of the user's written.
        self._session = capi.Session.open([self.rank])
        self._snapshot: Optional[Any] = None
        self.native: Optional[capi.Native] = None
        self.sink: Optional[Sink] = None
        if self._session is None:
            self._attach(capi.Native(**self._native_options))
        else:
            self.level, self.replaying = capi.LEVELS[level], True
        self._warn_if_unreplayable(replay_argv if recorded is None else recorded, launcher)

    # ---- what a subclass gives (dtrace_torch: PyTorch's) --------------------------
    def _check_state(self) -> None:
        for name, obj in self.state.items():
            checkpoints.state_dict_of(name, obj)  # TypeError naming it

    def _default_rank(self) -> Tuple[int, int]:
        return launcher_rank()

    def _default_per_rank(self) -> List[str]:
        return ["rng"]

    def _replica_groups(self, replicas: Union[None, str, Sequence[Sequence[int]]]) -> Optional[str]:
        return replica_groups_text(replicas)

    def _apply_deterministic(self, on: bool) -> None:
        """DTRACE_DETERMINISTIC: the program reads rec.deterministic and applies it."""

    def _header_config(self, extra: Dict[str, Any]) -> Dict[str, Any]:
        config: Dict[str, Any] = {"framework": "python", "python": platform.python_version()}
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            config["numpy"] = numpy.__version__
        config.update(extra)
        return config

    def _new_sink(self, native: "capi.Native") -> Sink:
        return Sink(native)

    def _attach_hooks(self) -> None:
        """Installs what records below step level for the level in force."""

    def _detach_hooks(self) -> None:
        """Takes away what _attach_hooks installed."""

    def _step_begins(self) -> None:
        """A step (or a repetition) starts: occurrence counters start again."""

    def _step_context(self):
        """What the step body runs inside (dtrace_torch: its dispatch mode)."""
        return contextlib.nullcontext()

    def _record_state(self) -> None:
        """The state at the step's start, as state records (dtrace-fp(5), "State records")."""
        lvl, st = capi.LEVEL_STEP, capi.IO_STATE
        for name, obj in self.state.items():
            self.sink.tensors_(lvl, name, st, state_values(name, checkpoints.state_dict_of(name, obj)))

    def _isolate(self, step: Optional[int]) -> None:
        """Runs the isolation the replay asks for (DTRACE_ISOLATE)."""
        if self._isolate_with is None:
            raise CaptureError(f"DTRACE_ISOLATE={self.native.isolate_scope()}: this program cannot re-run a layer "
                               "or op alone (it passed no isolate= to dtrace.Recorder)")
        self._isolate_with(Isolation(self))

    CHECKPOINT_SUFFIX = checkpoints.PLAIN_SUFFIX

    def _save_checkpoint(self, step: int) -> None:
        checkpoints.save(self.checkpoint_dir, step, self.state)

    def _load_checkpoint(self, step: int) -> None:
        checkpoints.load(self.checkpoint_dir, step, self.state)

    def _take_snapshot(self, step: int) -> Any:
        return checkpoints.snapshot(step, self.state)

    def _restore_snapshot(self, snapshot: Any) -> None:
        checkpoints.restore_snapshot(snapshot, self.state)

    # ---- attaching libdtrace's recorder ----------------------------------------
    def _attach(self, native: "capi.Native") -> None:
        """Records through `native` from now on: the level it is opened at
        decides what _attach_hooks installs."""
        self.native = native
        self.sink = self._new_sink(native)
        self.level = native.level()
        self.replaying = native.is_replay()
        # record()'s levels dropped at once: those above the level in force,
        # but kernel level in a replay, where an output may be pinned (asked
        # whatever the level, Sink.take_pins).
        self._dropped = frozenset(name for name, lvl in capi.LEVELS.items() if lvl > native.level_in_force
                                  and not (lvl == capi.LEVEL_KERNEL and self.replaying))
        try:
            self._attach_hooks()
        except BaseException:
            self.native = None
            native.close()
            raise

    def _detach(self) -> None:
        """Takes the hooks away and closes libdtrace's recorder (its log complete)."""
        self._detach_hooks()
        if self.native is not None:
            native, self.native = self.native, None
            native.close()

    # ---- the loop ----------------------------------------------------------------
    def steps(self, total: int) -> Iterator[int]:
        """The step numbers to run. Normally 0 .. total-1 (from DTRACE_RESUME_AT or
        else resume_at, up to DTRACE_STOP_AT), checkpointing as asked. Under
        DTRACE_REPLAY_STEP=N it restores the nearest checkpoint, yields the steps
        up to N (recorded only from N), and exits the process with status 0 after
        step N: nothing of the program after its loop runs in a replay.
        DTRACE_STOP_AT exits the same way. Under DTRACE_SESSION it serves the
        session's requests, each as such a launch would, and exits at its end."""
        if self._session is not None:
            yield from self._serve()
            self._exit()
        n = self.native
        replay = n.replay_step()
        isolating = n.isolate_scope() is not None
        if isolating and replay is None:
            self._isolate(None)
            self._exit()
        if replay is not None:
            yield from self._reach(replay, isolating)
            if isolating:
                self._isolate(replay)
            else:
                yield replay
            self._exit()
        start, stop = 0, n.stop_at()
        resume = n.resume_at()
        if resume is None:
            resume = self.resume_at
        if resume is not None:
            self._restore(resume)
            start = resume
        end = total if stop is None else stop
        if start == 0 and self.checkpoint_dir:
            self._save(0)
        for s in range(start, end):
            yield s
            following = s + 1
            if self.checkpoint_dir and (following == stop or (
                    self.checkpoint_every and following % self.checkpoint_every == 0 and following < total)):
                self._save(following)
        if end > start and not self._steps_entered:
            # Records outside a step are dropped on purpose (an evaluation loop),
            # so a loop that never entered rec.step() wrote a log of no steps
            # and no error: say it here, not at `dtrace diff`'s "no steps".
            warnings.warn(f"dtrace: steps() yielded steps {start}-{end - 1}, but no `with rec.step(step):` "
                          f"ran: nothing was recorded (records outside a step are dropped)", RuntimeWarning,
                          stacklevel=2)
        if stop is not None:
            self._exit()
        self.close()

    def _reach(self, step: int, isolating: bool) -> Iterator[int]:
        """Reaches the start of `step` as a replay does: the nearest checkpoint
        restored, the steps between yielded to the loop (recorded as
        DTRACE_FAST_FORWARD asks, or not at all)."""
        start = self._restore_nearest(step)
        self.native.fast_forward(step)
        # Before an isolation the steps run unseen by libdtrace: its repetitions
        # are written as steps 0, 1, ... and a rank's steps must increase.
        self._unrecorded = isolating
        for s in range(start, step):
            yield s
        self._unrecorded = False

    def _serve(self) -> Iterator[int]:
        """A replay session's requests, each served as a launch with its variables
        would be (dtrace-fp(5), "Replay sessions"). The first request that runs
        step N reaches it as a launch does (nearest checkpoint, the steps between
        yielded and recorded as DTRACE_FAST_FORWARD asks) and keeps a copy of the
        state at its start (what a checkpoint holds); every later request starts
        from that copy, so whatever a request changed is gone. What the loop body
        reads from elsewhere (an iterator it advances) is not restored: the
        step's batch must come from `state` or from the step number, as for any
        checkpoint."""
        session = self._session
        step = session.step()
        while session.next():
            self._attach(capi.Native(**self._native_options, session=session))
            isolating = self.native.isolate_scope() is not None
            if self._snapshot is None:
                yield from self._reach(step, isolating)
                self._snapshot = self._take_snapshot(step)
            else:
                self._restore_snapshot(self._snapshot)
                self.restored_at = step
                self.native.fast_forward(step)
            if isolating:
                self._isolate(step)
            else:
                yield step
            self._detach()
            session.done()

    def step(self, number: int, batch: Any = None) -> "_Step":
        """Brackets one optimizer step: records the step-start state and the batch
        (what the step consumed, as rec.batch), and at the end the Python and NumPy
        generators the step drew from and the step's time, then writes the step's
        lines (libdtrace flushes them whole). `with rec.step(n) as r:` gives rec."""
        return _Step(self, number, batch)

    def _begin_step(self, number: int, batch: Any) -> None:
        """What `with rec.step(number, batch):` does before the body."""
        self._steps_entered += 1
        self.current_step = number
        self._step_begins()
        self.native.begin_step(number)
        sink = self.sink
        sink.active = True
        self._ask_pins()
        sink.set_scope("step")
        with self._timed():
            # The state and the batch in one call into libdtrace (Sink.gather),
            # in the order they are given.
            sink.gather()
            try:
                self._record_state()
                self._generators.take()
                if batch is not None:
                    self._batch(batch)
            except BaseException:
                with contextlib.suppress(Exception):  # what came before the failure, as if written one by one
                    sink.flush()
                raise
            sink.flush()

    def _end_step(self, started: float) -> None:
        """What the step does after a body that ended normally."""
        sink = self.sink
        sink.set_scope("step")
        # Not timed: comparing the generators' words costs less than reading the clocks.
        drawn = self._generators.drawn()
        if drawn:
            sink.tensors_(capi.LEVEL_STEP, "rng", capi.IO_STATE, drawn)
        sink.scalar(capi.LEVEL_STEP, "time", capi.IO_TIMING, "step_seconds", time.perf_counter() - started)
        self.native.end_step()

    def _step_over(self) -> None:
        """After the step, however it ended."""
        self.sink.active = self.sink.pins = False
        self.current_step = None

    def _ask_pins(self) -> None:
        """A step or an isolated repetition has begun: whether any call of it
        may be pinned (DTRACE_PIN), asked of libdtrace once here rather than
        once per output recorded. Only a replay may pin (DTRACE_PIN is refused
        without DTRACE_REPLAY_STEP or DTRACE_ISOLATE, dtrace-fp(5)): a training
        run does not ask."""
        self.sink.pins = self.replaying and self.native.pins()

    def scope(self, part: str) -> "Scope":
        """Records inside scope <current>/<part> while the block runs (fwd,
        layer.1, mlp: a layer is a scope, dtrace-fp(5) "Layers"). `as` gives
        the whole path. Entering and leaving one costs no call into libdtrace:
        the scope reaches it when something is recorded inside (Sink.set_scope)."""
        scope = self._scopes.get(part)
        if scope is None:
            if not part or "/" in part:
                raise ValueError(f"scope part {part!r}: empty, or has a '/' (enter one part at a time)")
            if len(self._scopes) > 4096:  # parts named by a counter: bounded
                self._scopes.clear()
            scope = self._scopes[part] = Scope(self, part)
        return scope

    def wants(self, level: str) -> bool:
        """Whether records of `level` are taken here and now (the level in force,
        DTRACE_SCOPE, inside a step): skip computing what would not be recorded.
        True for "kernel" too in a step whose kernel outputs may be pinned
        (record()): a program that records its kernels only when wanted still
        hands them over there."""
        if self.sink is None or not self.sink.active:
            return False
        return bool(self.native.wants(capi.LEVELS[level]) or (level == "kernel" and self.sink.pins))

    def record(self, op: str, values: Mapping[str, Any], io: str = "out",
               level: str = "step") -> Mapping[str, Any]:
        """Named arrays (or numbers) as records of `op` in the current scope:
        io "in", "out" or "state"; level "step", "layer" or "kernel". A layer's
        own records have op = the scope's last part; a kernel's, its name.

        A kernel's outputs (io "out", level "kernel") may be pinned by a
        replay (dtrace-fp(5), "Pinned ops"): record them right after computing
        them, before anything reads them. A pinned output takes the pinned
        bytes: a writable host array (NumPy) in place; anything else is
        replaced in what this returns, `values` with the pinned ones swapped
        (a Python number by the pinned number, another array by a new NumPy
        array). Returns `values` itself when nothing was pinned."""
        # Most calls at step level end here, touching nothing else: a level
        # above the one in force, never written (dtrace_recorder_wants).
        if level in self._dropped and io in RECORD_IOS:
            return values
        code = RECORD_IOS.get(io)
        if code is None:
            raise ValueError(f"io={io!r}: not one of in, out, state")
        lvl = capi.LEVELS.get(level)
        if lvl is None:
            raise ValueError(f"level={level!r}: not one of step, layer, kernel")
        sink = self.sink
        if sink is None or not sink.active:
            return values
        # Asked whatever the level in force: libdtrace counts every call.
        if sink.pins and code == capi.IO_OUT and lvl == capi.LEVEL_KERNEL:
            items = list(values.items())
            taken = sink.take_pins(op, items)
            if any(new is not old for (_, new), (_, old) in zip(taken, items)):
                values, items = dict(taken), taken
            sink.tensors_(lvl, op, code, items)
            return values
        # Not timed (record_seconds): two clock reads cost more than such a call.
        if lvl <= sink.native.level_in_force:
            sink.tensors_(lvl, op, code, values.items())
        return values

    def metric(self, name: str, value: Any) -> None:
        """A metric (loss, grad norm) by its exact bits: a number or a one-element array."""
        # Not timed (record_seconds), as record() is not: four clock reads would
        # cost about what recording one scalar does.
        sink = self.sink
        if sink.scope == "step":  # where a step's body leaves it
            sink.scalar(capi.LEVEL_STEP, name, capi.IO_METRIC, name, value)
            return
        previous = sink.set_scope("step")
        sink.scalar(capi.LEVEL_STEP, name, capi.IO_METRIC, name, value)
        sink.set_scope(previous)

    def batch(self, value: Any) -> None:
        """What the step consumed: the arrays and numbers in `value` (an array, a
        number, or tuples, lists and dicts of them; anything else by its repr's
        bytes, as state), as step-level `in` records of op "batch" named
        batch, batch.0, batch.<key>, ... Each call inside a step is one more
        occurrence (a micro-batch). A first difference there is the data, not a
        kernel (dtrace(1), bisect, verdict data)."""
        with self._timed():
            self._batch(value)

    def _batch(self, value: Any) -> None:
        previous = self.sink.set_scope("step")
        self.sink.tensors_(capi.LEVEL_STEP, "batch", capi.IO_IN, self._flatten("batch", value))
        self.sink.set_scope(previous)

    def _flatten(self, prefix: str, value: Any) -> List[Tuple[str, Any]]:
        # The batch's leaves as the state's: a pure-Python program's batch is
        # lists of numbers (token ids, labels), which flatten() would drop, so
        # two runs fed different data compared equal.
        return list(state_values(prefix, value))

    def close(self) -> None:
        """Closes the log (complete). steps() closes it after the last step."""
        self._detach()
        if self._session is not None:
            self._session.close()
            self._session = None

    # ---- what the loop does not see ---------------------------------------------
    def _timed(self) -> "_Timed":
        """`with self._timed():` adds the block's wall and CPU time to
        record_seconds and record_cpu_seconds."""
        return _Timed(self)

    def _exit(self) -> None:
        self.close()
        raise SystemExit(0)

    def _replay_argv(self, checkpoint_dir: Optional[str], deterministic: Optional[str],
                     launcher: Optional[str]) -> List[str]:
        argv = [sys.executable] + [os.path.abspath(sys.argv[0]) if sys.argv and os.path.isfile(sys.argv[0])
                                   else (sys.argv[0] if sys.argv else "")] + sys.argv[1:]
        pinned = []
        if checkpoint_dir:
            pinned.append(f"{self.CHECKPOINT_DIR_VARIABLE}={os.path.abspath(checkpoint_dir)}")
        if deterministic:
            pinned.append(f"{self.DETERMINISTIC_VARIABLE}={deterministic}")
        # The launcher that started this rank (torchrun, mpirun, a script) is the
        # replay command: a replay restarts every rank through it (dtrace-fp(5),
        # several processes). A command line, split as a shell would; its first
        # word a path or a program on PATH. The rank's own command follows it as
        # `python script args`.
        words = shlex.split(self._launcher_line(launcher))
        if words:
            first = words[0]
            if os.sep in first or os.path.isfile(first):
                first = os.path.abspath(first)
            else:
                first = shutil.which(first) or first
            argv = [first] + words[1:] + argv
        return [shutil.which("env") or "/usr/bin/env"] + pinned + argv if pinned else argv

    def _launcher_line(self, launcher: Optional[str]) -> str:
        """The launcher's command line: `launcher=`, else the launcher variable."""
        return launcher if launcher is not None else os.environ.get(self.LAUNCHER_VARIABLE) or ""

    def _warn_if_unreplayable(self, replay_argv: Optional[Sequence[str]], launcher: Optional[str]) -> None:
        """A rank of several processes whose replay command names no launcher
        would be replayed alone, without its rank: bisect's replays then fail
        far from the cause (no checkpoint found), so say it when recording."""
        if self.world_size > 1 and replay_argv is None and not self._launcher_line(launcher).strip() \
                and not self.replaying:
            warnings.warn(f"dtrace: rank {self.rank} of {self.world_size}, but no launcher is named "
                          f"({self.LAUNCHER_VARIABLE} or launcher=): this run's replay command restarts this "
                          f"process alone, without its rank, so dtrace bisect cannot replay the job; set "
                          f"{self.LAUNCHER_VARIABLE} to the launcher's command line", RuntimeWarning, stacklevel=3)

    def _restore_nearest(self, step: int) -> int:
        if not self.checkpoint_dir:
            raise CheckpointError(f"DTRACE_REPLAY_STEP={step}: this run has no checkpoint_dir to restore from")
        found = checkpoints.nearest(self.checkpoint_dir, step, self.CHECKPOINT_SUFFIX)
        if found is None:
            ranks = checkpoints.rank_directories(self.checkpoint_dir) if self.world_size == 1 else []
            why = (f"; it holds {', '.join(ranks)}, a job of several processes' checkpoints, and this replay runs "
                   f"one process without a rank: the run was recorded with no launcher in its replay command "
                   f"(set {self.LAUNCHER_VARIABLE} to the launcher's command line when recording)") if ranks else ""
            raise CheckpointError(f"DTRACE_REPLAY_STEP={step}: no checkpoint at or before step {step} in "
                                  f"{self.checkpoint_dir} (it has: "
                                  f"{checkpoints.steps_in(self.checkpoint_dir, self.CHECKPOINT_SUFFIX) or 'none'}){why}")
        self._restore(found)
        return found

    def _restore(self, step: int) -> None:
        if not self.checkpoint_dir:
            raise CheckpointError(f"restoring step {step}: this run has no checkpoint_dir")
        self._load_checkpoint(step)
        self.restored_at = step

    def _save(self, step: int) -> None:
        if self.replaying:  # a replay writes nothing of the user's
            return
        self._save_checkpoint(step)
