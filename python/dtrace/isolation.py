"""DTRACE_ISOLATE for a program that re-runs its own layer or op: what the
request asks (scope, op, call, repetitions), the captured inputs to run it from,
and the repetitions to record (dtrace-fp(5), "Repetitions").

dtrace.Recorder hands an Isolation to the program's `isolate` function; the
program finds the layer or op by its scope, loads its inputs from the capture,
and runs it once per repetition inside the same scopes it recorded in:

    def isolate(iso):
        layer = model.layers[iso.scope]
        c = iso.find("x")                           # an in record of the captured call
        x = iso.read_into(np.empty(c.shape, c.numpy_dtype), "x")
        for k in iso.repetitions():
            with iso.recorder.scope("fwd"), iso.recorder.scope(layer.name):
                layer.forward(iso.recorder, x)

dtrace_torch re-runs modules and ATen ops itself (its isolation module) and
reads captures through find() as this does."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Tuple

from . import arrays, capi
from .errors import CaptureError

_IOS = {"in": capi.IO_IN, "out": capi.IO_OUT, "state": capi.IO_STATE}


@dataclass(frozen=True)
class Captured:
    """One captured record of this rank (capture.jsonl) and its bytes' file:
    its identity (scope, op, io: libdtrace's code, capi.IO_IN / IO_OUT /
    IO_STATE; occurrence: the call of (scope, op) it belongs to, 0 the first;
    name), dtype (dtrace-fp(5)'s name, numpy_dtype NumPy's), shape, the
    number of its bytes, the step and seq it was recorded at; index is its
    place in the capture (capi's captured_read)."""
    index: int
    scope: str
    op: str
    io: int
    occurrence: int
    name: str
    dtype: str
    shape: Tuple[int, ...]
    bytes: int
    step: int
    seq: int
    file: str

    @property
    def numpy_dtype(self) -> str:
        """NumPy's type string for `dtype` (``"<f4"`` for f32): an array of it,
        ``np.empty(c.shape, c.numpy_dtype)``, is what read_into fills.
        ValueError for bf16 and the float8s, which NumPy has no type for."""
        return arrays.numpy_dtype(self.dtype)


class Isolation:
    """The isolation this replay asks for. `scope` the layer (DTRACE_ISOLATE);
    `op` None for the whole layer, else the one op to re-run (scope::op);
    `occurrence` the call of the captured step to re-run (DTRACE_OCCURRENCE, 0
    unless set); `repeat` how many times (DTRACE_REPEAT, what repetitions()
    yields); `step` the captured step; `captured` every record of the capture
    of this rank (Captured), `inputs_dir` where it lies."""

    def __init__(self, recorder: Any):
        #: the Recorder the repetitions record through (iso.recorder.scope, .record)
        self.recorder = recorder
        self._rec = recorder
        native = recorder.native
        self.scope: str = native.isolate_scope()
        self.op: Optional[str] = native.isolate_op()
        occurrence = native.isolate_occurrence()
        self.occurrence: int = 0 if occurrence is None else occurrence
        self.repeat: int = native.repeat()
        self.inputs_dir: Optional[str] = native.inputs_dir()
        self.captured: List[Captured] = [Captured(**r) for r in native.captured()]
        if not self.captured:
            raise CaptureError(f"{self.inputs_dir}: the capture holds no record for rank {recorder.rank}")
        self.step: int = self.captured[0].step

    @property
    def layer_op(self) -> str:
        """The op of the isolated layer's own records: its scope's last part."""
        return self.scope.rsplit("/", 1)[-1]

    def find(self, name: str, *, scope: Optional[str] = None, op: Optional[str] = None, io: str = "in",
             occurrence: Optional[int] = None) -> Captured:
        """The captured record by identity; defaults: the isolated scope, the
        isolated op (or the layer's own op), io in, the requested call."""
        scope = self.scope if scope is None else scope
        op = (self.op or self.layer_op) if op is None else op
        occurrence = self.occurrence if occurrence is None else occurrence
        return self.captured[find(self._rec, scope, op, _IOS[io], name, occurrence)]

    def read(self, name: str, **identity: Any) -> bytes:
        """The captured record's bytes (for np.frombuffer, array.frombytes)."""
        return self._bytes(self.find(name, **identity))

    def _bytes(self, record: Captured) -> bytes:
        out = bytearray(record.bytes)
        if record.bytes:
            view = arrays.describe(out)
            self._rec.native.captured_read(record.index, view.address, record.bytes)
        return bytes(out)

    def read_into(self, target: Any, name: str, **identity: Any) -> Any:
        """Reads the captured record into `target`, a writable host array of
        the same dtype and shape, and returns `target` (so that
        ``x = iso.read_into(np.empty(...), "x")`` is the input); another dtype
        or shape is a CaptureError naming both."""
        record = self.find(name, **identity)
        view = arrays.describe(target)
        if (view.dtype, tuple(view.shape)) != (record.dtype, tuple(record.shape)):
            raise CaptureError(f"{record.file}: captured '{name}' of {record.scope} {record.op} is "
                               f"{record.dtype}{list(record.shape)}, the target is {view.dtype}{list(view.shape)}")
        try:
            arrays.read_into(target, self._bytes(record))
        except (TypeError, ValueError) as e:
            raise CaptureError(f"captured '{name}': {e}") from e
        return target

    def repetitions(self) -> Iterator[int]:
        """0 .. repeat-1, each recorded as its own step (libdtrace writes
        repetition k as step k), records on while the body runs."""
        native, sink = self._rec.native, self._rec.sink
        sink.active = True
        try:
            for k in range(self.repeat):
                native.begin_repetition(k)
                self._rec.current_step = k
                self._rec._step_begins()  # occurrences count from 0 again, as in a step
                self._rec._ask_pins()  # the pins apply to each repetition (DTRACE_PIN)
                yield k
                sink.set_scope(None)
            native.end_step()
        finally:
            sink.active = sink.pins = False
            self._rec.current_step = None



def call_text(occurrence: int) -> str:
    """", call K" for a call after the first of an op (occurrence K-1), as
    dtrace(1) writes a call in text (CALLS OF A REPEATED OP: counted from 1,
    the first call unnamed); "" for the first."""
    return f", call {occurrence + 1}" if occurrence > 0 else ""


def find(recorder: Any, scope: str, op: str, io: int, name: str, occurrence: int) -> int:
    """The index of this rank's captured record (scope, op, io, name,
    occurrence), or CaptureError naming the capture and the record: an input
    the capture lacks is named, never replaced (dtrace-fp(5), "What isolation
    needs"). dtrace_torch's loader finds its inputs through this too."""
    native = recorder.native
    index = native.captured_find(scope, op, io, name, occurrence)
    if index is None:
        kind = {v: k for k, v in _IOS.items()}.get(io, str(io))
        raise CaptureError(f"{native.inputs_dir()}: no captured {kind} record '{name}' of {scope} {op}"
                           f"{call_text(occurrence)} for rank {recorder.rank}")
    return index
