"""Layer level: every submodule is a scope, fwd/<qualified name> while its forward
runs and bwd/<qualified name> for its backward (dtrace-fp(5), DESIGN.md §8), with
its inputs and outputs recorded from module hooks.

Forward: a forward pre-hook records the inputs (and the CPU and CUDA RNG states, so
that a module drawing random numbers can be re-run alone from the same state) and
enters the scope; a forward hook records the outputs and leaves it. Backward: the
full backward hook records the output gradients (in) and the input gradients (out).
Kernels run by a module's backward are scoped bwd/<name> where this torch has
backward pre-hooks (2.0 and later); on torch 1.13, which has none, they are
recorded in scope "bwd"."""
from __future__ import annotations

import inspect
from typing import Any, Dict, List, Optional

import torch

from . import _lib
from .records import flatten

FWD_HOOK_KWARGS = "with_kwargs" in inspect.signature(torch.nn.Module.register_forward_pre_hook).parameters
HAS_BWD_PRE = hasattr(torch.nn.Module, "register_full_backward_pre_hook")


def rng_inputs(module: torch.nn.Module) -> List:
    states = [("rng.cpu", torch.get_rng_state())]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states.append(("rng.cuda", torch.cuda.get_rng_state()))
    return states


class ModuleHooks:
    """Installs and removes the hooks on every named submodule of a model."""

    def __init__(self, recorder, model: torch.nn.Module):
        self.rec = recorder
        self.stack: List[str] = []
        self.calls: Dict[str, int] = {}  # occurrences of each module scope in this step
        # While one module is isolated, only its scope is recorded: its submodules'
        # scopes (fwd/a.b.c under fwd/a.b) are siblings by name, not nested in it,
        # and a replay must record inside the isolated scope only (dtrace-fp(5)).
        # Their kernels are then recorded in the isolated module's scope.
        self.only: Optional[str] = None
        self.handles = []
        for name, module in model.named_modules():
            if name:
                self._install(name, module)

    def _install(self, name: str, module: torch.nn.Module) -> None:
        fwd, bwd = f"fwd/{name}", f"bwd/{name}"
        op = type(module).__name__

        def pre(mod, args, kwargs=None):
            if self.only is not None and self.only != fwd:
                return None
            kwargs = kwargs or {}
            previous = self.rec.sink.set_scope(fwd)
            self.stack.append((fwd, previous))
            occurrence = self.calls.get(fwd, 0)
            self.calls[fwd] = occurrence + 1
            if self.rec.sink.native.wants(_lib.LEVEL_LAYER):
                items = flatten("input", list(args)) + flatten("input", kwargs) + rng_inputs(mod)
                self.rec.sink.tensors_(_lib.LEVEL_LAYER, op, _lib.IO_IN, items)
                self.rec.log_call(fwd, op, occurrence, args, kwargs)
            return None

        def post(mod, args, *rest):
            if self.only is not None and self.only != fwd:
                return None
            output = rest[-1]
            if self.stack and self.stack[-1][0] == fwd:
                _, previous = self.stack.pop()
            else:
                previous = None
            self.rec.sink.tensors_(_lib.LEVEL_LAYER, op, _lib.IO_OUT, flatten("output", output))
            self.rec.sink.set_scope(previous if previous is not None else "step")
            return None

        def bwd_pre(mod, grad_output):
            self.rec.sink.set_scope(bwd)
            self.rec.sink.tensors_(_lib.LEVEL_LAYER, op, _lib.IO_IN, flatten("grad_output", grad_output))
            return None

        def bwd_post(mod, grad_input, grad_output):
            self.rec.sink.set_scope(bwd)
            if not HAS_BWD_PRE:
                self.rec.sink.tensors_(_lib.LEVEL_LAYER, op, _lib.IO_IN, flatten("grad_output", grad_output))
            self.rec.sink.tensors_(_lib.LEVEL_LAYER, op, _lib.IO_OUT, flatten("grad_input", grad_input))
            self.rec.sink.set_scope("bwd")
            return None

        if FWD_HOOK_KWARGS:
            self.handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
            self.handles.append(module.register_forward_hook(post, with_kwargs=True))
        else:
            self.handles.append(module.register_forward_pre_hook(pre))
            self.handles.append(module.register_forward_hook(post))
        if self.rec.backward_hooks:
            if HAS_BWD_PRE:
                self.handles.append(module.register_full_backward_pre_hook(bwd_pre))
            self.handles.append(module.register_full_backward_hook(bwd_post))

    def new_step(self) -> None:
        self.stack.clear()
        self.calls.clear()

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()
