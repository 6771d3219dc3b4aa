"""Any Python array as what libdtrace records: a dtrace-fp(5) dtype name, a shape,
and the address of its bytes in logical, C-contiguous (row-major) order.

The point: the same values in any container (a NumPy array, ``array('f')``, a
memoryview, a torch CPU tensor, a JAX host array, CuPy on the device) give the
same (dtype, shape, bytes), so libdtrace gives them the same fingerprint.

The array protocols are tried in this order, the first the object has wins:

1. ``__cuda_array_interface__`` (CuPy, Numba, torch CUDA tensors): device memory,
   described as it is (never copied: a device array must be C-contiguous);
2. ``__array_interface__`` (NumPy and objects mimicking it);
3. ``__dlpack__`` (JAX, torch CPU tensors, every DLPack producer), host or CUDA;
4. the buffer protocol (``array.array``, ``bytes``, ``bytearray``, ``memoryview``,
   ``mmap``).

Host memory that is not C-contiguous (a transpose, a slice with a step) is copied
in C order and the copy is what ``address`` names; so is a read-only buffer
(``bytes``), which ctypes cannot take the address of in place. Elements are
always little-endian (dtrace-fp(5) hashes bytes as they are in memory; a
big-endian array would hash differently from the same values): big-endian
arrays are refused, not byte-swapped, so that no second rule of element order
exists here.

Nothing here imports NumPy: a strided copy uses NumPy only when the program has
already imported it (it is then much faster than a copy per contiguous run).
"""
from __future__ import annotations

import ctypes
import itertools
import sys
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

__all__ = ["ArrayView", "is_array", "describe", "read_into", "numpy_dtype"]


@dataclass(frozen=True)
class ArrayView:
    """What libdtrace's C API records for one array.

    ``dtype``: the dtrace-fp(5) name (f64 f32 f16 bf16 f8e4m3 f8e5m2 c64 c128
    i64 i32 i16 i8 u64 u32 u16 u8 bool). ``shape``: a tuple of ints, () for a
    0-d array. ``address``: the first of ``nbytes`` bytes in C order (0 when
    ``nbytes`` is 0). ``device``: None for host memory, else the CUDA device
    ordinal. ``stream``: CUDA only, the stream the producer says the data is
    ready on, as a ``cudaStream_t`` value (None: no stream named, use the
    default stream; 1 and 2 are CUDA's legacy and per-thread default streams,
    as ``__cuda_array_interface__`` and DLPack number them). ``keep``: what
    must stay alive while ``address`` is used (the object, a copy, a DLPack
    capsule)."""

    dtype: str
    shape: Tuple[int, ...]
    address: int
    nbytes: int
    device: Optional[int]
    stream: Optional[int]
    keep: Any


# The dtrace-fp(5) dtype names by (kind, size in bytes); kinds: 'f' float,
# 'i' signed, 'u' unsigned, 'b' bool, 'c' complex (NumPy's typestr kinds).
_DTYPES = {
    ("f", 2): "f16", ("f", 4): "f32", ("f", 8): "f64",
    ("i", 1): "i8", ("i", 2): "i16", ("i", 4): "i32", ("i", 8): "i64",
    ("u", 1): "u8", ("u", 2): "u16", ("u", 4): "u32", ("u", 8): "u64",
    ("b", 1): "bool", ("c", 8): "c64", ("c", 16): "c128",
}
_ITEMSIZE = {name: size for (_, size), name in _DTYPES.items()}
_ITEMSIZE.update({"bf16": 2, "f8e4m3": 1, "f8e5m2": 1})

# NumPy has no bfloat16 or float8 of its own; ml_dtypes' (what JAX's host arrays
# hold) show as opaque 'V' typestrs and are known by their dtype's name.
_VOID_DTYPES = {"bfloat16": "bf16", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


def numpy_dtype(dtype: str) -> str:
    """NumPy's type string for a dtrace-fp(5) dtype name: ``f32`` is ``"<f4"``,
    ``u8`` ``"|u1"``, ``bool`` ``"|b1"``, as ``numpy.dtype(...).str`` spells
    them; ``np.empty(shape, numpy_dtype("f32"))`` is the array describe()
    calls f32 (CuPy and ``array_api`` libraries take the string too). The
    table is describe()'s, read the other way. ``bf16`` and the float8s have
    no NumPy type (ml_dtypes' types hold them), and an unknown name none:
    ValueError naming it."""
    for (kind, size), name in _DTYPES.items():
        if name == dtype:
            return ("|" if size == 1 else "<") + kind + str(size)
    if dtype in _ITEMSIZE:
        raise ValueError(f"dtype {dtype}: NumPy has no type for it (ml_dtypes' "
                         f"{next(k for k, v in _VOID_DTYPES.items() if v == dtype)} holds it)")
    raise ValueError(f"dtype {dtype!r}: not a dtrace-fp(5) dtype name ({', '.join(_ITEMSIZE)})")


def _type_name(value) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


# --- layout: one rule for C order, used by every protocol ---------------------

def _numel(shape) -> int:
    n = 1
    for extent in shape:
        n *= extent
    return n


def _is_c_contiguous(shape, strides, itemsize) -> bool:
    """Strides in bytes (None: C-contiguous, as every protocol here says).
    Extents of 1 may have any stride, and an empty array is contiguous."""
    if strides is None or _numel(shape) == 0:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _runs(shape, strides, itemsize):
    """(byte offset from the first element, length) of each contiguous run of
    the array's elements, in C order: the trailing dimensions that are laid out
    contiguously form one run."""
    ndim = len(shape)
    run = itemsize
    inner = ndim
    while inner > 0 and (shape[inner - 1] == 1 or strides[inner - 1] == run):
        run *= shape[inner - 1]
        inner -= 1
    outer = [range(extent) for extent in shape[:inner]]
    for index in itertools.product(*outer):
        yield sum(i * s for i, s in zip(index, strides)), run


def _numpy_view(address, shape, strides, itemsize):
    """The strided elements as a NumPy array of unsigned words, of shape
    shape + (words per element,), when the program has NumPy loaded (None
    otherwise). Words as wide as the strides allow: copying 4-byte words is
    several times faster than bytes (a 1000x1000 f32 transpose: 1.6 against
    8.6 ms)."""
    np = sys.modules.get("numpy")
    if np is None:
        return None
    word = next(w for w in (8, 4, 2, 1) if itemsize % w == 0 and all(s % w == 0 for s in strides))
    low = sum((e - 1) * s for e, s in zip(shape, strides) if s < 0)
    high = sum((e - 1) * s for e, s in zip(shape, strides) if s > 0) + itemsize
    span = (ctypes.c_char * (high - low)).from_address(address + low)
    base = np.frombuffer(span, dtype=f"u{word}")[-low // word:]
    return np.lib.stride_tricks.as_strided(base, shape=tuple(shape) + (itemsize // word,),
                                           strides=tuple(strides) + (word,))


def _gather(address, shape, strides, itemsize, use_numpy=True):
    """A C-order copy of a strided host array, as a ctypes buffer."""
    nbytes = _numel(shape) * itemsize
    out = (ctypes.c_char * nbytes)()
    view = _numpy_view(address, shape, strides, itemsize) if use_numpy else None
    if view is not None:
        sys.modules["numpy"].frombuffer(out, dtype=view.dtype).reshape(view.shape)[...] = view
        return out
    dst = ctypes.addressof(out)
    for offset, length in _runs(shape, strides, itemsize):
        ctypes.memmove(dst, address + offset, length)
        dst += length
    return out


def _scatter(address, shape, strides, itemsize, data: bytes, use_numpy=True):
    """_gather's inverse: writes C-order bytes into a strided host array."""
    view = _numpy_view(address, shape, strides, itemsize) if use_numpy else None
    if view is not None:
        view[...] = sys.modules["numpy"].frombuffer(data, dtype=view.dtype).reshape(view.shape)
        return
    src = 0
    for offset, length in _runs(shape, strides, itemsize):
        ctypes.memmove(address + offset, data[src:src + length], length)
        src += length


# --- what each protocol says, before any copy ---------------------------------

@dataclass(frozen=True)
class _Source:
    dtype: str
    shape: Tuple[int, ...]
    address: int            # of the first element (logical index 0...0)
    strides: Optional[Tuple[int, ...]]  # in bytes; None: C-contiguous
    device: Optional[int]
    stream: Optional[int]
    keep: Any
    writable: bool          # may read_into write at address
    why_not_writable: str = ""

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self.dtype]

    @property
    def nbytes(self) -> int:
        return _numel(self.shape) * self.itemsize

    @property
    def contiguous(self) -> bool:
        return _is_c_contiguous(self.shape, self.strides, self.itemsize)


def _shape(value, shape, what) -> Tuple[int, ...]:
    try:
        shape = tuple(int(e) for e in shape)
    except (TypeError, ValueError):
        raise ValueError(f"{_type_name(value)}: {what} shape {shape!r} is not a tuple of ints") from None
    if any(e < 0 for e in shape):
        raise ValueError(f"{_type_name(value)}: {what} shape {shape} has a negative extent")
    return shape


def _typestr_dtype(value, typestr, descr, protocol) -> str:
    """The dtype name of an __array_interface__ / __cuda_array_interface__ typestr."""
    name = _type_name(value)
    if not isinstance(typestr, str) or len(typestr) < 2:
        raise ValueError(f"{name}: {protocol} typestr {typestr!r} is not a typestr")
    order, kind, size = typestr[0], typestr[1], typestr[2:]
    if order == ">" or (order == "=" and sys.byteorder != "little"):
        raise ValueError(f"{name}: big-endian elements (typestr {typestr!r}): dtrace records "
                         "little-endian bytes; convert it first (NumPy: a.astype(a.dtype.newbyteorder('<')))")
    if order not in "<|=":
        raise ValueError(f"{name}: {protocol} typestr {typestr!r} has no byte order")
    if kind == "V":
        if descr is not None and (len(descr) != 1 or descr[0][0] != ""):
            raise ValueError(f"{name}: a structured dtype (descr {descr!r}) is not an array of "
                             "numbers; record its fields one by one")
        dtype_name = getattr(getattr(value, "dtype", None), "name", None)
        if dtype_name in _VOID_DTYPES and str(_ITEMSIZE[_VOID_DTYPES[dtype_name]]) == size:
            return _VOID_DTYPES[dtype_name]
        raise ValueError(f"{name}: opaque elements (typestr {typestr!r}) have no dtrace-fp(5) dtype")
    dtype = _DTYPES.get((kind, int(size))) if size.isdigit() else None
    if dtype is None:
        raise ValueError(f"{name}: elements of typestr {typestr!r} have no dtrace-fp(5) dtype "
                         "(numbers and bool only)")
    return dtype


def _interface_fields(value, iface, protocol):
    """What __array_interface__ and __cuda_array_interface__ share: dtype,
    shape, strides in bytes; the mask refused."""
    name = _type_name(value)
    if not isinstance(iface, dict):
        raise ValueError(f"{name}: {protocol} is a {_type_name(iface)}, not a dict")
    if iface.get("mask") is not None:
        raise ValueError(f"{name}: {protocol} has a mask (masked elements have no defined value)")
    dtype = _typestr_dtype(value, iface.get("typestr"), iface.get("descr"), protocol)
    shape = _shape(value, iface.get("shape", ()), protocol)
    strides = iface.get("strides")
    if strides is not None:
        strides = tuple(int(s) for s in strides)
        if len(strides) != len(shape):
            raise ValueError(f"{name}: {protocol} has {len(strides)} strides for {len(shape)} dimensions")
    return dtype, shape, strides


def _data_pointer(value, iface, protocol):
    data = iface.get("data")
    if not (isinstance(data, tuple) and len(data) == 2):
        raise ValueError(f"{_type_name(value)}: {protocol} data {data!r} is not (address, read-only)")
    return int(data[0] or 0), bool(data[1])


def _device_of(value) -> int:
    """The CUDA device ordinal of a __cuda_array_interface__ object. The
    interface does not say; __dlpack_device__ (torch, CuPy, JAX) does, without
    exporting anything. Else 0: asking the driver (cuPointerGetAttribute) is
    left to a later version, which a multi-GPU Numba user would need."""
    try:
        device_type, device_id = value.__dlpack_device__()
    except Exception:  # absent, or a producer that refuses: the interface's default
        return 0
    return int(device_id) if int(device_type) == _kDLCUDA else 0


def _from_cuda_interface(value, iface) -> _Source:
    dtype, shape, strides = _interface_fields(value, iface, "__cuda_array_interface__")
    if not _is_c_contiguous(shape, strides, _ITEMSIZE[dtype]):
        raise ValueError(f"{_type_name(value)}: device memory that is not C-contiguous (shape {shape}, "
                         f"strides {strides}) cannot be copied here; make it contiguous first "
                         "(CuPy: cupy.ascontiguousarray(a); torch: t.contiguous())")
    address, _ = _data_pointer(value, iface, "__cuda_array_interface__")
    stream = iface.get("stream")
    return _Source(dtype, shape, address, None, _device_of(value),
                   None if stream is None else int(stream), (value, iface), False, "it is in device memory")


def _from_array_interface(value, iface) -> _Source:
    dtype, shape, strides = _interface_fields(value, iface, "__array_interface__")
    if iface.get("data") is None:
        # The interface's other form: the bytes are the object's own buffer, from 'offset'.
        try:
            address, keep, writable = _buffer_address(value)
        except TypeError:
            raise ValueError(f"{_type_name(value)}: its __array_interface__ has no data and the object "
                             "no buffer") from None
        address += int(iface.get("offset", 0))
        why = "" if writable else "its buffer is read-only"
    else:
        address, readonly = _data_pointer(value, iface, "__array_interface__")
        # The dict too: a NumPy scalar's names a temporary array, a new one at
        # each access, that only the dict's '__ref' holds.
        keep, writable = (value, iface), not readonly
        why = "its __array_interface__ says read-only" if readonly else ""
    return _Source(dtype, shape, address, strides, None, None, keep, writable, why)


# --- DLPack -------------------------------------------------------------------

_kDLCPU, _kDLCUDA, _kDLCUDAHost = 1, 2, 3

# (code, bits) -> dtype, codes of dlpack.h's DLDataTypeCode.
_DLPACK_DTYPES = {
    (0, 8): "i8", (0, 16): "i16", (0, 32): "i32", (0, 64): "i64",
    (1, 8): "u8", (1, 16): "u16", (1, 32): "u32", (1, 64): "u64",
    (2, 16): "f16", (2, 32): "f32", (2, 64): "f64",
    (4, 16): "bf16", (5, 64): "c64", (5, 128): "c128", (6, 8): "bool",
    (10, 8): "f8e4m3", (12, 8): "f8e5m2",   # kDLFloat8_e4m3fn, kDLFloat8_e5m2
}


def dlpack_dtype(code: int, bits: int, lanes: int) -> str:
    """The dtype name of a DLPack DLDataType; ValueError for what dtrace has no name for."""
    if lanes != 1:
        raise ValueError(f"DLPack vector elements ({lanes} lanes) have no dtrace-fp(5) dtype")
    dtype = _DLPACK_DTYPES.get((code, bits))
    if dtype is None:
        raise ValueError(f"DLPack dtype code {code} of {bits} bits has no dtrace-fp(5) dtype")
    return dtype


def dlpack_device(device_type: int, device_id: int) -> Optional[int]:
    """ArrayView.device of a DLPack DLDevice: None for host memory (kDLCPU, and
    kDLCUDAHost, pinned host memory), the ordinal for kDLCUDA; ValueError else."""
    if device_type in (_kDLCPU, _kDLCUDAHost):
        return None
    if device_type == _kDLCUDA:
        return int(device_id)
    raise ValueError(f"DLPack device type {device_type} is neither host memory nor CUDA")


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


# Function objects of our own (not ctypes.pythonapi's shared attributes, whose
# argtypes another library may set otherwise).
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _from_dlpack(value) -> _Source:
    name = _type_name(value)
    # No arguments: no stream (host memory takes none; for CUDA, DLPack's None
    # is the legacy default stream), and no max_version, so every producer,
    # NumPy 2's included, returns the unversioned "dltensor" capsule read below.
    try:
        capsule = value.__dlpack__()
    except Exception as e:
        raise ValueError(f"{name}: its __dlpack__() failed: {e}") from e
    # The capsule is neither renamed nor consumed: kept in ArrayView.keep, its
    # destructor calls the tensor's deleter when it is freed (the DLPack Python
    # specification: a producer's destructor deletes a capsule still named
    # "dltensor"), so the memory stays valid exactly as long as the view is kept.
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise ValueError(f"{name}: its __dlpack__() did not return a \"dltensor\" capsule")
    managed = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    dtype = dlpack_dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    device = dlpack_device(t.device.device_type, t.device.device_id)
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = None
    if t.ndim and t.strides:  # element strides in DLPack; bytes here
        strides = tuple(int(t.strides[i]) * _ITEMSIZE[dtype] for i in range(t.ndim))
    address = (t.data or 0) + t.byte_offset
    if device is not None and not _is_c_contiguous(shape, strides, _ITEMSIZE[dtype]):
        raise ValueError(f"{name}: device memory that is not C-contiguous (shape {shape}, element "
                         "strides " + str(tuple(t.strides[i] for i in range(t.ndim))) +
                         ") cannot be copied here; make it contiguous first")
    # Unversioned DLPack cannot say read-only, and a JAX array must not change.
    return _Source(dtype, shape, address, strides, device, None, (value, capsule), False,
                   "DLPack does not say whether its memory may be written")


# --- the buffer protocol ------------------------------------------------------

# struct format letters -> kind; the size is the memoryview's itemsize.
_FORMAT_KINDS = {"e": "f", "f": "f", "d": "f", "?": "b", "Zf": "c", "Zd": "c"}
_FORMAT_KINDS.update({c: "i" for c in "bhilqn"})
_FORMAT_KINDS.update({c: "u" for c in "BHILQN"})


def _format_dtype(value, fmt: str, itemsize: int) -> str:
    name = _type_name(value)
    prefix = fmt[:1] if fmt[:1] in "<>!=@" else ""   # none, '@' and '=': native order
    code = fmt[len(prefix):]
    if prefix in (">", "!") or (prefix != "<" and sys.byteorder != "little"):
        raise ValueError(f"{name}: big-endian elements (format {fmt!r}): dtrace records "
                         "little-endian bytes")
    kind = _FORMAT_KINDS.get(code)
    dtype = _DTYPES.get((kind, itemsize)) if kind else None
    if dtype is None:
        raise ValueError(f"{name}: buffer elements of format {fmt!r} have no dtrace-fp(5) dtype "
                         "(numbers and bool only)")
    return dtype


def _buffer_address(value):
    """(address, keep, writable) of an object's C-contiguous buffer: in place
    for a writable one; a copy for a read-only one, whose address ctypes
    cannot take. A buffer that is not C-contiguous is copied in C order."""
    with memoryview(value) as mv:
        if mv.nbytes == 0:
            return 0, value, not mv.readonly
        if not mv.readonly and mv.c_contiguous:
            buf = (ctypes.c_char * mv.nbytes).from_buffer(mv)
            return ctypes.addressof(buf), (value, buf), True
        data = mv if mv.c_contiguous else mv.tobytes(order="C")
        buf = (ctypes.c_char * mv.nbytes).from_buffer_copy(data)
        return ctypes.addressof(buf), buf, False


def _from_buffer(value, mv: memoryview) -> _Source:
    dtype = _format_dtype(value, mv.format, mv.itemsize)
    shape = tuple(mv.shape)
    address, keep, writable = _buffer_address(value)
    why = "" if writable else ("its buffer is read-only" if mv.readonly else
                               "its buffer is not C-contiguous")
    return _Source(dtype, shape, address, None, None, None, keep, writable, why)


# --- the API ------------------------------------------------------------------

def _interface(value, attr):
    """(value.attr, None), (None, None) when absent, (None, the error as a
    ValueError) when the property fails otherwise than with AttributeError:
    torch's __cuda_array_interface__ on a bfloat16 tensor (which its DLPack
    exports) or on one that requires grad."""
    try:
        return getattr(value, attr), None
    except AttributeError:
        return None, None
    except Exception as e:
        failed = ValueError(f"{_type_name(value)}: its {attr} failed: {e}")
        failed.__cause__ = e
        return None, failed


def _source(value) -> _Source:
    if isinstance(value, type):
        raise TypeError(f"{value!r} is a type, not an array")
    iface, cuda_failed = _interface(value, "__cuda_array_interface__")
    if iface is not None:
        return _from_cuda_interface(value, iface)
    iface, failed = _interface(value, "__array_interface__")
    if failed is not None:
        raise failed
    if iface is not None:
        return _from_array_interface(value, iface)
    # An interface that failed leaves the protocols after it to try (DLPack
    # exports what torch's CUDA interface refuses), and is reported if none is there.
    if hasattr(value, "__dlpack__"):
        return _from_dlpack(value)
    try:
        mv = memoryview(value)
    except TypeError:
        mv = None
    if mv is not None:
        with mv:
            return _from_buffer(value, mv)
    if cuda_failed is not None:
        raise cuda_failed
    raise TypeError(f"{_type_name(value)} is not an array: it has no __cuda_array_interface__, "
                    "__array_interface__ or __dlpack__, and not the buffer protocol")


def is_array(value) -> bool:
    """Whether ``value`` has one of the protocols describe() reads (no copy, no
    export). describe() may still refuse what it holds (ValueError: a dtype
    dtrace has no name for, big-endian elements, non-contiguous device memory)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and type(value) is numpy.ndarray:  # the common case, without the attribute lookups
        return True
    if isinstance(value, type):
        return False
    for attr in ("__cuda_array_interface__", "__array_interface__"):
        try:
            if getattr(value, attr) is not None:
                return True
        except AttributeError:
            pass
        except Exception:
            return True  # present, but refusing this object: describe() says why
    if hasattr(value, "__dlpack__"):
        return True
    try:
        memoryview(value).release()
        return True
    except TypeError:
        return False


# NumPy's dtypes -> the dtype name _typestr_dtype gives them, as met (plain_fields).
_NUMPY_DTYPES: Dict[Any, str] = {}


def _data_offset() -> Optional[int]:
    """Where a NumPy array's data pointer lies inside the array object: NumPy's
    PyArrayObject starts with the object header, then `char *data` (its
    public struct, the same in NumPy 1.x and 2.x), so at object.__basicsize__.
    Checked against arr.ctypes.data on a few arrays before it is trusted; None
    (read it through arr.ctypes, 0.6-0.8 us an array here) if they disagree."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    offset = object.__basicsize__
    try:
        probes = [numpy.arange(3.0), numpy.zeros((2, 5), numpy.float32)[1], numpy.ones(7, numpy.int8)]
        if all(ctypes.c_void_p.from_address(id(a) + offset).value == a.ctypes.data for a in probes):
            return offset
    except Exception:
        pass
    return None


_DATA_OFFSET: Optional[int] = -1  # not yet known: _data_offset() at the first array


def plain_dtype(dtype) -> Optional[str]:
    """The dtrace-fp(5) name of a NumPy dtype of numbers, as plain_fields()
    names it (None for others: big-endian, structured, bf16 and the float8s)."""
    name = _NUMPY_DTYPES.get(dtype)
    if name is None:
        key = dtype.str
        if key[1:2] == "V":  # bf16 and the float8s (by the dtype's name), structured types
            return None
        try:
            name = _typestr_dtype(dtype, key, None, "__array_interface__")
        except ValueError:
            return None
        _NUMPY_DTYPES[dtype] = name
    return name


def plain_fields(value) -> Optional[Tuple[str, Tuple[int, ...], int, int]]:
    """(dtype, shape, address, nbytes) of a C-contiguous NumPy array (exactly
    numpy.ndarray) of numbers, read from its attributes and its object rather
    than its __array_interface__ dict: what most records are, at a fraction of
    the cost (about 0.3 us against 2; a step records its state this way every
    step). None for anything else, which describe() reads through the
    protocols as always (and refuses, saying why). address is 0 when nbytes is."""
    fields = plain_fields_kept(value)
    return None if fields is None else fields[:4]


def plain_fields_kept(value) -> Optional[Tuple[str, Tuple[int, ...], int, int, Any]]:
    """plain_fields() and the array itself (what keeps its bytes alive): a
    Sink's host_fields for NumPy arrays (dtrace.records), one call per array
    of a step's state."""
    global _DATA_OFFSET
    numpy = sys.modules.get("numpy")
    if numpy is None or type(value) is not numpy.ndarray or not value.flags.c_contiguous:
        return None
    dtype = _NUMPY_DTYPES.get(value.dtype) or plain_dtype(value.dtype)
    if dtype is None:
        return None
    nbytes = value.nbytes
    if not nbytes:
        return dtype, value.shape, 0, 0, value
    offset = _DATA_OFFSET
    if offset == -1:
        offset = _DATA_OFFSET = _data_offset()
    address = ctypes.c_void_p.from_address(id(value) + offset).value if offset is not None else value.ctypes.data
    return dtype, value.shape, address, nbytes, value


def _plain_ndarray(value) -> Optional[ArrayView]:
    """plain_fields() as an ArrayView."""
    fields = plain_fields(value)
    if fields is None:
        return None
    return ArrayView(fields[0], fields[1], fields[2], fields[3], None, None, value)


def describe(value) -> ArrayView:
    """``value`` as an ArrayView (see the module's docstring for the protocols).

    TypeError: ``value`` is not an array (none of the protocols); ValueError:
    it is one that dtrace cannot record as it is (its dtype, byte order,
    non-contiguous device memory, a device other than the host or CUDA, a
    producer that failed). Both name the type and what is wrong."""
    view = _plain_ndarray(value)
    if view is not None:
        return view
    src = _source(value)
    nbytes = src.nbytes
    if nbytes == 0:
        return ArrayView(src.dtype, src.shape, 0, 0, src.device, src.stream, src.keep)
    if src.contiguous:
        return ArrayView(src.dtype, src.shape, src.address, nbytes, src.device, src.stream, src.keep)
    # Host only: device sources are refused above when not contiguous.
    copy = _gather(src.address, src.shape, src.strides, src.itemsize)
    return ArrayView(src.dtype, src.shape, ctypes.addressof(copy), nbytes, None, None, (src.keep, copy))


def read_into(value, data) -> None:
    """Copies ``data`` (bytes in C order, as a capture holds them) into a
    writable host array's own memory, whatever its strides: a captured input
    read back. TypeError when the array is read-only, on a device, or seen
    only through DLPack (which cannot say whether its memory may be written:
    a JAX array must not change); ValueError when the sizes differ."""
    src = _source(value)
    name = _type_name(value)
    if src.device is not None:
        raise TypeError(f"{name}: cannot read bytes into it: it is in device memory")
    if not src.writable:
        raise TypeError(f"{name}: cannot read bytes into it: {src.why_not_writable}")
    data = bytes(data)
    if len(data) != src.nbytes:
        raise ValueError(f"{name}: {len(data)} bytes for an array of {src.nbytes} "
                         f"({src.dtype}, shape {list(src.shape)})")
    if not data:
        return
    if src.contiguous:
        ctypes.memmove(src.address, data, len(data))
    else:
        _scatter(src.address, src.shape, src.strides, src.itemsize, data)
