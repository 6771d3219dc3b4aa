"""The Recorder: what a training loop adds to become a dtrace workload.

    rec = dtrace_torch.Recorder(model, optimizer, run_dir="runs/a", checkpoint_dir="ckpt/a",
                                checkpoint_every=100, state={"data": sampler},
                                resume_at=args.resume)
    for step in rec.steps(total_steps):
        batch = next(batches)
        with rec.step(step, batch=batch):
            loss = model(batch); loss.backward(); optimizer.step(); optimizer.zero_grad()
            rec.metric("loss", loss)

The log, the replay request, captures and multi-process outputs are libdtrace's
(through its C API, _lib.py); this class decides what PyTorch state to hand it and
when, and answers the replay protocol's requests for restore and isolation.
"""
from __future__ import annotations

import contextlib
import json
import operator
import os
import random
import shlex
import shutil
import sys
import time
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Union

import torch

from . import _lib, checkpoints, compiled, environment
from .calls import CallLog
from .collectives import Collectives
from .dispatch import OpRecorder, named_inputs
from .errors import CheckpointError, DtraceError
from .hooks import ModuleHooks
from .records import Sink, flatten, state_values

# Private variables through which a run's replay command carries what the workflow
# variables changed (DTRACE_* workflow variables are refused in a replay).
CHECKPOINT_DIR_VARIABLE = "TORCH_DTRACE_CHECKPOINT_DIR"
DETERMINISTIC_VARIABLE = "TORCH_DTRACE_DETERMINISTIC"
LAUNCHER_VARIABLE = "DTRACE_TORCH_LAUNCHER"


def _distributed() -> tuple:
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if os.environ.get("RANK") and os.environ.get("WORLD_SIZE"):  # torchrun, before init_process_group
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return 0, 1


def _as_tensor(value: Any) -> torch.Tensor:
    """A number as a 0-d tensor of its exact type (Python floats are f64)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, float):
        return torch.tensor(value, dtype=torch.float64)
    return torch.tensor(value)


def _replay_argv(checkpoint_dir: Optional[str], deterministic: Optional[str]) -> list:
    argv = [sys.executable] + [os.path.abspath(sys.argv[0]) if sys.argv and os.path.isfile(sys.argv[0])
                               else (sys.argv[0] if sys.argv else "")] + sys.argv[1:]
    pinned = []
    if checkpoint_dir:
        pinned.append(f"{CHECKPOINT_DIR_VARIABLE}={os.path.abspath(checkpoint_dir)}")
    if deterministic:
        pinned.append(f"{DETERMINISTIC_VARIABLE}={deterministic}")
    # The launcher that started this rank (torchrun, or a script) is the replay
    # command: a replay restarts every rank through it (dtrace-fp(5), several
    # processes). A command line, split as a shell would; its first word a path
    # or a program on PATH. The rank's own command follows it as
    # `python script args` (torchrun needs --no_python for that).
    launcher = shlex.split(os.environ.get(LAUNCHER_VARIABLE) or "")
    if launcher:
        first = launcher[0]
        if os.sep in first or os.path.isfile(first):
            first = os.path.abspath(first)
        else:
            first = shutil.which(first) or first
        argv = [first] + launcher[1:] + argv
    return [shutil.which("env") or "/usr/bin/env"] + pinned + argv if pinned else argv


def _whole_world_ddp(model: torch.nn.Module, world_size: int) -> Optional[str]:
    """The one group "0-<W-1>" when every rank is a replica of every other without
    guessing: the model is wrapped in DistributedDataParallel over a process group
    of the whole world. Else None (a DDP over a subgroup says nothing about the
    other groups)."""
    dist = getattr(torch, "distributed", None)
    if world_size < 2 or dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    from torch.nn.parallel import DistributedDataParallel
    if not isinstance(model, DistributedDataParallel) or dist.get_world_size() != world_size:
        return None
    group = getattr(model, "process_group", None)  # None: the default group, the world
    if group is not None and dist.get_world_size(group) != world_size:
        return None
    return f"0-{world_size - 1}"


def _replica_groups(replicas: Union[None, str, Sequence[Sequence[int]]], model: torch.nn.Module,
                    world_size: int) -> Optional[str]:
    """The header's replica groups in `dtrace replicas --groups`' grammar ("0,1:2,3"),
    which libdtrace checks (an invalid value is a RecorderError naming it)."""
    if replicas is None:
        return _whole_world_ddp(model, world_size)
    if isinstance(replicas, str):
        return replicas
    # operator.index: ranks are integers, not 1.0 or "1".
    return ":".join(",".join(str(operator.index(r)) for r in group) for group in replicas)


class _HostGenerators:
    """Python's `random` and NumPy's global generator as a step found them.

    Both are seeded from the operating system when imported, so in a program that
    never seeds them they differ in every process. Their state is recorded only for
    a step that advanced them (docs/torch.md, "What is recorded"): a generator the
    step drew from is part of what it computed, one it never read is not, and two
    identical computations must not diverge over a state nothing reads. torch's
    generators start from a fixed seed in every process and are recorded always."""

    def __init__(self):
        self.python: Any = None
        self.numpy: Any = None

    def take(self) -> None:
        self.python = random.getstate()
        numpy = sys.modules.get("numpy")
        self.numpy = numpy.random.get_state() if numpy is not None else None

    def drawn(self) -> list:
        """(name, state at the step's start) of each generator the step advanced."""
        out = []
        if self.python is not None and random.getstate() != self.python:
            out.append(("python", torch.tensor(list(self.python[1]), dtype=torch.int64)))
        numpy = sys.modules.get("numpy")
        if self.numpy is not None and numpy is not None:
            now = numpy.random.get_state()
            # (name, keys, position, has_gauss, cached_gaussian): the keys alone do
            # not change between refills, the position does.
            if now[2:] != self.numpy[2:] or not numpy.array_equal(now[1], self.numpy[1]):
                out.append(("numpy", torch.tensor(list(self.numpy[1].astype("int64")) + [int(self.numpy[2])],
                                                  dtype=torch.int64)))
        return out


class Recorder:
    """Records one rank of a PyTorch training job and answers dtrace's replays.

    model, optimizer: what a step changes; both are checkpointed and recorded.
    run_dir: where the run's log goes (<run_dir>/rank<r>.jsonl); never appended to.
    checkpoint_dir, checkpoint_every: the state at the start of every
      checkpoint_every-th step (and of step 0) goes to <checkpoint_dir>/step-<K>.pt;
      replays restore from the nearest one.
    state: further objects with state_dict()/load_state_dict() (a data sampler),
      checkpointed, restored and recorded with the model.
    level: "step", "layer" or "kernel" for a normal run (DTRACE_LEVEL overrides).
    rank, world_size: default from torch.distributed when it is initialized.
    config: extra header config (the program's own switches).
    replicas: the data-parallel replica groups, for the header (dtrace-fp(5)) that
      `dtrace replicas` reads: [[0, 1, 2, 3]] or the string "0-3" (groups split by
      ':', ranks and ranges by ','). None (the default): one group of every rank
      when the model is a DistributedDataParallel over the whole world, else no
      groups are written (they are not guessed). [] or "": none, even for DDP.
    per_rank: the step-scope state ops that are each rank's own, not compared
      between replicas; default "rng" and the names in `state` (data samplers).
    resume_at: the program's own resume: steps() restores the checkpoint of this
      step and starts there (DTRACE_RESUME_AT, the workflow variable, overrides it;
      a replay restores what it replays and ignores both).
    """

    def __init__(self, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer] = None, *,
                 run_dir: Optional[str] = None, checkpoint_dir: Optional[str] = None,
                 checkpoint_every: int = 0, state: Optional[Mapping[str, Any]] = None,
                 level: str = "step", run_name: Optional[str] = None, rank: Optional[int] = None,
                 world_size: Optional[int] = None, config: Optional[Mapping[str, Any]] = None,
                 replay_argv: Optional[Sequence[str]] = None, backward_hooks: bool = True,
                 replicas: Union[None, str, Sequence[Sequence[int]]] = None,
                 per_rank: Optional[Sequence[str]] = None, resume_at: Optional[int] = None):
        if level not in _lib.LEVELS:
            raise ValueError(f"level={level!r}: not one of step, layer, kernel")
        if checkpoint_every < 0:
            raise ValueError(f"checkpoint_every={checkpoint_every}: not >= 0")
        if resume_at is not None and (isinstance(resume_at, bool) or operator.index(resume_at) < 0):
            raise ValueError(f"resume_at={resume_at!r}: not a step number >= 0")
        self.resume_at = None if resume_at is None else operator.index(resume_at)
        for name, obj in (state or {}).items():
            if not (hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict")):
                raise TypeError(f"state[{name!r}]: {type(obj).__name__} has no state_dict/load_state_dict")
        self.model, self.optimizer = model, optimizer
        self.extra: Dict[str, Any] = dict(state or {})
        self.checkpoint_every = checkpoint_every
        self.backward_hooks = backward_hooks
        dist_rank, dist_world = _distributed()
        self.rank = dist_rank if rank is None else rank
        self.world_size = dist_world if world_size is None else world_size
        own = ["rng"] + list(self.extra) if per_rank is None else list(per_rank)
        for op in own:
            if not op or "," in op:
                raise ValueError(f"per_rank: {op!r} is not an op name (empty, or has a ',')")

        # Workflow variables that must survive into this run's replays, and the
        # private ones a replay command carries them in.
        workflow_dir = os.environ.get("DTRACE_CHECKPOINT_DIR") or None
        pinned_dir = os.environ.get(CHECKPOINT_DIR_VARIABLE) or None
        deterministic = os.environ.get("DTRACE_DETERMINISTIC") or os.environ.get(DETERMINISTIC_VARIABLE) or None
        if deterministic in ("0", "1"):
            environment.apply_deterministic(deterministic == "1")
        self.checkpoint_dir = workflow_dir or pinned_dir or checkpoint_dir
        if self.checkpoint_dir and self.world_size > 1:
            # Each rank's state is its own (its data shard, its RNG): one
            # subdirectory per rank, so ranks never overwrite each other's checkpoints.
            self.checkpoint_dir = os.path.join(self.checkpoint_dir, f"rank{self.rank}")
        header_config = environment.config(dict(config or {}))
        if deterministic in ("0", "1"):
            header_config["deterministic"] = deterministic == "1"
        argv = list(replay_argv) if replay_argv is not None else _replay_argv(
            workflow_dir or pinned_dir, deterministic)
        # How libdtrace's recorder is opened: once here, or once per request of a
        # replay session (dtrace-fp(5), "Replay sessions"), which this package
        # serves: its headers announce dtrace-replay/1.2.
        self._native_options = dict(
            run_dir=run_dir, run_name=run_name or (os.path.basename(run_dir) if run_dir else ""),
            rank=self.rank, world_size=self.world_size, level=_lib.LEVELS[level],
            env_json=json.dumps(environment.env()), config_json=json.dumps(header_config),
            replay_argv=argv, replay_cwd=None, replica_groups=_replica_groups(replicas, model, self.world_size),
            replica_per_rank=",".join(own), serves_sessions=True)
        self.restored_at: Optional[int] = None
        self._unrecorded = False
        self._generators = _HostGenerators()
        self.current_step: Optional[int] = None
        # The recorder's own time inside steps (state, gradients, metrics), wall
        # and CPU: what tools/bench/torch_recording.py reports at step level.
        self.record_seconds = 0.0
        self.record_cpu_seconds = 0.0
        self._param_names = {id(p): n for n, p in model.named_parameters()}
        self._hooks = self._mode = self._collectives = self._calls = self._compiled = None
        self._optimizer_hooks: list = []
        # Under DTRACE_SESSION each request opens its own recorder (steps());
        # until the first, nothing is recorded and nothing of the user's written.
        self._session = _lib.Session.open([self.rank])
        self._snapshot: Optional[Dict[str, Any]] = None
        self.native: Optional[_lib.Native] = None
        if self._session is None:
            self._attach(_lib.Native(**self._native_options))
        else:
            self.level, self.replaying = _lib.LEVELS[level], True

    def _attach(self, native: "_lib.Native") -> None:
        """Records through `native` from now on: the level it is opened at decides
        the hooks (modules at layer level, ops at kernel level)."""
        self.native = native
        self.sink = Sink(native)
        self.level = native.level()
        self.replaying = native.is_replay()
        capture = native.capture_dir()
        self._calls = CallLog(capture, self.rank) if capture else None
        try:
            regions = compiled.find(self.model) if self.level >= _lib.LEVEL_LAYER else {}
        except DtraceError:
            self.native, native = None, self.native
            native.close()
            raise
        self._hooks = ModuleHooks(self, self.model, regions) if self.level >= _lib.LEVEL_LAYER else None
        self._mode = OpRecorder(self) if self.level >= _lib.LEVEL_KERNEL else None
        self._compiled = compiled.Regions(self, regions) if regions else None
        self._collectives = Collectives(self) if self.level >= _lib.LEVEL_LAYER and self.world_size > 1 else None
        self._patch_optimizer()

    # ---- the loop ----------------------------------------------------------
    def steps(self, total: int) -> Iterator[int]:
        """The step numbers to run. Normally 0 .. total-1 (from DTRACE_RESUME_AT or
        else resume_at, up to DTRACE_STOP_AT), checkpointing as asked. Under DTRACE_REPLAY_STEP=N it
        restores the nearest checkpoint, yields the steps up to N (recorded only
        from N), and exits the process with status 0 after step N: nothing of the
        program after its loop runs in a replay. DTRACE_STOP_AT exits the same way."""
        if self._session is not None:
            yield from self._serve()
            self._exit()
        n = self.native
        replay = n.replay_step()
        isolating = n.isolate_scope() is not None
        if isolating and replay is None:
            from .isolation import isolate
            isolate(self, None)
            self._exit()
        if replay is not None:
            yield from self._reach(replay, isolating)
            if isolating:
                from .isolation import isolate
                isolate(self, replay)
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
        state at its start (checkpoints.snapshot: what a checkpoint holds); every
        later request starts from that copy, so whatever a request changed (an
        optimizer step, an isolation's captured parameters, RNG draws, a sampler
        named in `state`) is gone. What the loop body reads from elsewhere (an
        iterator it advances) is not restored: the step's batch must come from
        `state` or from the step number, as for any checkpoint."""
        session = self._session
        step = session.step()
        while session.next():
            self._attach(_lib.Native(**self._native_options, session=session))
            n = self.native
            isolating = n.isolate_scope() is not None
            if self._snapshot is None:
                yield from self._reach(step, isolating)
                self._snapshot = checkpoints.snapshot(step, self.model, self.optimizer, self.extra)
            else:
                checkpoints.restore_snapshot(self._snapshot, self.model, self.optimizer, self.extra)
                self.restored_at = step
                n.fast_forward(step)
            if isolating:
                from .isolation import isolate
                isolate(self, step)
            else:
                yield step
            self._detach()
            session.done()

    @contextlib.contextmanager
    def step(self, number: int, batch: Any = None):
        """Brackets one optimizer step: records the step-start state and the batch
        (what the step consumed, as rec.batch), and at the end the Python and NumPy
        generators the step drew from and the step's time, then writes the step's
        lines (libdtrace flushes them whole)."""
        if self._unrecorded:
            yield self
            return
        started = time.perf_counter()
        self.current_step = number
        if self._hooks:
            self._hooks.new_step()
        if self._mode:
            self._mode.new_step()
        self.native.begin_step(number)
        self.sink.active = True
        self.sink.set_scope("step")
        with self._timed():
            self._record_state()
            self._generators.take()
        if batch is not None:
            self.batch(batch)
        mode = self._mode if self._mode is not None else contextlib.nullcontext()
        try:
            with mode:
                yield self
            self.sink.set_scope("step")
            with self._timed():
                self.sink.tensors_(_lib.LEVEL_STEP, "rng", _lib.IO_STATE, self._generators.drawn())
            self.sink.scalar(_lib.LEVEL_STEP, "time", _lib.IO_TIMING, "step_seconds",
                             time.perf_counter() - started)
            self.native.end_step()
        finally:
            self.sink.active = False
            self.current_step = None

    def metric(self, name: str, value: Any) -> None:
        """A metric (loss, grad norm) by its exact bits: a number or a one-element tensor."""
        previous = self.sink.set_scope("step")
        with self._timed():
            self.sink.scalar(_lib.LEVEL_STEP, name, _lib.IO_METRIC, name, value)
        self.sink.set_scope(previous)

    def batch(self, value: Any) -> None:
        """What the step consumed: the tensors in `value` (a tensor, or tuples, lists
        and dicts of them), as step-level `in` records of op "batch" named batch,
        batch.0, batch.<key>, ... Each call inside a step is one more occurrence (a
        micro-batch). A first difference there is the data, not a kernel (dtrace(1),
        bisect, verdict data)."""
        previous = self.sink.set_scope("step")
        with self._timed():
            self.sink.tensors_(_lib.LEVEL_STEP, "batch", _lib.IO_IN, flatten("batch", value))
        self.sink.set_scope(previous)

    def record(self, op: str, tensors: Mapping[str, torch.Tensor], io: str = "out", level: str = "step") -> None:
        """Any further named tensors, in the current scope (the batch, a logit)."""
        ios = {"in": _lib.IO_IN, "out": _lib.IO_OUT, "state": _lib.IO_STATE}
        with self._timed():
            self.sink.tensors_(_lib.LEVELS[level], op, ios[io], list(tensors.items()))

    def close(self) -> None:
        self._detach()
        if self._session is not None:
            self._session.close()
            self._session = None

    def _detach(self) -> None:
        """Takes the hooks away and closes libdtrace's recorder (its log complete)."""
        for handle in self._optimizer_hooks:
            handle.remove()
        self._optimizer_hooks = []
        if self.optimizer is not None and "step" in vars(self.optimizer) and not hasattr(
                self.optimizer, "register_step_pre_hook"):
            del self.optimizer.step  # the class's own step again (torch 1.13's wrapper)
        if self._hooks:
            self._hooks.remove()
            self._hooks = None
        if self._compiled:
            self._compiled.remove()
            self._compiled = None
        if self._mode is not None:
            self._mode = None
        if self._collectives:
            self._collectives.remove()
            self._collectives = None
        if self._calls:
            self._calls.close()
            self._calls = None
        if self.native is not None:
            native, self.native = self.native, None
            native.close()

    # ---- what the loop does not see -------------------------------------------
    @contextlib.contextmanager
    def _timed(self):
        t, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.record_seconds += time.perf_counter() - t
            self.record_cpu_seconds += time.process_time() - c

    def _exit(self) -> None:
        self.close()
        raise SystemExit(0)

    def _record_state(self) -> None:
        sink, lvl, st = self.sink, _lib.LEVEL_STEP, _lib.IO_STATE
        if not self.native.wants(lvl):
            return
        sink.tensors_(lvl, "param", st, list(self.model.named_parameters()))
        sink.tensors_(lvl, "buffer", st, [(n, b) for n, b in self.model.named_buffers() if b is not None])
        if self.optimizer is not None:
            items = []
            for p, s in self.optimizer.state.items():
                pname = self._param_names.get(id(p), f"param{id(p)}")
                # The state_dict rule (records.state_values): SGD without
                # momentum keeps momentum_buffer None, which holds nothing.
                items += [(key, _as_tensor(value)) for key, value in state_values(pname, s)]
            sink.tensors_(lvl, "optim", st, items)
        rng = [("torch.cpu", torch.get_rng_state())]
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            rng += [(f"torch.cuda.{i}", s) for i, s in enumerate(torch.cuda.get_rng_state_all())]
        # Python's and NumPy's generators: at the step's end, when it drew from them (_HostGenerators).
        sink.tensors_(lvl, "rng", st, rng)
        # Numbers as 0-d tensors (i64, f64, bool): state is compared by fingerprint.
        for name, obj in self.extra.items():
            sink.tensors_(lvl, name, st, [(key, _as_tensor(value)) for key, value in state_values(name, obj.state_dict())])

    def _patch_optimizer(self) -> None:
        """The gradients as the optimizer sees them, before it steps, and its own
        kernels under scope "opt". torch 2.x: the optimizer's step pre- and
        post-hooks, which leave its `step` as it is (an LR scheduler checks at
        its first step that `step` is still its own wrapper, and close() must
        not take that wrapper away). torch 1.13 has no step hooks: the bound
        step method is wrapped instead."""
        if self.optimizer is None:
            return
        opt, rec = self.optimizer, self

        def before():
            if rec.current_step is not None:
                rec.sink.set_scope("step")
                with rec._timed():
                    rec.sink.tensors_(_lib.LEVEL_STEP, "grads", _lib.IO_OUT,
                                      [(n, p.grad) for n, p in rec.model.named_parameters() if p.grad is not None])
                rec.sink.set_scope("opt")

        if hasattr(opt, "register_step_pre_hook"):
            self._optimizer_hooks = [opt.register_step_pre_hook(lambda *_: before()),
                                     opt.register_step_post_hook(lambda *_: rec.sink.set_scope("step"))]
            return
        original = opt.step

        def step(*args, **kwargs):
            before()
            try:
                return original(*args, **kwargs)
            finally:
                rec.sink.set_scope("step")

        opt.step = step

    def _restore_nearest(self, step: int) -> int:
        if not self.checkpoint_dir:
            raise CheckpointError(f"DTRACE_REPLAY_STEP={step}: this run has no checkpoint_dir to restore from")
        found = checkpoints.nearest(self.checkpoint_dir, step)
        if found is None:
            raise CheckpointError(f"DTRACE_REPLAY_STEP={step}: no checkpoint at or before step {step} in "
                                  f"{self.checkpoint_dir} (it has: {checkpoints.steps_in(self.checkpoint_dir) or 'none'})")
        self._restore(found)
        return found

    def _restore(self, step: int) -> None:
        if not self.checkpoint_dir:
            raise CheckpointError(f"restoring step {step}: this run has no checkpoint_dir")
        checkpoints.load(self.checkpoint_dir, step, self.model, self.optimizer, self.extra)
        self.restored_at = step

    def _save(self, step: int) -> None:
        if self.replaying:  # a replay writes nothing of the user's
            return
        checkpoints.save(self.checkpoint_dir, step, self.model, self.optimizer, self.extra)

    def log_call(self, scope: str, op: str, occurrence: int, args, kwargs, names=None) -> None:
        if self._calls is not None and self.native.captures():
            self._calls.write(self.current_step if self.current_step is not None else -1, scope, op,
                              occurrence, args, kwargs, names)
