"""Handing tensors and scalars to libdtrace: the one place that turns torch values
into the records of dtrace-fp(5). Everything above it says *what* to record."""
from __future__ import annotations

import struct
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import torch

from . import _lib
from .fingerprints import device_digests, dtype_name, logical, nbytes, shape_of

_BITS = {torch.float32: (torch.int32, "f32", 0xFFFFFFFF), torch.float64: (torch.int64, "f64", (1 << 64) - 1),
         torch.bfloat16: (torch.int16, "bf16", 0xFFFF), torch.float16: (torch.int16, "f16", 0xFFFF)}


class Sink:
    """Writes records through one libdtrace handle, keeping the scope libdtrace
    holds equal to the scope the caller names (module scopes are whole paths such
    as fwd/blocks.0.moe, not nested parts)."""

    def __init__(self, native: "_lib.Native"):
        self.native = native
        self._scope: Optional[str] = None
        self.tensors = 0  # records handed over, for the benchmark's cost per tensor
        # True inside a step or an isolated repetition: hooks and the dispatch mode
        # see the model run outside steps too (evaluation), and record nothing there.
        self.active = False

    def set_scope(self, scope: Optional[str]) -> Optional[str]:
        previous = self._scope
        if scope != previous:
            if previous is not None:
                self.native.pop_scope()
            if scope is not None:
                self.native.push_scope(scope)
            self._scope = scope
        return previous

    @property
    def scope(self) -> Optional[str]:
        return self._scope

    def tensors_(self, level: int, op: str, io: int, items: Sequence[Tuple[str, torch.Tensor]]) -> None:
        """Records named tensors (all of one op and io) if libdtrace wants `level` here."""
        if not self.active or not items or not self.native.wants(level):
            return
        capture = self.native.captures()
        views = [logical(t) for _, t in items]
        digests = device_digests(views, _lib) if any(v.is_cuda for v in views) else [None] * len(views)
        for (name, _), view, digest in zip(items, views, digests):
            size = nbytes(view)
            if view.is_cuda and digest is None:  # a libdtrace built without CUDA: hashed on the host
                view = view.cpu()
            if view.is_cuda:
                host = view.cpu() if capture else None
                self.native.tensor(level, op, io, name, dtype_name(view.dtype), shape_of(view),
                                   host.data_ptr() if host is not None and size else 0, size, digest)
            else:
                self.native.tensor(level, op, io, name, dtype_name(view.dtype), shape_of(view),
                                   view.data_ptr() if size else 0, size)
            self.tensors += 1

    def scalar(self, level: int, op: str, io: int, name: str, value: Any) -> None:
        """A Python number or a one-element tensor, by its exact bits."""
        if not self.active:
            return
        if isinstance(value, torch.Tensor):
            t = value.detach().reshape(()).cpu()
            if t.dtype in _BITS:
                as_int, dtype, mask = _BITS[t.dtype]
                self.native.scalar(level, op, io, name, dtype, int(t.view(as_int).item()) & mask, float(t.item()))
                return
            if t.dtype == torch.bool or not t.is_floating_point():
                value = int(t.item())
            else:
                value = float(t.item())
        if isinstance(value, bool) or isinstance(value, int):
            self.native.scalar(level, op, io, name, "i64", int(value) & ((1 << 64) - 1), float(value))
        else:
            bits = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
            self.native.scalar(level, op, io, name, "f64", bits, float(value))


def flatten(prefix: str, value: Any) -> List[Tuple[str, torch.Tensor]]:
    """The tensors inside nested tuples, lists and dicts, named prefix.i / prefix.key."""
    out: List[Tuple[str, torch.Tensor]] = []
    if isinstance(value, torch.Tensor):
        out.append((prefix, value))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            out.extend(flatten(f"{prefix}.{i}", v))
    elif isinstance(value, dict):
        for k, v in value.items():
            out.extend(flatten(f"{prefix}.{k}", v))
    return out


def state_values(prefix: str, value: Any) -> Iterable[Tuple[str, Any]]:
    """A state_dict's leaves: tensors, numbers, and everything else as its repr's
    bytes (so a changed non-numeric field still shows), named by their path."""
    if isinstance(value, torch.Tensor) or isinstance(value, (bool, int, float)):
        yield prefix, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from state_values(f"{prefix}.{k}" if prefix else str(k), v)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from state_values(f"{prefix}.{i}", v)
    elif value is None:
        return
    else:
        yield prefix, torch.tensor(list(repr(value).encode()), dtype=torch.uint8)
