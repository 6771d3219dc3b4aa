"""INTERIM (replaced by helper-12's module on merge): NumPy and buffers only."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Optional

_TYPESTR = {"f8": "f64", "f4": "f32", "f2": "f16", "i8": "i64", "i4": "i32", "i2": "i16", "i1": "i8",
            "u8": "u64", "u4": "u32", "u2": "u16", "u1": "u8", "b1": "bool", "c8": "c64", "c16": "c128"}
_FORMAT = {"d": "f64", "f": "f32", "e": "f16", "q": "i64", "i": "i32", "h": "i16", "b": "i8", "B": "u8",
           "Q": "u64", "I": "u32", "H": "u16", "?": "bool"}


@dataclass(frozen=True)
class ArrayView:
    dtype: str
    shape: tuple
    address: int
    nbytes: int
    device: Optional[int]
    stream: Optional[int]
    keep: Any


def is_array(value) -> bool:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return False
    if hasattr(value, "__array_interface__") or hasattr(value, "__cuda_array_interface__"):
        return True
    try:
        memoryview(value)
        return True
    except TypeError:
        return False


def describe(value) -> ArrayView:
    ai = getattr(value, "__array_interface__", None)
    if ai is not None:
        if ai.get("strides") is not None:
            import numpy
            value = numpy.ascontiguousarray(value)
            ai = value.__array_interface__
        dtype = _TYPESTR[ai["typestr"][1:]]
        shape = tuple(ai["shape"])
        n = 1
        for d in shape:
            n *= d
        size = n * int(ai["typestr"][2:])
        return ArrayView(dtype, shape, ai["data"][0] if size else 0, size, None, None, value)
    m = memoryview(value)
    if not m.c_contiguous or m.readonly:
        m = memoryview(bytearray(m.tobytes())).cast("B").cast(m.format, m.shape) if m.ndim else memoryview(bytearray(m.tobytes())).cast(m.format)
    buf = (ctypes.c_char * m.nbytes).from_buffer(m) if m.nbytes else None
    return ArrayView(_FORMAT[m.format], tuple(m.shape), ctypes.addressof(buf) if buf is not None else 0,
                     m.nbytes, None, None, (value, m, buf))


def read_into(value, data: bytes) -> None:
    m = memoryview(value).cast("B")
    if len(m) != len(data):
        raise ValueError("size")
    m[:] = data
