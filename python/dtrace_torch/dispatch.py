"""Kernel level: every ATen op the dispatcher runs inside a wanted scope, recorded
by a TorchDispatchMode (torch 1.13 and 2.x): op = the overload's name
(aten.mm.default, or a custom op's namespace.name.overload), in = its tensor
arguments named by the op's schema (self, mat2, ...), out = its results.

Skipped, because they move no data: ops whose first result is a view of an input
(aten.view, aten.t, aten.expand, aten.slice, aten.transpose, aten.detach, ...;
the schema's alias annotation without a write) and ops with no tensor result.
Not recorded, because their bytes are whatever the allocator left there: the
results of aten.empty* and aten.new_empty*, and such a tensor as the input of
the op that first writes it (aten.bernoulli_ filling a dropout mask); the
profiler's ops (record_function handles, not data).
In-place and out= ops are recorded: their inputs before the op runs, their results
after.

Pinned ops (dtrace-fp(5)): in a step or repetition where pins may apply
(sink.pins), every op the mode records (whether or not its records are
wanted here: libdtrace counts every call) asks for each of its results,
right after it ran and before it is recorded or returned, whether it is
pinned; a pinned result takes the pinned bytes in place (records.Sink), so
what the caller gets back is the pinned output. The Recorder enters this mode
for such a step at every level (Recorder._active_mode)."""
from __future__ import annotations

from typing import Dict, List, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dtrace import capi
from .records import flatten


def moves_no_data(func) -> bool:
    if func.__module__.endswith("profiler") or str(func).startswith("profiler."):
        return True  # record_function's handles: not data
    returns = func._schema.returns
    if not returns:
        return True
    alias = returns[0].alias_info
    return alias is not None and not alias.is_write


def named_inputs(func, args: Tuple, kwargs: Dict) -> List[Tuple[str, torch.Tensor]]:
    items: List[Tuple[str, torch.Tensor]] = []
    schema_args = func._schema.arguments
    for i, a in enumerate(args):
        name = schema_args[i].name if i < len(schema_args) else f"arg{i}"
        items.extend(flatten(name, a))
    for k, v in kwargs.items():
        items.extend(flatten(k, v))
    return items


class OpRecorder(TorchDispatchMode):
    """Records the ATen ops of the recorder's current scope at kernel level."""

    def __init__(self, recorder):
        super().__init__()
        self.rec = recorder
        self.calls: Dict[Tuple[str, str], int] = {}
        self.uninitialized = set()  # data pointers of empty* results not yet written

    def new_step(self) -> None:
        self.calls.clear()
        self.uninitialized.clear()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        sink = self.rec.sink
        if moves_no_data(func):
            return func(*args, **kwargs)
        if not sink.native.wants(capi.LEVEL_KERNEL):
            out = func(*args, **kwargs)
            if sink.pins and sink.active:
                op = str(func)
                if not op.startswith(("aten.empty", "aten.new_empty")):
                    sink.take_pins(op, flatten("out", out if isinstance(out, (tuple, list)) else [out]))
            return out
        op = str(func)
        scope = sink.scope or ""
        key = (scope, op)
        occurrence = self.calls.get(key, 0)
        self.calls[key] = occurrence + 1
        inputs = named_inputs(func, args, kwargs)
        if self.uninitialized:
            inputs = [(n, t) for n, t in inputs if t.numel() == 0 or t.data_ptr() not in self.uninitialized]
        sink.tensors_(capi.LEVEL_KERNEL, op, capi.IO_IN, inputs)
        self.rec.log_call(scope, op, occurrence, args, kwargs,
                          [a.name for a in func._schema.arguments])
        out = func(*args, **kwargs)
        outputs = flatten("out", out if isinstance(out, (tuple, list)) else [out])
        if op.startswith(("aten.empty", "aten.new_empty")):
            self.uninitialized.update(t.data_ptr() for _, t in outputs if t.numel())
            return out
        for _, t in outputs:
            self.uninitialized.discard(t.data_ptr())
        if sink.pins and sink.active:
            sink.take_pins(op, outputs)  # tensors take their pins in place: `out` holds them
        sink.tensors_(capi.LEVEL_KERNEL, op, capi.IO_OUT, outputs)
        return out
