"""dtrace for Python programs (docs/python.md).

One module per concern:

- ``dtrace.recording``: the Recorder a training loop in any Python program
  (NumPy, JAX, CuPy, plain Python) records through and answers dtrace's
  replays with; ``dtrace.isolation``: re-running a layer or op alone;
  ``dtrace.checkpoints``, ``dtrace.generators``: the state a step starts from;
  ``dtrace.records`` and ``dtrace.arrays``: values as libdtrace's records;
  ``dtrace.capi``: libdtrace's C API through ctypes (dtrace_torch is built on
  all of these);
- ``dtrace.postmortem``: run ``dtrace diff``, ``bisect``, ``check`` and ``show``
  with ``--json`` and get typed results (post-mortem scripts, CI jobs, notebooks);
- ``dtrace.documents``: those results, dataclasses whose fields follow the JSON
  Schemas in share/dtrace/;
- ``dtrace.schemas``: finding the installed schema and validating a document;
- ``dtrace.errors``: what the package raises.

Importing the package does nothing else: no binary or library is looked for
and nothing runs until a function is called.
"""

from .errors import (CaptureError, CheckpointError, CommandError, CudaUnavailable, DocumentError, Error,
                     LibraryNotFound, RecorderError)
from .isolation import Captured, Isolation
from .recording import Recorder

__all__ = ["Recorder", "Isolation", "Captured", "Error", "CommandError", "DocumentError", "RecorderError",
           "LibraryNotFound", "CudaUnavailable", "CheckpointError", "CaptureError"]
