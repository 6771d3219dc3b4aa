"""Collectives under comm/ scopes: torch.distributed's all_reduce, all_gather,
reduce_scatter and broadcast (and the *_into_tensor / *_tensor forms where this
torch has them), recorded at layer level with their inputs before the call and
their outputs after it, so `dtrace diff` can call a rank whose own inputs match
a receiver of another rank's difference (dtrace-fp(5), Collectives).

Only calls made through the torch.distributed Python functions are seen: DDP's
gradient all-reduce runs inside its C++ reducer (record the gradients, as the
step level does), and an async_op=True call's output is recorded when the call
returns, before the work completes, so only its input is recorded."""
from __future__ import annotations

import functools
from typing import Callable, Dict, List, Tuple

import torch

from dtrace import capi
from .records import flatten

# name -> (positional index or keyword of the input, of the output)
_COLLECTIVES = {
    "all_reduce": ("tensor", "tensor"),
    "broadcast": ("tensor", "tensor"),
    "all_gather": ("tensor", "tensor_list"),
    "reduce_scatter": ("input_list", "output"),
    "all_gather_into_tensor": ("input_tensor", "output_tensor"),
    "reduce_scatter_tensor": ("input", "output"),
}
_POSITION = {"all_reduce": {"tensor": 0}, "broadcast": {"tensor": 0},
             "all_gather": {"tensor_list": 0, "tensor": 1}, "reduce_scatter": {"output": 0, "input_list": 1},
             "all_gather_into_tensor": {"output_tensor": 0, "input_tensor": 1},
             "reduce_scatter_tensor": {"output": 0, "input": 1}}


def _argument(name: str, key: str, args: Tuple, kwargs: Dict):
    if key in kwargs:
        return kwargs[key]
    index = _POSITION[name][key]
    return args[index] if index < len(args) else None


class Collectives:
    """Wraps the functions of torch.distributed while a Recorder lives."""

    def __init__(self, recorder):
        self.rec = recorder
        self.originals: List[Tuple[str, Callable]] = []
        self.calls: Dict[str, int] = {}
        dist = torch.distributed
        for name in _COLLECTIVES:
            fn = getattr(dist, name, None)
            if fn is not None:
                self.originals.append((name, fn))
                setattr(dist, name, self._wrap(name, fn))

    def _wrap(self, name: str, fn: Callable) -> Callable:
        source, target = _COLLECTIVES[name]

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            sink = self.rec.sink
            if not sink.active or not sink.native.wants(capi.LEVEL_LAYER):
                return fn(*args, **kwargs)
            scope = f"comm/{name}"
            previous = sink.set_scope(scope)
            sink.tensors_(capi.LEVEL_LAYER, name, capi.IO_IN, flatten("input", _argument(name, source, args, kwargs)))
            sink.set_scope(previous)
            work = fn(*args, **kwargs)
            if not kwargs.get("async_op", False):
                sink.set_scope(scope)
                sink.tensors_(capi.LEVEL_LAYER, name, capi.IO_OUT,
                              flatten("output", _argument(name, target, args, kwargs)))
                sink.set_scope(previous)
            return work

        return wrapper

    def remove(self) -> None:
        for name, fn in self.originals:
            setattr(torch.distributed, name, fn)
        self.originals.clear()
