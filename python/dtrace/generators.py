"""Python's `random` and NumPy's global generator: the host generators every
Python program has, whatever it trains with.

Both are seeded from the operating system when imported, so in a program that
never seeds them they differ in every process. They are checkpointed always
(host_state, set_host_state), and recorded only for a step that advanced them
(Drawn): a generator the step drew from is part of what it computed, one it
never read is not, and two identical computations must not diverge over a
state nothing reads (docs/python.md, "What is recorded")."""
from __future__ import annotations

import random
import sys
from array import array
from typing import Any, Dict, List, Mapping, Tuple


def host_state() -> Dict[str, Any]:
    """The state of Python's generator and, when NumPy is imported, NumPy's."""
    state: Dict[str, Any] = {"python": random.getstate()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    return state


def set_host_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    numpy = sys.modules.get("numpy")
    if "numpy" in state and numpy is not None:
        numpy.random.set_state(state["numpy"])


class Drawn:
    """The host generators as a step found them: take() at its start, drawn() at
    its end names those the step advanced, with their state at its start as
    i64 arrays (the records of op "rng": python, numpy)."""

    def __init__(self):
        self.python: Any = None
        self.numpy: Any = None

    def take(self) -> None:
        self.python = random.getstate()
        numpy = sys.modules.get("numpy")
        self.numpy = numpy.random.get_state() if numpy is not None else None

    def drawn(self) -> List[Tuple[str, array]]:
        out = []
        if self.python is not None and random.getstate() != self.python:
            out.append(("python", array("q", self.python[1])))
        numpy = sys.modules.get("numpy")
        if self.numpy is not None and numpy is not None:
            now = numpy.random.get_state()
            # (name, keys, position, has_gauss, cached_gaussian): the keys alone do
            # not change between refills, the position does.
            if now[2:] != self.numpy[2:] or not numpy.array_equal(now[1], self.numpy[1]):
                out.append(("numpy", array("q", [int(k) for k in self.numpy[1]] + [int(self.numpy[2])])))
        return out
