"""Python's `random` and NumPy's global generator: the host generators every
Python program has, whatever it trains with.

Both are seeded from the operating system when imported, so in a program that
never seeds them they differ in every process. They are checkpointed always
(host_state, set_host_state), and recorded only for a step that advanced them
(Drawn): a generator the step drew from is part of what it computed, one it
never read is not, and two identical computations must not diverge over a
state nothing reads (docs/python.md, "What is recorded")."""
from __future__ import annotations

import ctypes
import random
import sys
from array import array
from typing import Any, Dict, List, Mapping, Optional, Tuple


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
    i64 arrays (the records of op "rng": python, numpy).

    A step that never touches them must cost next to nothing (issue 41): their
    state tuples (getstate(), NumPy's get_state(), tens of microseconds each)
    are not built to find out. Each generator's Mersenne Twister words are read
    where it keeps them (Words) and compared as bytes; NumPy's legacy cached
    gaussian, which a draw may take without advancing the words, is looked at
    through get_state() only while it may be there (below). Where the words
    cannot be read in place, the state tuples are compared as before."""

    def __init__(self):
        self.python: Any = None  # Python's generator at the step's start: (words, gauss_next) or getstate()
        self.numpy: Any = None   # NumPy's: its words, or get_state() where they cannot be read
        self._numpy_state: Any = None  # get_state() at the start, when its cached gaussian may be there
        # Words of NumPy's generator at which it held no cached gaussian: one
        # appears only with a legacy normal draw, which advances the words, so
        # while they are unchanged it holds none still and get_state() is not asked.
        self._no_gauss_at: Any = None
        self._python_words = Words.python()
        self._numpy_words: Optional[Words] = None

    def _numpy(self, numpy: Any) -> Optional["Words"]:
        words = self._numpy_words
        if words is None or not words.current(numpy):
            words = self._numpy_words = Words.numpy(numpy)
            # The state the reader was checked against says whether a gaussian is cached.
            self._no_gauss_at = words.no_gauss_at if words is not None else None
        return words

    def take(self) -> None:
        words = self._python_words
        self.python = (words.read(), random._inst.gauss_next) if words is not None else random.getstate()
        numpy = sys.modules.get("numpy")
        self.numpy = self._numpy_state = None
        if numpy is None:
            return
        words = self._numpy(numpy)
        if words is None:
            self.numpy = numpy.random.get_state()
            return
        self.numpy = words.read()
        if self.numpy != self._no_gauss_at:
            state = numpy.random.get_state()  # (name, keys, position, has_gauss, cached_gaussian)
            self._numpy_state = state if state[3] else None
            self._no_gauss_at = None if state[3] else self.numpy

    def drawn(self) -> List[Tuple[str, array]]:
        out = []
        words = self._python_words
        if self.python is not None:
            if words is not None:
                if (words.read(), random._inst.gauss_next) != self.python:
                    out.append(("python", words.state(self.python[0])))
            elif random.getstate() != self.python:
                out.append(("python", array("q", self.python[1])))
        numpy = sys.modules.get("numpy")
        if self.numpy is None or numpy is None:
            return out
        if isinstance(self.numpy, bytes) and self._numpy_words is not None and self._numpy_words.current(numpy):
            now = self._numpy_words.read()
            drew = now != self.numpy
            if not drew and self._numpy_state is not None:
                state = numpy.random.get_state()
                drew = state[3:] != self._numpy_state[3:]
                self._no_gauss_at = None if state[3] else now
            if drew:
                out.append(("numpy", self._numpy_words.state(self.numpy)))
            return out
        if isinstance(self.numpy, bytes):  # its generator replaced during the step: drawn from, as far as we know
            out.append(("numpy", Words.state_of(self.numpy)))
            return out
        now = numpy.random.get_state()
        # (name, keys, position, has_gauss, cached_gaussian): the keys alone do
        # not change between refills, the position does.
        if now[2:] != self.numpy[2:] or not numpy.array_equal(now[1], self.numpy[1]):
            out.append(("numpy", array("q", [int(k) for k in self.numpy[1]] + [int(self.numpy[2])])))
        return out


# A Mersenne Twister's state: 624 32-bit words and a position.
MT_WORDS = 624


class Words:
    """A Mersenne Twister's words and position, read as bytes where its
    generator keeps them, without building its state tuple: Python's global
    generator (CPython's RandomObject: the object header, then `int index;
    uint32_t state[624]`) and NumPy's global RandomState (its MT19937 bit
    generator's state struct, `uint32_t key[624]; int pos`, at the address its
    ctypes interface gives). Both layouts are the implementations' own, not an
    interface: a reader is made only after what it reads matched the
    generator's own getstate()/get_state(), else the caller compares those."""

    def __init__(self, owner: Any, address: int, words_first: bool):
        self.owner, self.address, self.words_first = owner, address, words_first
        # The words and position in place, as a ctypes array over the owner's
        # memory (kept alive by self.owner): .raw copies them out in one C call,
        # a quarter of ctypes.string_at()'s cost (read() runs four times a step).
        self.cells = (ctypes.c_char * (4 * (MT_WORDS + 1))).from_address(address)
        self.bits: Any = None           # NumPy's: the bit generator whose state is read
        self.no_gauss_at: Any = None    # NumPy's: its words when made, if no gaussian was cached then

    @classmethod
    def python(cls) -> Optional["Words"]:
        inst = getattr(random, "_inst", None)
        if sys.implementation.name != "cpython" or not isinstance(inst, random.Random) or \
                array("I").itemsize != 4:
            return None
        header = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)  # ob_refcnt, ob_type
        base = next((t for t in type(inst).__mro__ if t.__module__ == "_random"), None)
        if base is None or base.__basicsize__ < header + 4 * (MT_WORDS + 1):
            return None  # not the object this layout describes: nothing read from it
        words = cls(inst, id(inst) + header, words_first=False)
        _, state, _ = inst.getstate()
        return words if tuple(words.state(words.read())) == state else None

    @classmethod
    def numpy(cls, numpy: Any) -> Optional["Words"]:
        try:
            generator = numpy.random.mtrand._rand
            bits = generator._bit_generator
            if type(bits).__name__ != "MT19937" or array("I").itemsize != 4:
                return None
            words = cls(generator, bits.ctypes.state_address, words_first=True)
            words.bits = bits
            _, keys, position, has_gauss, _ = numpy.random.get_state()
        except (AttributeError, TypeError, ValueError):
            return None
        raw = words.read()
        words.no_gauss_at = None if has_gauss else raw
        expected = array("q", [int(k) for k in keys] + [int(position)])
        return words if words.state(raw) == expected else None

    def current(self, numpy: Any) -> bool:
        """Still NumPy's global generator's words (not another generator's since)."""
        generator = getattr(numpy.random.mtrand, "_rand", None)
        return generator is self.owner and getattr(generator, "_bit_generator", None) is self.bits

    def read(self) -> bytes:
        return self.cells.raw

    def state(self, raw: bytes) -> array:
        """The record of op "rng": the words, then the position, as i64."""
        return Words.state_of(raw) if self.words_first else Words.state_of(raw[4:] + raw[:4])

    @staticmethod
    def state_of(raw: bytes) -> array:
        """Words first, then the position (a signed int), as i64."""
        words = array("I")
        words.frombytes(raw[:4 * MT_WORDS])
        out = array("q", words.tolist())
        out.append(int.from_bytes(raw[4 * MT_WORDS:], sys.byteorder, signed=True))
        return out
