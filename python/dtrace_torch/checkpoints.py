"""Checkpoints of everything a step depends on: the model, the optimizer, every RNG
(torch CPU, each CUDA device in use, Python ``random``, NumPy when imported) and the
extra stateful objects handed to the Recorder (a data sampler's position).

A checkpoint holds the state at the *start* of a step, in ``<dir>/step-<K>.pt``;
its files, their names and the search for the newest are dtrace.checkpoints'
(written to a temporary file and renamed, so a crash never leaves half a
checkpoint), the generators of every Python program dtrace.generators'. It also holds the model's signature (parameter and
buffer names, shapes, dtypes) so that restoring one written for another model is an
error naming the difference instead of a silent partial load.
"""
from __future__ import annotations

import copy
import functools
import inspect
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

from dtrace import checkpoints as files
from dtrace import generators

from .errors import CheckpointError

SUFFIX = ".pt"
# torch 2.6 made torch.load default to weights_only=True, which refuses the RNG
# states (tuples, NumPy arrays) a checkpoint holds; this file was written by this
# package, so it is loaded in full where torch has the switch.
_TRUSTED = {"weights_only": False} if "weights_only" in inspect.signature(torch.load).parameters else {}


path_of = functools.partial(files.path_of, suffix=SUFFIX)
steps_in = functools.partial(files.steps_in, suffix=SUFFIX)
nearest = functools.partial(files.nearest, suffix=SUFFIX)


def signature(model: torch.nn.Module) -> List[Tuple[str, List[int], str]]:
    return [(name, list(t.shape), str(t.dtype)) for name, t in model.state_dict().items()]


def rng_state() -> Dict[str, Any]:
    """Every random generator a PyTorch step may draw from."""
    state: Dict[str, Any] = {"torch": torch.get_rng_state(), **generators.host_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    generators.set_host_state(state)
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _payload(step: int, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer],
             extra: Mapping[str, Any]) -> Dict[str, Any]:
    """What a checkpoint holds: the one list of a step's state, for files and for
    the copies a replay session keeps (snapshot)."""
    return {
        "format": "dtrace_torch-checkpoint/1",
        "step": step,
        "signature": signature(model),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "rng": rng_state(),
        "extra": {name: obj.state_dict() for name, obj in extra.items()},
    }


def snapshot(step: int, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer],
             extra: Mapping[str, Any]) -> Dict[str, Any]:
    """The state at the start of `step`, copied in memory (on the tensors' own
    devices): a replay session starts each later step request from it
    (dtrace-fp(5), "Replay sessions") without reading the checkpoint again.
    The parameters' gradients too, which no checkpoint holds: a program that
    zeroes them after its optimizer step starts each step from what the last
    left, and a request served in between (an isolated backward accumulates
    into them) must not leave its own there for the next step request."""
    payload = copy.deepcopy(_payload(step, model, optimizer, extra))
    payload["grads"] = [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
    return payload


def restore_snapshot(payload: Mapping[str, Any], model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer],
                     extra: Mapping[str, Any]) -> None:
    """Puts a snapshot back, as load() puts a checkpoint back, and the
    parameters' gradients as they were."""
    _apply(payload, "the replay session's copy", model, optimizer, extra, True)
    for p, g in zip(model.parameters(), payload.get("grads", [])):
        p.grad = None if g is None else g.clone()


def save(directory: str, step: int, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer],
         extra: Mapping[str, Any]) -> str:
    """Writes the state at the start of `step` atomically; returns the file."""
    payload = _payload(step, model, optimizer, extra)
    return files.write_atomically(path_of(directory, step), lambda f: torch.save(payload, f))


def load(directory: str, step: int, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer],
         extra: Mapping[str, Any], restore_extra: bool = True) -> None:
    """Restores the state at the start of `step` from its checkpoint, or raises
    CheckpointError naming the file and what does not fit."""
    path = path_of(directory, step)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no checkpoint of step {step} (checkpoints in {directory}: "
                              f"{steps_in(directory) or 'none'})")
    try:
        payload = torch.load(path, map_location="cpu", **_TRUSTED)
    except Exception as e:  # a torn or foreign file: say which
        raise CheckpointError(f"{path}: not a readable checkpoint ({e})") from e
    if not isinstance(payload, dict) or payload.get("format") != "dtrace_torch-checkpoint/1":
        raise CheckpointError(f"{path}: not a dtrace_torch checkpoint")
    _apply(payload, path, model, optimizer, extra, restore_extra)


def _apply(payload: Mapping[str, Any], path: str, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer],
           extra: Mapping[str, Any], restore_extra: bool) -> None:
    mine, theirs = signature(model), [tuple(x) for x in payload["signature"]]
    mine = [tuple(x) for x in mine]
    if mine != theirs:
        missing = sorted(set(n for n, *_ in mine) - set(n for n, *_ in theirs))
        unexpected = sorted(set(n for n, *_ in theirs) - set(n for n, *_ in mine))
        changed = sorted(n for (n, *a) in mine for (m, *b) in theirs if n == m and a != b)
        raise CheckpointError(f"{path}: written for another model (missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}, shape or dtype changed {changed[:5]})")
    model.load_state_dict(payload["model"])
    if optimizer is not None:
        if payload["optimizer"] is None:
            raise CheckpointError(f"{path}: holds no optimizer state")
        optimizer.load_state_dict(payload["optimizer"])
    if restore_extra:
        for name, obj in extra.items():
            if name not in payload["extra"]:
                raise CheckpointError(f"{path}: holds no state for '{name}'")
            obj.load_state_dict(payload["extra"][name])
    set_rng_state(payload["rng"])
