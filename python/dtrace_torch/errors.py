"""The exceptions dtrace_torch raises, each naming its cause."""


class DtraceError(Exception):
    """Base of every dtrace_torch error."""


class LibraryNotFound(DtraceError):
    """libdtrace (the C API the package binds) could not be loaded."""


class RecorderError(DtraceError):
    """libdtrace refused a request: a run directory that exists, a bad DTRACE_* variable,
    an unwritable file. The message is libdtrace's own."""


class CheckpointError(DtraceError):
    """A checkpoint is missing, unreadable, or was written for another model."""


class CaptureError(DtraceError):
    """Captured inputs (DTRACE_INPUTS) are missing or do not fit the module or op to isolate."""
