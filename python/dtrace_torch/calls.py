"""How a module or an op was called, beside its captured tensors, so isolation can
call it again: the arguments' structure with each tensor named as its record, and
every other argument's value (sizes, dims, scalars, flags, dtypes). Written under
DTRACE_CAPTURE to <capture>/torch-calls-r<rank>.ndjson (JSON lines, but not named *.jsonl:
libdtrace reads every *.jsonl of a capture directory as a log, dtrace-fp(5)); an argument whose type
cannot be written is marked, and isolating that call says so instead of guessing."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple

import torch

from .errors import CaptureError


class Unrecordable(Exception):
    pass


def encode(value: Any, name: str) -> Any:
    """The JSON form of one argument; tensors become {"tensor": record name}."""
    if isinstance(value, torch.Tensor):
        spec = {"tensor": name, "requires_grad": bool(value.requires_grad), "device": str(value.device)}
        if value.layout == torch.strided and (not value.is_contiguous() or value.storage_offset()):
            # A view (rows[:, :-1]): isolation calls it again with the same
            # strides and storage offset (restrided), not a contiguous copy,
            # which a compiled region would be compiled again for.
            spec["stride"], spec["offset"] = list(value.stride()), int(value.storage_offset())
        return spec
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, (list, tuple)):
        items = [encode(v, f"{name}.{i}") for i, v in enumerate(value)]
        return items if isinstance(value, list) else {"tuple": items}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: encode(v, f"{name}.{k}") for k, v in value.items()}}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).replace("torch.", "")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.layout):
        return {"layout": str(value).replace("torch.", "")}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).replace("torch.", "")}
    raise Unrecordable(f"argument {name} of type {type(value).__name__}")


def decode(value: Any, load_tensor) -> Any:
    if isinstance(value, list):
        return [decode(v, load_tensor) for v in value]
    if isinstance(value, dict):
        if "tensor" in value:
            return load_tensor(value["tensor"], value)
        if "float" in value:
            return float.fromhex(value["float"])
        if "tuple" in value:
            return tuple(decode(v, load_tensor) for v in value["tuple"])
        if "dict" in value:
            return {k: decode(v, load_tensor) for k, v in value["dict"].items()}
        if "dtype" in value:
            return getattr(torch, value["dtype"])
        if "device" in value:
            return torch.device(value["device"])
        if "layout" in value:
            return getattr(torch, value["layout"])
        if "memory_format" in value:
            return getattr(torch, value["memory_format"])
    return value


def restrided(t: torch.Tensor, spec: Dict[str, Any]) -> torch.Tensor:
    """`t` (its logical values) laid out with the strides and storage offset
    the call's spec recorded (encode), when it recorded them. A layout whose
    elements overlap (an expand's zero strides) cannot hold distinct values
    and is kept contiguous."""
    stride, offset = spec.get("stride"), spec.get("offset", 0)
    if stride is None or len(stride) != t.dim() or any(s < 0 for s in stride) or \
            any(s == 0 and n > 1 for n, s in zip(t.shape, stride)):
        return t
    extent = offset + 1 + sum((n - 1) * s for n, s in zip(t.shape, stride)) if t.numel() else offset
    laid = torch.zeros(extent, dtype=t.dtype, device=t.device).as_strided(tuple(t.shape), tuple(stride), offset)
    try:
        laid.copy_(t)
    except RuntimeError:  # overlapping strides after all
        return t
    return laid


def path(capture_dir: str, rank: int) -> str:
    return os.path.join(capture_dir, f"torch-calls-r{rank}.ndjson")


class CallLog:
    """Appends one line per recorded call while a capture is active."""

    def __init__(self, capture_dir: str, rank: int):
        self._file = open(path(capture_dir, rank), "a", encoding="utf-8")

    def write(self, step: int, scope: str, op: str, occurrence: int, args: Tuple, kwargs: Dict,
              names=None, extra: Optional[Dict[str, Any]] = None) -> None:
        """`names`: the record name of each positional argument (an op's schema
        names); None: input.<i>, input.<key> as module inputs are recorded.
        `extra`: JSON fields the caller's isolation reads back (an inductor
        kernel's, compiled.py)."""
        entry: Dict[str, Any] = {"step": step, "scope": scope, "op": op, "occurrence": occurrence}
        entry.update(extra or {})
        try:
            entry["args"] = [encode(a, names[i] if names and i < len(names) else f"input.{i}")
                             for i, a in enumerate(args)]
            entry["kwargs"] = {k: encode(v, k if names else f"input.{k}") for k, v in kwargs.items()}
        except Unrecordable as e:
            entry["unrecordable"] = str(e)
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read(inputs_dir: str, rank: int, step: int, scope: str, op: Optional[str]) -> list:
    """The calls of `scope` (and `op`, when given) captured at `step`, in order."""
    file = path(inputs_dir, rank)
    if not os.path.isfile(file):
        raise CaptureError(f"{file}: missing: {inputs_dir} was not captured by dtrace_torch for rank {rank}")
    found = []
    with open(file, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                entry = json.loads(line)
            except ValueError as e:
                raise CaptureError(f"{file}:{number}: not JSON ({e})") from e
            if entry.get("step") == step and entry.get("scope") == scope and (op is None or entry.get("op") == op):
                found.append(entry)
    return found
