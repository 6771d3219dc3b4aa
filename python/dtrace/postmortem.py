"""Post-mortem scripts in Python: run a dtrace command with --json, validate
its document against the installed schema, and return it typed
(dtrace.documents), with dtrace's exit status mapped as man/dtrace.1 EXIT
STATUS says: 0 and 1 are results (``Diff.diverged``, ``Bisect.named``,
``Check.certified``), 2 raises CommandError carrying dtrace's message.

``read`` types a document saved earlier, as they type theirs.

Which dtrace runs: the ``dtrace`` argument, else the DTRACE environment
variable, else the binary this package was installed (or built) with, else
``dtrace`` on PATH.

    from dtrace import postmortem
    d = postmortem.diff("nightly/a", "nightly/b")
    if d.diverged:
        b = postmortem.bisect(d.runs.a, d.runs.b, step=d.first.step, rank=d.first.rank, trust=True)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Optional, Union

from . import documents, schemas
from .documents import Bisect, Check, Diff, Show  # the types the helpers return
from .errors import CommandError, DocumentError

try:
    from . import _paths  # written by meson (build tree or install)
except ImportError:
    _paths = None

Path = Union[str, "os.PathLike[str]"]
Steps = Union[str, tuple[int, int]]

# man/dtrace.1 EXIT STATUS: the statuses each command ends with when it printed
# a document, and the verdicts that go with each (None: any). A verdict this
# table does not know (a later minor version's) is taken as its status says.
_VERDICTS: dict[str, dict[int, Optional[set[str]]]] = {
    "diff": {0: {"identical"}, 1: {"diverged"}},
    "bisect": {0: {"named", "restore", "data", "generator"},
               1: {"not-reproduced", "not-localized", "diverged-earlier", "fast-forward"}},
    "check": {0: {"certified"}, 1: {"violations"}},
    "show": {0: None},
}


def find_dtrace(dtrace: Optional[Path] = None) -> str:
    """The dtrace binary to run: ``dtrace``, else $DTRACE, else the one this
    package goes with, else ``dtrace`` on PATH."""
    if dtrace is not None:
        return os.fspath(dtrace)
    if os.environ.get("DTRACE"):
        return os.environ["DTRACE"]
    if _paths is not None and os.access(_paths.DTRACE, os.X_OK):
        return _paths.DTRACE
    found = shutil.which("dtrace")
    if found:
        return found
    raise CommandError("no dtrace binary: pass dtrace=PATH, set DTRACE, or install dtrace", [], None)


def diff(run_a: Path, run_b: Path, *, steps: Optional[Steps] = None, stream: bool = False,
         html: Optional[Path] = None, dtrace: Optional[Path] = None, cwd: Optional[Path] = None) -> Diff:
    """``dtrace diff --json RUN_A RUN_B``: ``diverged`` (exit 1) or not (exit 0)."""
    args = [os.fspath(run_a), os.fspath(run_b)]
    args += _steps(steps) + (["--stream"] if stream else []) + _path_option("--html", html)
    return _report("diff", args, dtrace, cwd)


def bisect(run_a: Optional[Path] = None, run_b: Optional[Path] = None, *, step: Optional[int] = None,
           rank: Optional[int] = None, trust: bool = False, replay: Optional[str] = None,
           repeat: Optional[int] = None, timeout: Optional[float] = None, launches: bool = False,
           keep: Optional[Path] = None, html: Optional[Path] = None, dtrace: Optional[Path] = None,
           cwd: Optional[Path] = None) -> Bisect:
    """``dtrace bisect --json``: ``named`` (exit 0) or not (exit 1). Without
    runs, the last diff's in ``cwd`` (./.dtrace/last-diff.json). ``trust``
    runs the replay command the logs name, ``replay`` gives one (dtrace(1),
    bisect, Safety); ``timeout`` is each replay's, in seconds."""
    if (run_a is None) != (run_b is None):
        raise ValueError("bisect: give both runs or neither (the last diff's)")
    args = [os.fspath(run_a), os.fspath(run_b)] if run_a is not None and run_b is not None else []
    args += _int_option("--step", step) + _int_option("--rank", rank) + _int_option("--repeat", repeat)
    args += ["--timeout", _number(timeout)] if timeout is not None else []
    args += ["--trust"] if trust else []
    args += ["--replay", replay] if replay is not None else []
    args += ["--launches"] if launches else []
    args += _path_option("--keep", keep) + _path_option("--html", html)
    return _report("bisect", args, dtrace, cwd)


def check(run: Path, *, dtrace: Optional[Path] = None, cwd: Optional[Path] = None) -> Check:
    """``dtrace check --json RUN``: ``certified`` (exit 0) or not (exit 1)."""
    return _report("check", [os.fspath(run)], dtrace, cwd)


def show(run: Path, *, step: Optional[int] = None, steps: Optional[Steps] = None, rank: Optional[int] = None,
         dtrace: Optional[Path] = None, cwd: Optional[Path] = None) -> Show:
    """``dtrace show --json RUN``: what the run holds, and with ``step``,
    ``steps`` or ``rank`` the records selected."""
    args = [os.fspath(run)] + _int_option("--step", step) + _steps(steps) + _int_option("--rank", rank)
    return _report("show", args, dtrace, cwd)


def read(source: Union[Path, dict[str, Any]], *, exit_status: Optional[int] = None) -> Any:
    """A document saved from ``dtrace diff|bisect|check|show --json`` (a file,
    or its parsed JSON), typed as the helpers return it: ``Diff``, ``Bisect``,
    ``Check`` or ``Show`` by the schema it names. ``exit_status`` is the status
    the command exited with, when it was saved; else the one dtrace(1) gives
    the verdict (a verdict this package does not know, from a later minor
    version, needs it). ``argv`` is empty; validated against the package's
    schema. A file that cannot be opened raises OSError."""
    where = "the document"
    if not isinstance(source, dict):
        where = os.fspath(source)
        with open(where, "rb") as f:
            try:
                source = json.load(f)
            except ValueError as e:
                raise DocumentError(f"{where}: not a JSON document ({e})") from e
    name = source.get("schema") if isinstance(source, dict) else None
    command = name[len("dtrace-"):] if isinstance(name, str) and name.startswith("dtrace-") else None
    if command not in _CLASSES:
        raise DocumentError(f"{where}: names schema {name!r}; this package reads "
                            + ", ".join(f"dtrace-{c}" for c in _CLASSES))
    verdicts = _VERDICTS[command]
    if exit_status is None:
        verdict = source.get("verdict")
        exit_status = 0 if verdicts == {0: None} else next(
            (status for status, known in verdicts.items() if known and verdict in known), None)
        if exit_status is None:
            raise DocumentError(f"{where}: verdict {verdict!r} is not one this package knows the exit status "
                                f"of (a later version's?): pass exit_status")
    elif exit_status not in verdicts:
        raise ValueError(f"exit_status {exit_status}: dtrace {command} prints a document only with "
                         + " or ".join(map(str, verdicts)))
    return _typed(command, source, exit_status, [], "", None, where)


_CLASSES = {"diff": Diff, "bisect": Bisect, "check": Check, "show": Show}


def _report(command: str, args: list[str], dtrace: Optional[Path], cwd: Optional[Path]) -> Any:
    binary = find_dtrace(dtrace)
    argv = [binary, command, *args, "--json"]
    status, stdout, stderr = _execute(argv, cwd)
    if status not in _VERDICTS[command]:
        raise CommandError(_trouble(binary, status, stderr), argv, status, stderr)
    try:
        document = json.loads(stdout)
    except ValueError as e:
        raise DocumentError(f"{' '.join(argv)}: exited {status} and printed no JSON document ({e})", argv) from e
    return _typed(command, document, status, argv, stderr, binary, " ".join(argv))


def _typed(command: str, document: Any, status: int, argv: list[str], stderr: str, binary: Optional[str],
           where: str) -> Any:
    # The document checked (its schema's name and major version, the schema,
    # each field read, the verdict against the status) and typed. `where`
    # names it in errors: the command, or the file it was read from.
    name = f"dtrace-{command}"
    schemas.check_name(document, name, where, argv)
    validated = schemas.validate(document, name, binary, where, argv)
    try:
        report = documents.from_json(_CLASSES[command], document, exit_status=status, argv=argv, stderr=stderr,
                                     validated_against=validated)
    except DocumentError as e:
        raise DocumentError(f"{where}: {e.message}", argv) from e
    verdicts = _VERDICTS[command]
    allowed = verdicts[status]
    known = set().union(*(v for v in verdicts.values() if v))
    verdict = getattr(report, "verdict", None)
    if allowed is not None and verdict in known and verdict not in allowed:
        raise DocumentError(f"{where}: exited {status} with verdict {verdict!r}, "
                            f"which dtrace(1) gives exit status {_status_of(verdicts, verdict)}", argv)
    return report


def _execute(argv: list[str], cwd: Optional[Path]) -> tuple[int, bytes, str]:
    # dtrace's status, stdout and stderr. Not subprocess.run: interrupted (a
    # notebook's interrupt signals the kernel alone, not dtrace), run() sends
    # SIGKILL, which dtrace cannot catch, and bisect's replay would outlive it.
    # SIGTERM makes dtrace end its replays and exit (dtrace(1)), and it is
    # waited for, a while, before the interruption goes on.
    try:
        process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
    except OSError as e:
        raise CommandError(f"cannot run {argv[0]}: {e.strerror or e}", argv, None) from e
    with process:
        try:
            stdout, stderr = process.communicate()
        except BaseException:
            process.terminate()
            try:
                process.communicate(timeout=_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
            raise
    return process.returncode, stdout, stderr.decode("utf-8", errors="replace")


# How long an interrupted dtrace may take to end its replays before it is killed.
_STOP_SECONDS = 30


def _trouble(binary: str, status: int, stderr: str) -> str:
    # dtrace's own message: from its first 'dtrace: error:' line on (a crashed
    # replay's stderr tail follows it), else what ended it.
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("dtrace: error:"):
            return "\n".join(lines[i:]).rstrip()
    if status < 0:
        return f"{binary} was killed by signal {-status}"
    tail = [line for line in lines if line.strip()][-1:]
    return f"{binary} exited {status}" + (f": {tail[0]}" if tail else "")


def _status_of(verdicts: dict[int, Optional[set[str]]], verdict: str) -> int:
    return next(status for status, known in verdicts.items() if known and verdict in known)


def _steps(steps: Optional[Steps]) -> list[str]:
    if steps is None:
        return []
    if isinstance(steps, tuple):
        return ["--steps", f"{int(steps[0])}-{int(steps[1])}"]
    return ["--steps", str(steps)]


def _int_option(flag: str, value: Optional[int]) -> list[str]:
    return [flag, str(int(value))] if value is not None else []


def _path_option(flag: str, value: Optional[Path]) -> list[str]:
    return [flag, os.fspath(value)] if value is not None else []


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
