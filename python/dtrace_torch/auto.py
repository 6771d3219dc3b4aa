"""dtrace record's recorder: a PyTorch program recorded as it is, no line of it
changed (docs/torch.md, "dtrace record"; dtrace(1), RECORD).

`dtrace record -- CMD` puts dtrace_torch/bootstrap on PYTHONPATH; its
sitecustomize calls install() in every Python process of CMD once that process
has imported torch. From then on the program's own calls mark its steps:

- an optimizer's construction: the root modules holding its parameters (the
  outermost nn.Modules that do: the model, a DDP or torch.compile wrapper of it)
  get a forward pre-hook;
- a step begins at the first forward of such a root with gradients enabled
  after the previous step's end (an evaluation under no_grad is no step): its
  inputs that autograd did not produce are the step's batch, one occurrence per
  call (micro-batches of a gradient accumulation);
- every torch.autograd.backward (Tensor.backward calls it) records what it
  was called on as the metric "loss";
- the step ends when the step() of the optimizer that stepped first returns
  (its outermost call: an optimizer wrapping another steps once). Before it
  steps, the gradients are recorded, as the explicit Recorder records them.

What is recorded is then dtrace_torch's Recorder's (AutoRecorder below is
one): state at the step's start (parameters, buffers, optimizer state, RNG),
the batch, the loss, the gradients, and at layer or kernel level its module
hooks and dispatch mode. A replay runs the command again: the steps before the
replayed one run from the program's start (recorded at step level under
DTRACE_FAST_FORWARD=step, which bisect checks against the run), the replayed
step is recorded at the requested level or its isolation runs at its start,
and the process ends after it (SystemExit(0)). In a replay session the first
request reaches the step; isolations are served from a copy of the state at
its start; a later step replay cannot be (the program's loop runs its step
once per process) and is declined, so dtrace launches it.

A program that makes its own dtrace Recorder is recorded by that alone: this
one stands down at the first step. What it cannot record ends the program with
a RecordError saying what it looked for."""
from __future__ import annotations

import atexit
import functools
import gc
import json
import os
import sys
import tempfile
import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch

from dtrace import capi
from dtrace import recording as base

from .errors import DtraceError
from .hooks import FWD_HOOK_KWARGS

NOTES_VARIABLE = "DTRACE_RECORD_NOTES"


class RecordError(DtraceError):
    """What dtrace record cannot record in this program: the message says what
    it looked for and what it found."""


def install() -> None:
    """Starts watching this process's PyTorch program (once; only under dtrace record)."""
    global _program
    if _program is None and base.recorded_command() is not None:
        _program = Program()
        _program.install()


def _consumed(value: Any) -> Any:
    """What of a forward's arguments the step consumed from outside: tensors
    autograd did not produce (no grad_fn) and that are not trained leaves
    (parameters passed in), numbers, and the containers holding them. Activations
    of another model are left out: they differ when a kernel does, and the
    batch must differ only when the data does (bisect's verdict data)."""
    if isinstance(value, torch.Tensor):
        return value if value.grad_fn is None and not value.requires_grad else None
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        kept = [_consumed(v) for v in value]
        return [v for v in kept if v is not None]
    if isinstance(value, dict):
        kept = {str(k): _consumed(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None}
    return None


def _roots_holding(parameters: List[torch.Tensor]) -> List[torch.nn.Module]:
    """The outermost modules that hold any of `parameters`, in the order the
    garbage collector lists them. Found once per optimizer: a program's modules
    are in no registry, but every live one is tracked by the collector."""
    wanted = {id(p) for p in parameters}
    holders = []
    for o in gc.get_objects():
        try:
            # type(), not isinstance(): isinstance asks some objects for __class__, and
            # some answer with a warning (torch.distributed.reduce_op).
            if issubclass(type(o), torch.nn.Module) and any(id(p) in wanted for p in o.parameters()):
                holders.append(o)
        except Exception:  # an object whose __class__ or parameters() raises holds none of them
            continue
    inner = set()
    for module in holders:
        for sub in module.modules():
            if sub is not module:
                inner.add(id(sub))
    return [m for m in holders if id(m) not in inner]


class Program:
    """The process's program as dtrace record sees it: its optimizers, root
    modules and the counts the note reports; the AutoRecorder once step 0 begins."""

    def __init__(self):
        self.optimizers: List[weakref.ref] = []
        # id(module) -> (a weak reference to it, its forward pre-hook's handle)
        self.roots: Dict[int, Tuple[weakref.ref, Any]] = {}
        self.step_hooks = False  # torch 2.x: global optimizer step hooks (install)
        self.forwards = self.backwards = self.steps = 0
        self.in_step = False
        self.backward_in_step = False
        self.primary: Optional[weakref.ref] = None  # the optimizer whose steps end steps
        self.depth = 0  # optimizer step() calls entered and not returned
        self.step_root_order: List[int] = []
        self.first_root_order: Optional[List[int]] = None
        self.recorder: Optional["AutoRecorder"] = None
        self.explicit = False
        self.error: Optional[str] = None
        self._step_cm = None
        # A child forked from this process (a data loader's worker) inherits
        # all of this, the open log included; only this process closes it.
        self.pid = os.getpid()

    # ---- hooks into torch ---------------------------------------------------------
    def install(self) -> None:
        program = self
        optimizer_class = torch.optim.Optimizer
        made = optimizer_class.__init__

        @functools.wraps(made)
        def init(opt, *args, **kwargs):
            made(opt, *args, **kwargs)
            program.optimizer_made(opt)

        optimizer_class.__init__ = init
        backward = torch.autograd.backward

        @functools.wraps(backward)
        def autograd_backward(tensors, *args, **kwargs):
            program.backward(tensors)
            return backward(tensors, *args, **kwargs)

        torch.autograd.backward = autograd_backward
        optim = sys.modules.get("torch.optim.optimizer")
        self.step_hooks = hasattr(optim, "register_optimizer_step_pre_hook")
        if self.step_hooks:
            # torch 2.x: hooks every optimizer's step, whatever class.
            optim.register_optimizer_step_pre_hook(lambda opt, *_: program.optimizer_step_begins(opt))
            optim.register_optimizer_step_post_hook(lambda opt, *_: program.optimizer_step_ends(opt))
        atexit.register(self.exit)

    def _wrap_step(self, cls: type) -> None:
        """torch 1.13: each optimizer class's step wrapped once, in the class
        (an LR scheduler wraps the instance's step around it, and Optimizer's
        profiling wrapper is kept: the attributes it marks itself with are copied)."""
        if getattr(cls.step, "_dtrace_record", False):
            return
        step = cls.step
        program = self

        @functools.wraps(step)
        def wrapped(opt, *args, **kwargs):
            program.optimizer_step_begins(opt)
            try:
                result = step(opt, *args, **kwargs)
            except BaseException:
                program.depth -= 1
                raise
            program.optimizer_step_ends(opt)
            return result

        wrapped._dtrace_record = True
        cls.step = wrapped

    # ---- what the program does --------------------------------------------------------
    def optimizer_made(self, opt: torch.optim.Optimizer) -> None:
        self.optimizers.append(weakref.ref(opt))
        if not self.step_hooks:
            self._wrap_step(type(opt))
        parameters = [p for group in opt.param_groups for p in group["params"]]
        for root in _roots_holding(parameters):
            if id(root) in self.roots and self.roots[id(root)][0]() is root:
                continue  # (an id of a module gone may name a new one)
            if FWD_HOOK_KWARGS:
                handle = root.register_forward_pre_hook(self.forward, with_kwargs=True)
            else:
                handle = root.register_forward_pre_hook(lambda module, args: self.forward(module, args, None))
            self.roots[id(root)] = (weakref.ref(root), handle)

    def forward(self, module: torch.nn.Module, args, kwargs) -> None:
        if self.explicit or not torch.is_grad_enabled():
            return None
        self.forwards += 1
        if not self.in_step and not self.begin_step(module):
            return None
        if id(module) not in self.step_root_order:
            self.step_root_order.append(id(module))
        rec = self.recorder
        if rec is not None and rec.current_step is not None:
            consumed = {str(i): v for i, v in enumerate(_consumed(list(args)))}
            consumed.update(_consumed(dict(kwargs or {})))
            rec.batch(consumed)
        return None

    def backward(self, tensors) -> None:
        if self.explicit:
            return
        self.backwards += 1
        if not self.in_step:
            return
        self.backward_in_step = True
        rec = self.recorder
        if rec is not None and rec.current_step is not None:
            for t in (tensors if isinstance(tensors, (list, tuple)) else [tensors]):
                if isinstance(t, torch.Tensor):
                    if t.numel() == 1:
                        rec.metric("loss", t.detach())
                    else:
                        rec.record("loss", {"loss": t.detach()}, io="out")

    def optimizer_step_begins(self, opt) -> None:
        self.depth += 1
        if self.explicit or self.depth > 1:
            return
        if self.primary is None:
            self.primary = weakref.ref(opt)
        if self.primary() is not opt:
            return  # another optimizer (a second model's) steps inside this step
        if not self.in_step:
            if not self.roots:
                self.fail(f"{type(opt).__name__}.step() ran, but no torch.nn.Module holds the parameters it "
                          f"steps: dtrace record begins a step at the forward of the module that holds them "
                          f"(the model), and records what that forward is given as the step's batch")
            self.fail(f"step {self.steps}: {type(opt).__name__}.step() ran with no forward of the model "
                      f"(with gradients enabled) since the previous step: dtrace record begins a step at the "
                      f"first forward of the module holding the optimizer's parameters")
        if not self.backward_in_step:
            self.fail(f"step {self.steps}: {type(opt).__name__}.step() ran with no backward() since the "
                      f"step's first forward: dtrace record records the loss as the tensor backward() is "
                      f"called on, and a step it cannot see the loss of would compare as equal when it differs")
        if self.recorder is not None and self.recorder.current_step is not None:
            self.recorder._optimizer_step_begins()

    def optimizer_step_ends(self, opt) -> None:
        self.depth -= 1
        if self.explicit or self.depth > 0 or self.primary is None or self.primary() is not opt:
            return
        order = self.step_root_order
        if self.first_root_order is None:
            self.first_root_order = order
        elif len(self.first_root_order) > 1 and order != self.first_root_order:
            self.fail(f"step {self.steps}: the modules holding {type(opt).__name__}'s parameters ran their "
                      f"forwards in another order than in step 0 ({self._names(order)} after "
                      f"{self._names(self.first_root_order)}): dtrace record cannot name one model's layers the "
                      f"same way in every step")
        number = self.steps
        self.steps += 1
        self.in_step = False
        cm, self._step_cm = self._step_cm, None
        if cm is not None:
            self.recorder._optimizer_step_ends()
            cm.__exit__(None, None, None)
            self.recorder.step_ended(number)

    # ---- steps ------------------------------------------------------------------------
    def begin_step(self, module: torch.nn.Module) -> bool:
        """A step begins at `module`'s forward. False: nothing is recorded (the
        program records itself)."""
        if self.recorder is None:
            if base.explicit_recorders:
                self.stand_down()
                return False
            optimizer = self._optimizer_of(module)
            self.recorder = AutoRecorder(self._model(module), optimizer, self._other_optimizers(optimizer))
        self.in_step, self.backward_in_step, self.step_root_order = True, False, []
        number = self.steps
        if self.recorder.step_begins(number):
            self._step_cm = self.recorder.step(number)
            self._step_cm.__enter__()
        return True

    def _model(self, module: torch.nn.Module) -> torch.nn.Module:
        """What the recorder records as the model: the one root, or all of the
        program's roots (every optimizer's) under one container, so that every
        trained parameter is in the step's state and gradients, whichever
        optimizer steps it. Their scopes are then <class name>.<submodule>."""
        roots = [r for r in self._live_roots() if r is not module]
        if not roots:
            return module
        models = _Models()
        for root in [module] + roots:
            name, k = type(root).__name__, 1
            while name in models._modules:
                k += 1
                name = f"{type(root).__name__}{k}"
            models.add_module(name, root)
        return models

    def _live_roots(self) -> List[torch.nn.Module]:
        """The hooked roots still alive, in the order they were found."""
        return [m for m in (ref() for ref, _ in self.roots.values()) if m is not None]

    def _other_optimizers(self, optimizer) -> Dict[str, torch.optim.Optimizer]:
        """The program's other optimizers, recorded and restored as further state."""
        others = [o for o in (r() for r in self.optimizers) if o is not None and o is not optimizer]
        return {f"optimizer{i + 1}": o for i, o in enumerate(others)}

    def _optimizer_of(self, module: torch.nn.Module) -> Optional[torch.optim.Optimizer]:
        held = {id(p) for p in module.parameters()}
        live = [o for o in (r() for r in self.optimizers) if o is not None]
        for opt in live:
            if any(id(p) in held for group in opt.param_groups for p in group["params"]):
                return opt
        return live[0] if live else None

    def _names(self, order: List[int]) -> str:
        live = {id(m): type(m).__name__ for m in self._live_roots()}
        return ", ".join(live.get(i, "?") for i in order)

    def stand_down(self) -> None:
        """The program records itself with its own Recorder: nothing here does."""
        self.explicit = True
        for _, handle in self.roots.values():
            handle.remove()
        self.roots.clear()

    def fail(self, message: str) -> None:
        self.error = f"dtrace record: {message}"
        self.write_note()
        raise RecordError(self.error)

    # ---- the end --------------------------------------------------------------------
    def exit(self) -> None:
        """At the process's exit: the log closed, and the note dtrace record
        reads. A step begun and not ended was no step when the program exits
        normally (a last evaluation forward with gradients on, a second model's
        forward after the last step): it is dropped. After an uncaught exception
        it is written as it stands, incomplete, as the explicit Recorder writes
        a step the program crashed in."""
        if os.getpid() != self.pid:
            return
        if self.recorder is not None:
            try:
                crashed = getattr(sys, "last_value", None) is not None or getattr(sys, "last_exc", None) is not None
                if self._step_cm is not None and not crashed and self.recorder.native is not None:
                    self._step_cm = None
                    self.recorder.native.discard_step()
                    self.recorder.current_step = None
                self.recorder.close()
            except Exception as e:  # the note says it; the exit goes on
                self.error = self.error or f"dtrace record: closing the log: {e}"
        self.write_note()

    def write_note(self) -> None:
        notes = os.environ.get(NOTES_VARIABLE)
        if not notes or not os.path.isdir(notes):
            return
        note = {"pid": os.getpid(), "argv": list(sys.argv), "torch": torch.__version__,
                "rank": self.recorder.rank if self.recorder is not None else None,
                "optimizers": len(self.optimizers), "forwards": self.forwards, "backwards": self.backwards,
                "steps": self.steps, "recorded": self.recorder is not None and self.steps > 0,
                "explicit": self.explicit, "error": self.error}
        try:
            fd, temporary = tempfile.mkstemp(dir=notes, prefix=".note.")
            with os.fdopen(fd, "w") as f:
                json.dump(note, f)
            os.replace(temporary, os.path.join(notes, f"{os.getpid()}.json"))
        except OSError:
            pass  # dtrace record then says it found no note from this process


_program: Optional[Program] = None


class _Models(torch.nn.Module):
    """A program's root modules as one model for the recorder (never called:
    each root is called by the program and its hooks are its own)."""


from .recording import Recorder  # noqa: E402  (after Program: recording imports nothing of this module)


class AutoRecorder(Recorder):
    """dtrace_torch's Recorder driven by the program's own calls (Program) instead
    of a loop's rec.steps()/rec.step(): the log, the state records, the hooks
    and the isolation are the explicit Recorder's; this class holds where a
    replay starts and stops and what a replay session's requests do."""

    _automatic = True

    def __init__(self, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer],
                 others: Dict[str, torch.optim.Optimizer]):
        argv = base.recorded_command()
        run_dir = os.environ.get("DTRACE_RUN_DIR", "").rstrip("/")
        super().__init__(model, optimizer, state=others, run_name=os.path.basename(run_dir) or None,
                         config={"recorded_by": "dtrace record",
                                 "command": argv[3:] if argv[1:3] == ["record", "--"] else argv})
        base.automatic_recording = f"{type(model).__name__}, from step 0"
        self.target: Optional[int] = None  # the step a replay asks for
        if self._session is not None:
            self.target = self._session.step()
            if not self._session.next():
                self._exit()
            self._attach(self._native_for_request())
            self._arrive()
            return
        n = self.native
        if n.stop_at() is not None or n.resume_at() is not None:
            raise RecordError("dtrace record: DTRACE_STOP_AT and DTRACE_RESUME_AT resume from checkpoints, which "
                              "dtrace record does not write: `dtrace verify`'s resumed arms need the explicit "
                              "dtrace_torch.Recorder (docs/torch.md)")
        self.target = n.replay_step()
        if n.isolate_scope() is not None and self.target is None:
            self._isolate(None)
            self._exit()
        self._arrive()

    def _native_for_request(self):
        return capi.Native(**self._native_options, session=self._session)

    def _patch_optimizer(self) -> None:
        """Program calls _optimizer_step_begins/_ends itself, for every optimizer."""

    def _arrive(self) -> None:
        """A replay (or a session's first request) on its way to its step: the
        steps before it run from the program's start, recorded as
        DTRACE_FAST_FORWARD asks (none before an isolation)."""
        if self.target is not None:
            self.native.fast_forward(self.target)
            self._unrecorded = self._isolating()

    def _isolating(self) -> bool:
        return self.native is not None and self.native.isolate_scope() is not None

    def step_begins(self, number: int) -> bool:
        """Whether step `number` is recorded as a step (else the replay has run
        what it asked at the step's start, or ended the process)."""
        if self.target is None or number < self.target:
            return True
        if number > self.target:  # unreachable: a replay ends after its step
            raise RecordError(f"dtrace record: step {number} began in a replay of step {self.target}")
        self._unrecorded = False
        if self._session is None:
            if self._isolating():
                self._isolate(number)
                self._exit()
            return True
        self._snapshot = self._take_snapshot(number)
        while self._isolating():
            self._isolate(number)
            self._answered()
            self._next_request(number)
            self._back_to_start(number)
        return True  # a step request: this step runs it

    def step_ended(self, number: int) -> None:
        if self.target is None or number != self.target:
            return
        if self._session is None:
            self._exit()
        self._answered()
        while True:
            self._next_request(number, declining=True)
            self._back_to_start(number)
            self._isolate(number)
            self._answered()

    def _back_to_start(self, number: int) -> None:
        """The state at step `number`'s start again (the copy taken there): what
        an isolation loaded into a layer, or the step itself changed, is gone."""
        self._restore_snapshot(self._snapshot)
        self.restored_at = number

    def _answered(self) -> None:
        self._detach()
        self._session.done()

    def _next_request(self, number: int, declining: bool = False) -> None:
        """Waits for the session's next request and opens the recorder for it;
        the end request ends the process. With `declining` (the step has run),
        step replays are declined until an isolation comes."""
        session = self._session
        while True:
            if not session.next():
                self._exit()
            if declining and session.variable("DTRACE_ISOLATE") is None:
                session.decline(f"step {number} of this unmodified program has run in this process "
                                f"(dtrace record replays a step by running the command again)")
                continue
            self._attach(self._native_for_request())
            self.native.fast_forward(number)
            return

    def close(self) -> None:
        base.automatic_recording = None
        super().close()
