"""Layer level: every submodule is a scope, fwd/<qualified name> while its forward
runs and bwd/<qualified name> for its backward (dtrace-fp(5), DESIGN.md §8), with
its inputs and outputs recorded from module hooks.

Forward: a forward pre-hook records the inputs (and the CPU and CUDA RNG states, so
that a module drawing random numbers can be re-run alone from the same state) and
enters the scope; a forward hook records the outputs and leaves it. Backward: the
full backward hook records the output gradients (in) and the input gradients (out);
the module's contribution to each of its own parameters' gradients is recorded
(out, param_grad.<name>) as the node that used the parameter runs (param_grads.py).
Kernels run by a module's backward are scoped bwd/<name>: entered by its backward
pre-hook (torch 2.x) or by a hook on its outputs (torch 1.13)."""
from __future__ import annotations

import inspect
from typing import Any, Dict, List, Optional

import torch

from dtrace import capi

from . import compiled, param_grads
from .records import flatten, rng_inputs

FWD_HOOK_KWARGS = "with_kwargs" in inspect.signature(torch.nn.Module.register_forward_pre_hook).parameters
HAS_BWD_PRE = hasattr(torch.nn.Module, "register_full_backward_pre_hook")


def _keep(value: Any) -> Any:
    """A forward argument as it was when the forward ran (a backward comes later,
    after in-place updates may have changed it), keeping requires_grad."""
    if isinstance(value, torch.Tensor):
        kept = value.detach().clone()
        return kept.requires_grad_(True) if value.requires_grad else kept
    if isinstance(value, (list, tuple)):
        kept = [_keep(v) for v in value]
        return kept if isinstance(value, list) else tuple(kept)
    if isinstance(value, dict):
        return {k: _keep(v) for k, v in value.items()}
    return value


class ModuleHooks:
    """Installs and removes the hooks on every named submodule of a model."""

    def __init__(self, recorder, model: torch.nn.Module, regions=None):
        self.rec = recorder
        self.stack: List[str] = []
        self.calls: Dict[str, int] = {}  # occurrences of each module scope in this step
        # While one module is isolated, only its scope is recorded: its submodules'
        # scopes (fwd/a.b.c under fwd/a.b) are siblings by name, not nested in it,
        # and a replay must record inside the isolated scope only (dtrace-fp(5)).
        # Their kernels are then recorded in the isolated module's scope.
        self.only: Optional[str] = None
        self.handles = []
        # Backward scopes entered and not yet left, innermost last.
        self.bwd_stack: List[str] = []
        prefix = recorder.native.scope_prefix() if recorder.native.capture_dir() else ""
        self.capture_bwd = prefix if prefix.startswith("bwd/") else None
        self.saved: Dict[str, List] = {}  # forward calls of the captured bwd scope
        # Parameter-use nodes of each bwd scope not yet run in this step, and the
        # leaves of that scope put off until they have (_param_grads_done).
        self.pending: Dict[str, int] = {}
        self.deferred: Dict[str, int] = {}
        # A torch.compile'd region is one scope; its modules get no hooks (compiled.py).
        for name, module in compiled.hooked_modules(model, regions or {}):
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
            if self.rec.sink.native.wants(capi.LEVEL_LAYER):
                items = flatten("input", list(args)) + flatten("input", kwargs) + rng_inputs()
                self.rec.sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_IN, items)
                self.rec.log_call(fwd, op, occurrence, args, kwargs)
            if bwd == self.capture_bwd and self.rec.sink.active and torch.is_grad_enabled():
                self.saved.setdefault(bwd, []).append((_keep(list(args)), _keep(kwargs), rng_inputs()))
            return None

        def post(mod, args, *rest):
            if self.only is not None and self.only != fwd:
                return None
            output = rest[-1]
            if self.stack and self.stack[-1][0] == fwd:
                _, previous = self.stack.pop()
            else:
                previous = None
            outputs = flatten("output", output)
            self.rec.sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_OUT, outputs)
            self.rec.sink.set_scope(previous if previous is not None else "step")
            if self.rec.backward_hooks and torch.is_grad_enabled():
                self._watch_param_grads(mod, bwd, op, args, rest[0] if len(rest) > 1 else {}, outputs)
            if self.rec.backward_hooks and not HAS_BWD_PRE and torch.is_grad_enabled():
                # torch 1.13's stand-in for a backward pre-hook: the first output
                # gradient computed opens the module's backward scope.
                entered = [False]

                def enter(grad):
                    if not entered[0]:
                        entered[0] = True
                        self._enter_bwd(bwd)
                    return None

                for _, t in outputs:
                    if t.requires_grad:
                        t.register_hook(enter)
            return None

        def bwd_pre(mod, grad_output):
            if self.only is not None:
                return None
            self._enter_bwd(bwd)
            self.rec.sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_IN, flatten("grad_output", grad_output))
            return None

        def bwd_post(mod, grad_input, grad_output):
            if self.only is not None:  # an isolated backward records itself (isolation.py)
                return None
            self.backward_done(bwd, op, grad_input, grad_output)
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

    def backward_done(self, bwd: str, op: str, grad_input, grad_output) -> None:
        """A module's backward has computed its input gradients (its full
        backward hook; compiled.py calls it for a compiled module, whose full
        backward hook torch never calls): records them, with the forward
        arguments a capture of this scope kept, and leaves the scope."""
        self.rec.sink.set_scope(bwd)
        if not HAS_BWD_PRE:
            self.rec.sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_IN, flatten("grad_output", grad_output))
        occurrence = self.calls.get(bwd, 0)
        self.calls[bwd] = occurrence + 1
        if self.saved.get(bwd):
            # Backward runs the calls in reverse order of their forwards.
            args, kwargs, rng = self.saved[bwd].pop()
            items = flatten("input", args) + flatten("input", kwargs) + rng
            self.rec.sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_IN, items)
            self.rec.log_call(bwd, op, occurrence, args, kwargs)
        self.rec.sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_OUT, flatten("grad_input", grad_input))
        if self.pending.get(bwd) and all(g is None for g in grad_input):
            # No input needed a gradient (an embedding's indices): torch calls
            # this hook from the outputs' gradients, before the module's own
            # backward has run. Its kernels are the scope's too: it is left
            # once the module's parameter-use nodes have run.
            self.deferred[bwd] = self.deferred.get(bwd, 0) + 1
        else:
            self.leave_bwd(bwd)

    def _watch_param_grads(self, mod: torch.nn.Module, bwd: str, op: str, args, kwargs, outputs) -> None:
        """Layer level: this call's contribution to each of the module's own
        parameters' gradients is recorded in its bwd scope, as the node that used
        the parameter runs (param_grads.py): out param_grad.<name>."""
        sink = self.rec.sink
        if not sink.active or not sink.native.wants(capi.LEVEL_LAYER):
            return
        params = {id(p): n for n, p in mod.named_parameters(recurse=False) if p.requires_grad}
        if not params:
            return
        stops = [t for _, t in flatten("input", list(args)) + flatten("input", kwargs)]
        uses = param_grads.find_uses((t for _, t in outputs), params, stops)
        if not uses:
            return
        self.pending[bwd] = self.pending.get(bwd, 0) + len(uses)

        def record(items):
            previous = sink.set_scope(bwd)
            sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_OUT, items)
            sink.set_scope(previous)
            self._param_grads_done(bwd)

        param_grads.watch(uses, record)

    def _param_grads_done(self, bwd: str) -> None:
        left = self.pending.get(bwd, 0) - 1
        self.pending[bwd] = max(left, 0)
        if left <= 0:
            for _ in range(self.deferred.pop(bwd, 0)):
                self.leave_bwd(bwd)

    def _enter_bwd(self, bwd: str) -> None:
        if self.only is not None:
            return
        self.bwd_stack.append(bwd)
        self.rec.sink.set_scope(bwd)

    def leave_bwd(self, bwd: str) -> None:
        """Back to the enclosing module's backward scope ("bwd" outside any).
        Entries above this one are children whose full backward hook did not
        fire (no input needed a gradient): they end with their parent."""
        if bwd in self.bwd_stack:
            while self.bwd_stack.pop() != bwd:
                pass
        self.rec.sink.set_scope(self.bwd_stack[-1] if self.bwd_stack else "bwd")

    def new_step(self) -> None:
        self.stack.clear()
        self.calls.clear()
        self.bwd_stack.clear()
        self.saved.clear()
        self.pending.clear()
        self.deferred.clear()

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()
