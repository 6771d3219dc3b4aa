"""The exceptions dtrace_torch raises, each naming its cause: the dtrace
package's (dtrace.errors), under the names dtrace_torch has always had."""
from dtrace.errors import CaptureError, CheckpointError, LibraryNotFound, RecorderError
from dtrace.errors import Error as DtraceError

__all__ = ["DtraceError", "LibraryNotFound", "RecorderError", "CheckpointError", "CaptureError"]
