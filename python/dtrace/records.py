"""Handing values to libdtrace: the one place that turns a program's arrays and
numbers into the records of dtrace-fp(5). Everything above it says *what* to
record. dtrace_torch's Sink is this one with torch tensors' own views."""
from __future__ import annotations

import ctypes
import struct
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from . import arrays, capi
from .arrays import ArrayView
from .errors import CudaUnavailable, RecorderError

# How a one-element array's bytes read as a Python float, by dtype.
_FLOAT = {"f64": "<d", "f32": "<f", "f16": "<e"}

# NumPy's float scalar types (numpy.float32, ...) as met, by their dtype name (Sink.scalar).
_FLOAT_SCALARS: Dict[type, str] = {}


def number_view(value: Any) -> ArrayView:
    """A Python number as a 0-d array of its exact type: bool, i64, f64 (a
    Python float is an IEEE double)."""
    if isinstance(value, bool):
        cell, dtype = ctypes.c_bool(value), "bool"
    elif isinstance(value, int):
        if not fits_int64(value):
            raise RecorderError(f"{value}: an integer outside int64 cannot be recorded as i64")
        cell, dtype = ctypes.c_int64(value), "i64"
    else:
        cell, dtype = ctypes.c_double(float(value)), "f64"
    return ArrayView(dtype, (), ctypes.addressof(cell), ctypes.sizeof(cell), None, None, cell)


def is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float))


def fits_int64(value: int) -> bool:
    return -(1 << 63) <= value < (1 << 63)


class Repr(bytes):
    """A state leaf that is neither an array nor a number a record holds (a
    string, an object, an integer wider than int64 such as a NumPy Generator's
    128-bit state): its repr's bytes, recorded as u8 so a change still shows.
    Its length is the value's, not a shape the state keeps: a checkpoint's
    signature leaves it out (a string that grows is still the same state)."""


class Sink:
    """Writes records through one libdtrace handle, keeping the scope libdtrace
    holds equal to the scope the caller names (whole paths such as
    fwd/layer.1/mlp, not nested parts) whenever it is read: the scope is the
    handle's set_scope(), which crosses into C only when something is recorded
    or asked there (capi.Native.set_scope)."""

    def __init__(self, native: "capi.Native"):
        self.native = native
        self._scope: Optional[str] = None
        self.tensors = 0  # records handed over, for the benchmark's cost per tensor
        # True inside a step or an isolated repetition: code that runs outside
        # steps too (an evaluation) records nothing there.
        self.active = False
        # True in a step or repetition that may hold a pinned call (DTRACE_PIN,
        # native.pins(), asked once when it begins): only then is pinned() asked
        # for each kernel output, so an ordinary step pays no C call for it.
        self.pins = False
        self._scratch = ctypes.create_string_buffer(0)  # where pinned() writes (pinned_value)
        # Host records waiting to be handed over in one call (gather()): their
        # level, then (op, io, name, dtype, shape, nbytes) each, their
        # addresses, and what keeps those bytes alive until the call. None
        # while records go out as they come.
        self._gathered: Optional[Tuple[int, list, list, list]] = None

    def set_scope(self, scope: Optional[str]) -> Optional[str]:
        previous = self._scope
        if scope != previous:
            if self._gathered is not None:
                self._hand_over()  # the gathered records belong to the scope they were given in
            self.native.set_scope(scope)
            self._scope = scope
        return previous

    # ---- records handed over together (capi.Native.tensor_batch) -------------------------
    def gather(self) -> None:
        """From now until flush(), host records of one level are kept and
        handed over in one call (what a step records at its start: its state
        and batch): their order, scope and level are kept, as anything that
        could tell them apart (a scope change, a scalar, a device record,
        another level) hands over what is kept first."""
        if self._gathered is None:
            self._gathered = (-1, [], [], [])

    def flush(self) -> None:
        """Hands over what gather() kept and records as they come again."""
        try:
            self._hand_over()
        finally:
            self._gathered = None

    def _hand_over(self) -> None:
        """What gather() kept, in one call; gathering goes on."""
        gathered = self._gathered
        if gathered is not None and gathered[1]:
            self._gathered = (-1, [], [], [])
            self.native.tensor_batch(gathered[0], tuple(gathered[1]), gathered[2])

    # (dtype, shape, address, nbytes, what keeps the bytes alive) of a host
    # array view() would describe so, read without making the ArrayView; None
    # where view() must say (a subclass adds its arrays). A plain function
    # here: a step calls it for every array of its state.
    host_fields = staticmethod(arrays.plain_fields_kept)

    @property
    def scope(self) -> Optional[str]:
        return self._scope

    # What a subclass gives its own arrays (dtrace_torch: torch tensors).
    def view(self, value: Any) -> ArrayView:
        """The value's logical bytes: an array (dtrace.arrays) or a Python number."""
        return number_view(value) if is_number(value) else arrays.describe(value)

    def host_copy(self, value: Any) -> Any:
        """A host copy of a device array, for its bytes (DTRACE_CAPTURE) or when
        libdtrace has no device code to hash it where it lies."""
        raise RecorderError(f"a device array ({type(value).__name__}) needs a host copy here (its bytes are "
                            "captured, or this libdtrace has no device code): record a host copy of it")

    def device_digests(self, views: Sequence[ArrayView]) -> List[Optional[int]]:
        """xxh3-64k/1 of the device arrays on their device, one batched call per
        (device, stream), never copied to the host; None for host arrays, and for
        all when this libdtrace has no device code."""
        out: List[Optional[int]] = [None] * len(views)
        groups: Dict[Tuple[int, int], List[int]] = {}
        for i, v in enumerate(views):
            if v.device is not None:
                groups.setdefault((v.device, v.stream or 0), []).append(i)
        for (device, stream), indices in groups.items():
            try:
                digests = self.device_batch(device, [views[i].address for i in indices],
                                            [views[i].nbytes for i in indices], stream)
            except CudaUnavailable:
                return [None] * len(views)
            for i, d in zip(indices, digests):
                out[i] = d
        return out

    def device_batch(self, device: int, addresses: List[int], sizes: List[int], stream: int) -> List[int]:
        """One batched device fingerprint call (dtrace_torch makes `device` current first)."""
        return capi.fingerprint_device_batch(addresses, sizes, stream)

    # ---- pinned ops (dtrace-fp(5), "Pinned ops") ------------------------------------
    def take_pins(self, op: str, items: Sequence[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
        """The outputs of one call of `op` in the current scope as the step must
        use them from now on: libdtrace is asked once for each (its calls are
        counted per scope, op and name) whether it is pinned, and a pinned one
        takes the pinned bytes (pinned_value). Call it only while self.pins,
        right after the op ran and before its outputs are recorded or read."""
        return [(name, self.pinned_value(op, name, value)) for name, value in items]

    def pinned_value(self, op: str, name: str, value: Any) -> Any:
        """Asks whether output `name` of this call of `op` is pinned. Not
        pinned: `value`, untouched. Pinned: a writable host array gets the
        pinned bytes in place (through its own strides) and is returned; a
        Python number is returned as the pinned number of its type; anything
        else (a read-only or device array, an array seen only through DLPack,
        such as JAX's) is returned as a new host NumPy array of the pinned
        bytes, which the program must use instead (Recorder.record returns it)."""
        if is_number(value):
            view = number_view(value)
            if not self.native.pinned(op, name, view.address, view.nbytes):
                return value
            return type(value)(view.keep.value)  # the ctypes cell pinned() wrote
        view = self._view_of(op, name, value)
        size = view.nbytes
        if len(self._scratch) < size:
            self._scratch = ctypes.create_string_buffer(max(size, 2 * len(self._scratch)))
        if not self.native.pinned(op, name, ctypes.addressof(self._scratch) if size else 0, size):
            return value
        data = self._scratch.raw[:size]
        try:
            arrays.read_into(value, data)
            return value
        except TypeError as why:
            return self._pinned_copy(op, name, view, data, why)

    def _pinned_copy(self, op: str, name: str, view: ArrayView, data: bytes, why: Exception) -> Any:
        """The pinned bytes as a new host NumPy array, for an output that cannot
        take them in place (`why`)."""
        numpy = sys.modules.get("numpy")
        try:
            if numpy is None:
                raise ValueError("NumPy is not imported to hold them")
            return numpy.frombuffer(data, arrays.numpy_dtype(view.dtype)).reshape(view.shape).copy()
        except ValueError as e:
            raise RecorderError(f"DTRACE_PIN: {self._scope} {op} output '{name}' is pinned, but its pinned "
                                f"bytes can be put neither into it ({why}) nor into a new array ({e})") from e

    def tensors_(self, level: int, op: str, io: int, items: Sequence[Tuple[str, Any]]) -> None:
        """Records named arrays (all of one op and io) if libdtrace wants `level` here."""
        # Step level is wanted but in a fast-forwarded step, where libdtrace
        # drops host records before hashing them: not asked for those (one C
        # call a step less), only before a device array is hashed (below).
        if not self.active or not items or (level != capi.LEVEL_STEP and not self.native.wants(level)):
            return
        gathered = self._gathered
        if gathered is not None and gathered[0] not in (-1, level):
            self._hand_over()
            gathered = self._gathered
        # Host arrays, most records: in one call (with those gathered, if any).
        records, addresses, keep = ([], [], []) if gathered is None else gathered[1:]
        mark = len(records)
        fields_of = self.host_fields
        on_device = False
        try:
            for name, value in items:
                fields = fields_of(value)
                if fields is None:
                    view = self._view_of(op, name, value)
                    if view.device is not None:
                        on_device = True
                        break
                    fields = (view.dtype, view.shape, view.address if view.nbytes else 0, view.nbytes, view.keep)
                dtype, shape, address, nbytes, owner = fields
                records.append((op, io, name, dtype, shape, nbytes))
                addresses.append(address)
                keep.append(owner)
        except BaseException:  # a value refused: none of this call's records, as before any was handed over
            del records[mark:], addresses[mark:], keep[mark:]
            raise
        if not on_device:
            self.tensors += len(items)
            if gathered is None:
                self.native.tensor_batch(level, tuple(records), addresses)
            elif gathered[0] == -1:
                self._gathered = (level, records, addresses, keep)
            return
        # A device array among them: the loop below, after what was gathered before this call.
        del records[mark:], addresses[mark:], keep[mark:]
        self._hand_over()
        if level == capi.LEVEL_STEP and not self.native.wants(level):
            return
        views = [self._view_of(op, name, v) for name, v in items]
        capture = self.native.captures()
        digests = self.device_digests(views)
        for i, ((name, value), view) in enumerate(zip(items, views)):
            digest = digests[i]
            if view.device is not None and digest is None:  # no device code: hashed on the host
                view = self.view(self.host_copy(value))
            if view.device is not None:
                host = self.view(self.host_copy(value)) if capture and view.nbytes else None
                self.native.tensor(level, op, io, name, view.dtype, view.shape,
                                   host.address if host is not None else 0, view.nbytes, digest)
            else:
                self.native.tensor(level, op, io, name, view.dtype, view.shape,
                                   view.address if view.nbytes else 0, view.nbytes)
            self.tensors += 1

    def _view_of(self, op: str, name: str, value: Any) -> ArrayView:
        """view(), with a refusal naming the record: one call records many."""
        try:
            return self.view(value)
        except (TypeError, ValueError) as e:
            if type(e) not in (TypeError, ValueError):  # a subclass may need other arguments
                raise
            raise type(e)(f"{op} record {name!r}: {e}") from e

    def scalar(self, level: int, op: str, io: int, name: str, value: Any) -> None:
        """A Python number or a one-element array, by its exact bits: floats as
        their own dtype (f16, bf16, f32, f64), integers and booleans as i64."""
        if not self.active:
            return
        if self._gathered is not None:
            self._hand_over()
        dtype = _FLOAT_SCALARS.get(type(value))
        if dtype is not None:  # a NumPy float scalar (np.mean's result), its type met before: its own bytes
            raw = value.tobytes()
            self.native.scalar(level, op, io, name, dtype, int.from_bytes(raw, "little"), float(value))
            return
        if not is_number(value):
            numpy = sys.modules.get("numpy")
            # A NumPy scalar as the 0-d array it is: its dtype and bytes read
            # without its __array_interface__ dict.
            if numpy is not None and isinstance(value, numpy.generic):
                dtype = arrays.plain_dtype(value.dtype)
                if dtype in _FLOAT:
                    _FLOAT_SCALARS[type(value)] = dtype
                    raw = value.tobytes()
                    self.native.scalar(level, op, io, name, dtype, int.from_bytes(raw, "little"), float(value))
                    return
                value = numpy.asarray(value)
            fields = self.host_fields(value)
            if fields is None:
                view = self.view(value)
                if view.device is not None:
                    view = self.view(self.host_copy(value))
                fields = (view.dtype, view.shape, view.address, view.nbytes, view.keep)
            dtype, shape, address, nbytes, _ = fields
            count = 1
            for d in shape:
                count *= d
            if count != 1:
                raise RecorderError(f"scalar {name!r}: {dtype}{list(shape)} has {count} elements, not 1")
            raw = ctypes.string_at(address, nbytes)
            if dtype in _FLOAT or dtype == "bf16":
                bits = int.from_bytes(raw, "little")
                number = (struct.unpack("<f", b"\0\0" + raw)[0] if dtype == "bf16"
                          else struct.unpack(_FLOAT[dtype], raw)[0])
                self.native.scalar(level, op, io, name, dtype, bits, number)
                return
            if dtype.startswith("c"):
                raise RecorderError(f"scalar {name!r}: a complex number ({dtype}) is not a scalar record")
            value = int.from_bytes(raw, "little", signed=not dtype.startswith("u") and dtype != "bool")
        if isinstance(value, (bool, int)):
            self.native.scalar(level, op, io, name, "i64", int(value) & ((1 << 64) - 1), float(value))
        else:
            bits = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
            self.native.scalar(level, op, io, name, "f64", bits, float(value))


def flatten(prefix: str, value: Any, is_leaf: Callable[[Any], bool] = arrays.is_array) -> List[Tuple[str, Any]]:
    """The arrays inside nested tuples, lists and dicts, named prefix.i / prefix.key."""
    out: List[Tuple[str, Any]] = []
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            out.extend(flatten(f"{prefix}.{i}", v, is_leaf))
    elif isinstance(value, dict):
        for k, v in value.items():
            out.extend(flatten(f"{prefix}.{k}", v, is_leaf))
    elif is_leaf(value):
        out.append((prefix, value))
    return out


def state_values(prefix: str, value: Any, is_leaf: Callable[[Any], bool] = arrays.is_array) -> List[Tuple[str, Any]]:
    """A state_dict's leaves: arrays, numbers, and everything else as its repr's
    bytes (u8, so a changed non-numeric field still shows: Repr), named by their path."""
    out: List[Tuple[str, Any]] = []
    _state_leaves(prefix, value, is_leaf, out)
    return out


_NUMBERS = (bool, int, float)


def _state_leaves(prefix: str, value: Any, is_leaf: Callable[[Any], bool], out: List[Tuple[str, Any]]) -> None:
    # A list built by plain recursion, not nested generators: a step walks its
    # state every step (several us a step as generators).
    if isinstance(value, _NUMBERS):
        out.append((prefix, value if isinstance(value, (bool, float)) or fits_int64(value)
                    else Repr(repr(value).encode())))
    elif isinstance(value, dict):
        for k, v in value.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            # An array, the common leaf, without the recursion: no leaf is a dict,
            # list, tuple or None, and a number (np.float64 is a float) goes below.
            if is_leaf(v) and not isinstance(v, _NUMBERS):
                out.append((path, v))
            else:
                _state_leaves(path, v, is_leaf, out)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _state_leaves(f"{prefix}.{i}", v, is_leaf, out)
    elif value is None:
        return
    elif is_leaf(value):
        out.append((prefix, value))
    else:
        out.append((prefix, Repr(repr(value).encode())))
