"""The Recorder: what a training loop adds to become a dtrace workload.

    rec = dtrace_torch.Recorder(model, optimizer, run_dir="runs/a", checkpoint_dir="ckpt/a",
                                checkpoint_every=100, state={"data": sampler},
                                resume_at=args.resume)
    for step in rec.steps(total_steps):
        batch = next(batches)
        with rec.step(step, batch=batch):
            loss = model(batch); loss.backward(); optimizer.step(); optimizer.zero_grad()
            rec.metric("loss", loss)

The loop every recorder shares (where to start and stop, checkpoints and
restore, replays of one step, isolation requests, replay sessions) is the dtrace
package's Recorder (dtrace.recording), which this class is with PyTorch's state:
the model, the optimizer, torch's generators, module hooks and a dispatch mode
for ATen ops, and isolation by re-running a module or an op.
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from dtrace import capi
from dtrace.recording import Recorder as _Recorder, launcher_rank, replica_groups_text

from . import checkpoints, compiled, environment
from .calls import CallLog
from .collectives import Collectives
from .dispatch import OpRecorder
from .hooks import ModuleHooks
from .records import Sink, flatten, state_values


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


class Recorder(_Recorder):
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

    # The private variables a replay command carries the workflow variables in,
    # and the launcher's (docs/torch.md): dtrace_torch's names since 1.0.
    CHECKPOINT_DIR_VARIABLE = "TORCH_DTRACE_CHECKPOINT_DIR"
    DETERMINISTIC_VARIABLE = "TORCH_DTRACE_DETERMINISTIC"
    LAUNCHER_VARIABLE = "DTRACE_TORCH_LAUNCHER"
    CHECKPOINT_SUFFIX = checkpoints.SUFFIX

    def __init__(self, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer] = None, *,
                 run_dir: Optional[str] = None, checkpoint_dir: Optional[str] = None,
                 checkpoint_every: int = 0, state: Optional[Mapping[str, Any]] = None,
                 level: str = "step", run_name: Optional[str] = None, rank: Optional[int] = None,
                 world_size: Optional[int] = None, config: Optional[Mapping[str, Any]] = None,
                 replay_argv: Optional[Sequence[str]] = None, backward_hooks: bool = True,
                 replicas: Union[None, str, Sequence[Sequence[int]]] = None,
                 per_rank: Optional[Sequence[str]] = None, resume_at: Optional[int] = None):
        # What the base class's __init__ reaches through the methods below
        # (its hooks attach there), so set first.
        self.model, self.optimizer = model, optimizer
        self.backward_hooks = backward_hooks
        self._param_names = {id(p): n for n, p in model.named_parameters()}
        self._hooks = self._mode = self._ops = self._collectives = self._calls = self._compiled = None
        self._optimizer_hooks: list = []
        self._step_patched = False  # torch 1.13: the optimizer's bound step is _patch_optimizer's wrapper
        super().__init__(state, run_dir=run_dir, checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                         level=level, run_name=run_name, rank=rank, world_size=world_size, config=config,
                         replay_argv=replay_argv, replicas=replicas, per_rank=per_rank, resume_at=resume_at)

    @property
    def extra(self) -> Dict[str, Any]:
        """The further state objects (`state`), beside the model and optimizer."""
        return self.state

    # ---- PyTorch's part of the base class's loop ---------------------------------
    def _exit(self) -> None:
        """A replay ends here, before the program's own end: a process group
        left to the interpreter's teardown can abort the process (gloo's
        worker threads: "terminate called without an active exception"),
        which bisect would take for a replay that failed."""
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        super()._exit()

    def _check_state(self) -> None:
        for name, obj in self.state.items():
            if not (hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict")):
                raise TypeError(f"state[{name!r}]: {type(obj).__name__} has no state_dict/load_state_dict")

    def _default_rank(self) -> Tuple[int, int]:
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return launcher_rank()  # torchrun's RANK/WORLD_SIZE, before init_process_group

    def _default_per_rank(self) -> List[str]:
        return ["rng"] + list(self.state)

    def _replica_groups(self, replicas) -> Optional[str]:
        if replicas is None:
            return _whole_world_ddp(self.model, self.world_size)
        return replica_groups_text(replicas)

    def _apply_deterministic(self, on: bool) -> None:
        environment.apply_deterministic(on)

    def _header_config(self, extra: Dict[str, Any]) -> Dict[str, Any]:
        return environment.config(extra)

    def _new_sink(self, native: "capi.Native") -> Sink:
        return Sink(native)

    def _flatten(self, prefix: str, value: Any):
        return flatten(prefix, value)

    def _attach_hooks(self) -> None:
        """The level in force decides the hooks: modules at layer level, ops at kernel level."""
        capture = self.native.capture_dir()
        self._calls = CallLog(capture, self.rank) if capture else None
        regions = compiled.find(self.model) if self.level >= capi.LEVEL_LAYER else {}
        if capture and regions and self.level >= capi.LEVEL_KERNEL:
            compiled.declare(capture, self.rank, regions)  # bisect's kernel pass reads it
        self._hooks = ModuleHooks(self, self.model, regions) if self.level >= capi.LEVEL_LAYER else None
        # The dispatch mode: recording ATen ops at kernel level (_mode), and
        # entered at any level in a step where pins may apply (_active_mode).
        self._ops = OpRecorder(self)
        self._mode = self._ops if self.level >= capi.LEVEL_KERNEL else None
        self._compiled = compiled.Regions(self, regions) if regions else None
        self._collectives = Collectives(self) if self.level >= capi.LEVEL_LAYER and self.world_size > 1 else None
        self._patch_optimizer()

    def _detach_hooks(self) -> None:
        for handle in self._optimizer_hooks:
            handle.remove()
        self._optimizer_hooks = []
        if self._step_patched:
            self._step_patched = False
            del self.optimizer.step  # the class's own step again (torch 1.13's wrapper)
        if self._hooks:
            self._hooks.remove()
            self._hooks = None
        if self._compiled:
            self._compiled.remove()
            self._compiled = None
        self._mode = self._ops = None
        if self._collectives:
            self._collectives.remove()
            self._collectives = None
        if self._calls:
            self._calls.close()
            self._calls = None

    def _step_begins(self) -> None:
        if self._hooks:
            self._hooks.new_step()
        if self._ops:
            self._ops.new_step()

    def _active_mode(self) -> Optional[OpRecorder]:
        """The dispatch mode the step or repetition in flight runs under: the
        kernel level's, else, where a call may be pinned (DTRACE_PIN, asked
        when it began), the same mode asking each op's outputs for their pins
        and recording nothing (dispatch.py): an op's pinned outputs are
        substituted at every level, in replays only."""
        if self._mode is not None:
            return self._mode
        return self._ops if self.sink is not None and self.sink.pins else None

    def _step_context(self):
        mode = self._active_mode()
        return mode if mode is not None else contextlib.nullcontext()

    def _isolate(self, step: Optional[int]) -> None:
        from .isolation import isolate
        isolate(self, step)

    def _save_checkpoint(self, step: int) -> None:
        checkpoints.save(self.checkpoint_dir, step, self.model, self.optimizer, self.state)

    def _load_checkpoint(self, step: int) -> None:
        checkpoints.load(self.checkpoint_dir, step, self.model, self.optimizer, self.state)

    def _take_snapshot(self, step: int) -> Any:
        return checkpoints.snapshot(step, self.model, self.optimizer, self.state)

    def _restore_snapshot(self, snapshot: Any) -> None:
        checkpoints.restore_snapshot(snapshot, self.model, self.optimizer, self.state)

    def _record_state(self) -> None:
        sink, lvl, st = self.sink, capi.LEVEL_STEP, capi.IO_STATE
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
                items += state_values(pname, s)
            sink.tensors_(lvl, "optim", st, items)
        rng = [("torch.cpu", torch.get_rng_state())]
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            rng += [(f"torch.cuda.{i}", s) for i, s in enumerate(torch.cuda.get_rng_state_all())]
        # Python's and NumPy's generators: at the step's end, when it drew from them (dtrace.generators).
        sink.tensors_(lvl, "rng", st, rng)
        # Numbers as 0-d arrays (i64, f64, bool): state is compared by fingerprint.
        for name, obj in self.extra.items():
            sink.tensors_(lvl, name, st, list(state_values(name, obj.state_dict())))

    def _optimizer_step_begins(self) -> None:
        """The gradients as the optimizer sees them, before it steps; its own
        kernels are then recorded under scope "opt"."""
        if self.current_step is not None:
            self.sink.set_scope("step")
            with self._timed():
                self.sink.tensors_(capi.LEVEL_STEP, "grads", capi.IO_OUT,
                                   [(n, p.grad) for n, p in self.model.named_parameters() if p.grad is not None])
            self.sink.set_scope("opt")

    def _optimizer_step_ends(self) -> None:
        if self.sink is not None:
            self.sink.set_scope("step")

    def _patch_optimizer(self) -> None:
        """Calls the two methods above around the optimizer's step. torch 2.x:
        the optimizer's step pre- and post-hooks, which leave its `step` as it is
        (an LR scheduler checks at its first step that `step` is still its own
        wrapper, and close() must not take that wrapper away). torch 1.13 has no
        step hooks: the bound step method is wrapped instead."""
        if self.optimizer is None:
            return
        opt, rec = self.optimizer, self
        if hasattr(opt, "register_step_pre_hook"):
            self._optimizer_hooks = [opt.register_step_pre_hook(lambda *_: rec._optimizer_step_begins()),
                                     opt.register_step_post_hook(lambda *_: rec._optimizer_step_ends())]
            return
        original = opt.step

        def step(*args, **kwargs):
            rec._optimizer_step_begins()
            try:
                return original(*args, **kwargs)
            finally:
                rec._optimizer_step_ends()

        opt.step = step
        self._step_patched = True

    def log_call(self, scope: str, op: str, occurrence: int, args, kwargs, names=None, extra=None) -> None:
        if self._calls is not None and self.native.captures():
            self._calls.write(self.current_step if self.current_step is not None else -1, scope, op,
                              occurrence, args, kwargs, names, extra)
