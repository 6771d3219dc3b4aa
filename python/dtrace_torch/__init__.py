"""dtrace_torch: record a PyTorch training job for dtrace, and answer dtrace's replays.

The whole protocol (log, replay request, captures, multi-process outputs) is
libdtrace's, reached through its C API with ctypes; this package holds only what is
PyTorch's own: module hooks, a TorchDispatchMode for ATen ops, checkpoints of torch,
RNG and data state, and isolation by re-running a module or an op. docs/torch.md
is the full reference."""
from .errors import CaptureError, CheckpointError, DtraceError, LibraryNotFound, RecorderError
from .recording import Recorder

__all__ = ["Recorder", "DtraceError", "LibraryNotFound", "RecorderError", "CheckpointError", "CaptureError"]
