"""Handing torch values to libdtrace: dtrace.records' Sink with torch tensors'
own views (logical bytes, CUDA tensors on their device) and one-element tensors
as scalars by their exact bits. Everything above it says *what* to record."""
from __future__ import annotations

import functools
from typing import Any, List

import torch

from dtrace import records
from dtrace.records import state_values as _state_values

from .fingerprints import host_fields, logical, view

_BITS = {torch.float32: (torch.int32, "f32", 0xFFFFFFFF), torch.float64: (torch.int64, "f64", (1 << 64) - 1),
         torch.bfloat16: (torch.int16, "bf16", 0xFFFF), torch.float16: (torch.int16, "f16", 0xFFFF)}


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


class Sink(records.Sink):
    pins_taken = 0  # outputs that took pinned bytes in this process (compiled.py asks)

    def view(self, value: Any):
        return view(value) if isinstance(value, torch.Tensor) else super().view(value)

    def host_fields(self, value: Any):
        return host_fields(value) if isinstance(value, torch.Tensor) else super().host_fields(value)

    def host_copy(self, value: Any) -> Any:
        return value.detach().cpu() if isinstance(value, torch.Tensor) else super().host_copy(value)

    def pinned_value(self, op: str, name: str, value: Any) -> Any:
        """A tensor takes its pinned bytes in place, whatever its device, dtype
        and strides (an in-place op's output, a view written through, a CUDA
        tensor), so whatever holds it (autograd, the module, the caller) sees
        them: a CPU tensor whose memory is its logical bytes directly, any
        other through a host copy."""
        if not isinstance(value, torch.Tensor):
            return super().pinned_value(op, name, value)
        size = value.numel() * value.element_size()
        if not value.is_cuda and logical(value) is value:
            if self.native.pinned(op, name, value.data_ptr() if size else 0, size):
                self.pins_taken += 1
            return value
        host = torch.empty(tuple(value.shape), dtype=value.dtype)
        if self.native.pinned(op, name, host.data_ptr() if size else 0, size):
            self.pins_taken += 1
            with torch.no_grad():
                value.copy_(host)
        return value

    def device_batch(self, device: int, addresses: List[int], sizes: List[int], stream: int) -> List[int]:
        with torch.cuda.device(device):
            return super().device_batch(device, addresses, sizes, stream)

    def scalar(self, level: int, op: str, io: int, name: str, value: Any) -> None:
        if self.active and isinstance(value, torch.Tensor):
            t = value.detach().reshape(()).cpu()
            if t.dtype in _BITS:
                as_int, dtype, mask = _BITS[t.dtype]
                self.native.scalar(level, op, io, name, dtype, int(t.view(as_int).item()) & mask, float(t.item()))
                return
            value = int(t.item()) if t.dtype == torch.bool or not t.is_floating_point() else float(t.item())
        super().scalar(level, op, io, name, value)


# The tensors inside nested tuples, lists and dicts (named prefix.i / prefix.key),
# and a state_dict's leaves: dtrace.records' rules with torch tensors as the arrays.
flatten = functools.partial(records.flatten, is_leaf=is_tensor)
state_values = functools.partial(_state_values, is_leaf=is_tensor)


def rng_inputs() -> List:
    """The CPU and (once initialized) CUDA RNG states as (name, tensor) items:
    recorded with a call's inputs, so that a module or region drawing random
    numbers can be re-run alone from the state it started with."""
    states = [("rng.cpu", torch.get_rng_state())]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states.append(("rng.cuda", torch.cuda.get_rng_state()))
    return states
