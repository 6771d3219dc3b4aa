"""The errors the dtrace package raises: one base class, so a script can catch
everything dtrace says went wrong in one place. dtrace_torch raises the same
classes (its DtraceError is Error)."""


class Error(Exception):
    """Anything the dtrace package reports as failed."""


class CommandError(Error):
    """dtrace reported trouble (exit status 2: unreadable or malformed input,
    runs that cannot be compared, a replay that could not start or crashed, a
    usage error), or could not be run at all, or ended otherwise than dtrace(1)'s
    EXIT STATUS allows.

    ``message`` is dtrace's own error line (``dtrace: error: FILE:LINE: ...``)
    when it printed one, else what went wrong; ``argv`` the command,
    ``exit_status`` its status (None when it could not start; negative when a
    signal ended it, as ``subprocess`` reports it), ``stderr`` all it printed
    there."""

    def __init__(self, message: str, argv: list[str], exit_status: int | None, stderr: str = ""):
        super().__init__(message)
        self.message = message
        self.argv = argv
        self.exit_status = exit_status
        self.stderr = stderr


class DocumentError(Error):
    """dtrace's --json document does not follow its contract: not JSON, another
    schema or major version than the one asked for, not valid against the
    installed JSON Schema, a field missing or of the wrong type, or a verdict
    that contradicts the exit status. ``argv`` is the command that printed it."""

    def __init__(self, message: str, argv: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.argv = argv or []


class LibraryNotFound(Error):
    """libdtrace (the C API dtrace.capi binds) could not be loaded."""


class RecorderError(Error):
    """libdtrace refused a request: a run directory that exists, a bad DTRACE_*
    variable, an unwritable file, a record it cannot take. The message is
    libdtrace's own."""


class CudaUnavailable(RecorderError):
    """A device fingerprint was asked of a libdtrace built without its device code."""


class CheckpointError(Error):
    """A checkpoint is missing, unreadable, or was written for other state."""


class CaptureError(Error):
    """Captured inputs (DTRACE_INPUTS) are missing or do not fit what the
    program isolates."""
