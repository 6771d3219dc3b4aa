"""The --json documents of dtrace diff, bisect, check and show as dataclasses.

Each class follows one object of a JSON Schema in share/dtrace/ (man/dtrace.1,
JSON OUTPUT), field for field and with the schema's names, so the schema is the
reference for what a field means. Forward compatibility, as the schemas ask of
a reader: a later minor version only adds fields (and, for bisect and check,
verdicts and kinds), so enumerations are plain strings, fields the schema marks
"since 1.x" default to None or empty (an older dtrace's document still reads),
and every object keeps the keys this package does not know in ``extra``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

from .errors import DocumentError


def _extra() -> Any:
    # The keys of the JSON object that no field of the class names.
    return field(default_factory=dict, repr=False)


def _run(default: Any = None, factory: Any = dataclasses.MISSING, shown: bool = True) -> Any:
    # A field set from the command's run, not read from the document.
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata={"run": True}, repr=shown)
    return field(default=default, metadata={"run": True}, repr=shown)


# --- shared --------------------------------------------------------------------

@dataclass(kw_only=True)
class Runs:
    a: str
    b: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Report:
    """What every top-level document has, and how its command ended.

    ``exit_status`` is dtrace's (0 or 1, man/dtrace.1 EXIT STATUS; 2 raises
    ``CommandError`` instead), ``argv`` the command, ``stderr`` what it printed
    there (bisect's progress), ``validated_against`` the schema file the
    document was validated against with jsonschema, or None when it was not
    (jsonschema not importable, or no schema file found): then only the fields
    read here were checked, for presence and type."""
    schema: str
    schema_version: str
    exit_status: int = _run(0)
    argv: list[str] = _run(factory=list)
    stderr: str = _run("", shown=False)
    validated_against: Optional[str] = _run(None)
    extra: dict[str, Any] = _extra()


# --- dtrace diff (dtrace-diff-1.schema.json) -----------------------------------

@dataclass(kw_only=True)
class Record:
    """A record as read from the log (dtrace-fp(5)); its own fields."""
    step: Optional[int] = None
    rank: Optional[int] = None
    seq: Optional[int] = None
    scope: Optional[str] = None
    op: Optional[str] = None
    io: Optional[str] = None
    name: Optional[str] = None
    dtype: Optional[str] = None
    shape: Optional[list[int]] = None
    hash: Optional[str] = None
    bits: Optional[str] = None
    value: Optional[float] = None
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class GeneratorRecord:
    """A generator's state record that explains a mismatch (since diff schema
    1.1): op ``rng`` (``step rng numpy``), or an ``in`` record named ``rng`` or
    ``rng.<which>``."""
    scope: str
    op: str
    io: str
    name: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Mismatch:
    """A first mismatch: kind "value" or "structure", role "origin",
    "receiver" or "unknown"; ``a`` or ``b`` None when only the other run has
    the record; ``generator`` the generator whose state differs there (role
    "unknown", or "receiver" for an output whose op's input differs: not
    seeded alike, or not saved and restored), else None."""
    step: int
    rank: int
    seq: int
    scope: str
    op: str
    io: str
    name: str
    occurrence: int
    kind: str
    role: str
    detail: str
    a: Optional[Record]
    b: Optional[Record]
    a_location: Optional[str]
    b_location: Optional[str]
    ulp: Optional[int] = None
    generator: Optional[GeneratorRecord] = None
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Compared:
    steps: list[int]
    step_count: int
    ranks: int
    records: int
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class HeaderDifference:
    section: str
    key: str
    a: Any
    b: Any
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class EnvFlag:
    run: str
    key: str
    value: str
    reason: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Diff(Report):
    """``dtrace diff --json``: verdict "identical" or "diverged"."""
    verdict: str
    runs: Runs
    first: Optional[Mismatch]
    ranks: list[Mismatch]
    compared: Compared
    notes: list[str]
    header_differences: list[HeaderDifference]
    env_flags: list[EnvFlag]

    @property
    def diverged(self) -> bool:
        """Exit status 1: the runs diverged over the compared steps."""
        return self.exit_status == 1


# --- dtrace bisect (dtrace-bisect-1.schema.json) -------------------------------

@dataclass(kw_only=True)
class Region:
    """The compiled region a named op lies in (since schema 1.7), as the
    workload declared it: its scope, kind ("torch.compile"), and the part of it
    the op ran in ("eager", "inductor"; None for an op recorded in the region's
    own scope)."""
    scope: str
    kind: str
    part: Optional[str] = None
    part_means: Optional[str] = None
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Culprit:
    """A named op; basis "confirmed", "layer-repetitions" or "step-replays". In
    ``Bisect.culprits`` (since schema 1.6) each also has its layer, evidence,
    reached, the replays that found it ([first, end) into ``Bisect.replays``),
    the ops pinned while it was searched for ("scope op") and its notes."""
    op: str
    scope: str
    step: int
    rank: int
    role: str
    occurrence: int
    calls: int
    basis: str
    layer: Optional[str] = None
    region: Optional[Region] = None
    evidence: Optional[Evidence] = None
    reached: Optional[str] = None
    replays: list[int] = field(default_factory=list)
    pinned: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Search:
    """What ended the culprit search (since schema 1.6): stop "agree", "first",
    "max-culprits", "no-pins" or "not-localized", and ``end`` in words."""
    stop: str
    end: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class UlpBucket:
    ulp_min: int
    ulp_max: int
    elements: int
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class RepetitionOutput:
    side: str
    repetition: int
    fingerprint: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Evidence:
    """What the confirmation measured on the named op's output."""
    output: str
    dtype: str
    repetitions_per_side: int
    distinct_outputs: int
    elements: int
    elements_differing: int
    max_abs_difference: Optional[float]
    max_ulp: Optional[int]
    nan: list[int]
    inf: list[int]
    reading: str
    magnitude: Optional[str] = None
    output_magnitude: Optional[float] = None
    input_magnitude: Optional[float] = None
    ulp_histogram: list[UlpBucket] = field(default_factory=list)
    ulp_undefined: Optional[int] = None
    outputs: list[RepetitionOutput] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    kernels_device: Optional[str] = None
    kernels_source: Optional[str] = None
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class InputRecord:
    """Verdict data: what the step consumed where it first differs."""
    scope: str
    op: str
    name: str
    occurrence: int
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class GeneratorDifference:
    """Verdict generator (since bisect schema 1.4): the generator whose state
    differs where the step first differs; ``first_step`` True when the step is
    where both runs begin (nothing was restored: it was not seeded alike)."""
    scope: str
    op: str
    io: str
    name: str
    first_step: bool
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Earlier:
    step: int
    rank: int
    record: str
    command: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Departed:
    step: int
    rank: int
    side: str
    record: str
    command: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Outcomes:
    replays: int
    like_a: int
    like_b: int
    neither: int
    attempts: int
    budget: int
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Replay:
    """One replay; ``via`` "launch" or "request", ``launch`` the index into
    ``Bisect.launches`` that served it (both since schema 1.3)."""
    stage: str
    side: str
    argv: list[str]
    env: dict[str, str]
    seconds: float
    exit: int
    outcome: str
    via: Optional[str] = None
    launch: Optional[int] = None
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Declined:
    """A request that a replay session declined, launched instead (since
    schema 1.5): ``session`` the index into ``Bisect.launches`` of the session,
    ``request`` the request's number in it, ``reason`` the workload's."""
    session: int
    request: int
    reason: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Launch:
    """A start of the workload: one per replay, or a replay session that
    served several (since schema 1.3). ``declined``: a launch of a request its
    session declined (since 1.5), else None."""
    side: str
    stage: str
    session: bool
    argv: list[str]
    env: dict[str, str]
    requests: int
    seconds: float
    outcome: str
    why: str
    declined: Optional[Declined] = None
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Bisect(Report):
    """``dtrace bisect --json``: verdict "named", "restore", "data", "generator" (exit 0),
    "not-reproduced", "not-localized", "diverged-earlier", "fast-forward"
    (exit 1), or one a later minor version adds."""
    verdict: str
    runs: Runs
    step: int
    rank: int
    ranks_replayed: list[int]
    shared_configuration: bool
    layer: Optional[str]
    culprit: Optional[Culprit]
    state: Optional[str]
    state_scope: Optional[str]
    state_op: Optional[str] = None
    input: Optional[InputRecord] = None
    generator: Optional[GeneratorDifference] = None
    evidence: Optional[Evidence]
    earlier: Optional[Earlier]
    departed: Optional[Departed] = None
    outcomes: Optional[Outcomes]
    reached: str
    replays: list[Replay]
    replay_seconds: float
    notes: list[str]
    launches: list[Launch] = field(default_factory=list)
    replay_mode: Optional[str] = None
    replay_mode_why: Optional[str] = None
    culprits: list[Culprit] = field(default_factory=list)
    search: Optional[Search] = None

    @property
    def named(self) -> bool:
        """Exit status 0: a kernel, the restore, the data or a generator named."""
        return self.exit_status == 0


# --- dtrace check (dtrace-check-1.schema.json) ---------------------------------

@dataclass(kw_only=True)
class Violation:
    kind: str
    rank: Optional[int]
    step: Optional[int]
    location: Optional[str]
    message: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Check(Report):
    """``dtrace check --json``: verdict "certified" or "violations"."""
    verdict: str
    run: str
    files: list[str]
    world_size: int
    hash: str
    ranks: int
    steps: str
    step_range: Optional[list[int]]
    step_count: int
    records: int
    violations: list[Violation]
    violation_counts: dict[str, int]
    violation_total: int
    unlisted: int
    notes: list[str]

    @property
    def certified(self) -> bool:
        """Exit status 0: the run is whole and well-formed."""
        return self.exit_status == 0


# --- dtrace show (dtrace-show-1.schema.json) -----------------------------------

@dataclass(kw_only=True)
class ShowHeader:
    format: str
    run: str
    world_size: int
    hash: str
    level: str
    env: dict[str, Any]
    config: Any
    replay: Optional[dict[str, Any]]
    file: str
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class UnfinishedStep:
    step: int
    status: str
    declared_count: Optional[int]
    records: int
    location: Optional[str]
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class RankSummary:
    rank: int
    steps: str
    step_count: int
    complete_steps: str
    records: int
    unfinished: list[UnfinishedStep]
    unfinished_count: int
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Selection:
    step: Optional[int]
    rank: Optional[int]
    steps: Optional[list[int]] = None
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class SelectedRecord:
    step: int
    rank: int
    seq: int
    scope: str
    op: str
    io: str
    name: str
    location: str
    dtype: Optional[str] = None
    shape: Optional[list[int]] = None
    hash: Optional[str] = None
    bits: Optional[str] = None
    value: Optional[float] = None
    step_status: Optional[str] = None
    extra: dict[str, Any] = _extra()


@dataclass(kw_only=True)
class Show(Report):
    """``dtrace show --json``: what a run holds; ``selection`` and
    ``selected`` with a step, steps or rank asked for."""
    run: str
    files: list[str]
    header: ShowHeader
    world_size: int
    ranks_present: int
    ranks_absent: str
    steps: str
    step_range: Optional[list[int]]
    records: int
    complete: bool
    ranks: list[RankSummary]
    notes: list[str]
    selection: Optional[Selection] = None
    selected: list[SelectedRecord] = field(default_factory=list)


# --- reading a document --------------------------------------------------------

def from_json(cls: type, value: Any, **run: Any) -> Any:
    """``value`` (parsed JSON) as an instance of the dataclass ``cls``, every
    field converted by its type hint; ``run`` sets the fields that come from
    the command's run (``Report``'s). Raises DocumentError naming the field
    (``first.step``) that is missing or of the wrong type."""
    return _convert(cls, value, "", run)


def _where(path: str) -> str:
    return path or "the document"


def _convert(hint: Any, value: Any, path: str, run: dict[str, Any]) -> Any:
    if hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        if len(options) != 1:
            raise TypeError(f"{hint}: only Optional[X] is read")
        return _convert(options[0], value, path, run)
    if origin is list:
        if not isinstance(value, list):
            raise DocumentError(f"{_where(path)}: expected an array, got {_json_type(value)}")
        (item,) = typing.get_args(hint)
        return [_convert(item, v, f"{path}[{i}]", {}) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise DocumentError(f"{_where(path)}: expected an object, got {_json_type(value)}")
        _, item = typing.get_args(hint)
        return {k: _convert(item, v, f"{path}.{k}", {}) for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _object(hint, value, path, run)
    return _scalar(hint, value, path)


def _object(cls: type, value: Any, path: str, run: dict[str, Any]) -> Any:
    if not isinstance(value, dict):
        raise DocumentError(f"{_where(path)}: expected an object, got {_json_type(value)}")
    hints = _hints(cls)
    known: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        if f.metadata.get("run"):
            if f.name in run:
                known[f.name] = run[f.name]
            continue
        inner = f"{path}.{f.name}" if path else f.name
        if f.name in value:
            known[f.name] = _convert(hints[f.name], value[f.name], inner, {})
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise DocumentError(f"{inner}: missing")
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**known, extra={k: v for k, v in value.items() if k not in names or k == "extra"})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    # Resolved once per class: a bisect document holds a Replay per replay.
    return typing.get_type_hints(cls)


def _scalar(hint: Any, value: Any, path: str) -> Any:
    # JSON's number is int or float in Python; bool is an int there but not in JSON.
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint in (str, bool) and isinstance(value, hint):
        return value
    if hint in (int, float, str, bool):
        raise DocumentError(f"{_where(path)}: expected {_JSON_NAMES[hint]}, got {_json_type(value)}")
    raise TypeError(f"{path}: cannot read a field of type {hint}")


_JSON_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "a boolean"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    for t in (int, float, str):
        if isinstance(value, t):
            return _JSON_NAMES[t]
    return "an array" if isinstance(value, list) else "an object"
