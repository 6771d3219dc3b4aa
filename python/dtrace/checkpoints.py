"""Checkpoints: the state at the *start* of a step, in ``<dir>/step-<K><suffix>``,
written to a temporary file and renamed, so a crash never leaves half a
checkpoint (the rule minitrain's follow too).

The files, their names and the search for the newest at or before a step are
here, for every recorder; what a checkpoint holds is the recorder's: plain
state (this module's save/load: each state object's state_dict() and the host
generators, pickled) or dtrace_torch's (torch.save of the model, optimizer and
every generator). A checkpoint also holds its state's signature (array names,
dtypes, shapes), so restoring one written for other state is an error naming
the difference instead of a silent partial load.

State objects are what dtrace_torch takes too: anything with ``state_dict()``
and ``load_state_dict(d)``; a plain dict is its own state (load puts its keys
back)."""
from __future__ import annotations

import copy
import os
import pickle
import re
from typing import Any, Callable, Dict, IO, List, Mapping, Optional, Tuple

from . import arrays, generators
from .errors import CheckpointError
from .records import Repr, is_number, state_values

PLAIN_SUFFIX = ".pkl"
FORMAT = "dtrace-checkpoint/1"


def path_of(directory: str, step: int, suffix: str = PLAIN_SUFFIX) -> str:
    return os.path.join(directory, f"step-{step}{suffix}")


def steps_in(directory: str, suffix: str = PLAIN_SUFFIX) -> List[int]:
    """The steps that have a checkpoint in `directory`, in increasing order."""
    name = re.compile(r"^step-(\d+)" + re.escape(suffix) + "$")
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(name.match, names) if m)


def rank_directory(directory: str, rank: int) -> str:
    """Where rank `rank` of a job of several processes keeps its checkpoints:
    each rank's state is its own, so ranks never overwrite each other's."""
    return os.path.join(directory, f"rank{rank}")


def rank_directories(directory: str) -> List[str]:
    """The rank<r> subdirectories of `directory` (a job of several processes'
    checkpoints: the recorder gives each rank its own), by rank."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [n for n in names if re.fullmatch(r"rank\d+", n) and os.path.isdir(os.path.join(directory, n))]
    return sorted(found, key=lambda n: int(n[4:]))


def nearest(directory: str, step: int, suffix: str = PLAIN_SUFFIX) -> Optional[int]:
    """The newest checkpointed step at or before `step`, or None."""
    found = [k for k in steps_in(directory, suffix) if k <= step]
    return found[-1] if found else None


def write_atomically(path: str, write: Callable[[IO[bytes]], None]) -> str:
    """Writes `path` through a temporary file beside it, synced, then renamed."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = f"{path}.tmp.{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path


# ---- plain state ------------------------------------------------------------------

def state_dict_of(name: str, obj: Any) -> Any:
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
        return obj.state_dict()
    raise TypeError(f"state[{name!r}]: {type(obj).__name__} has no state_dict/load_state_dict (and is not a dict)")


def load_state_dict_into(obj: Any, value: Any) -> None:
    if isinstance(obj, dict):
        obj.clear()
        obj.update(value)
    else:
        obj.load_state_dict(value)


def signature(state: Mapping[str, Any]) -> List[Tuple[str, str, Tuple[int, ...]]]:
    """(path, dtype, shape) of every array in the state, numbers as their Python
    type, other values (their repr, records.Repr) as "repr" without a length."""
    out = []
    for name, obj in state.items():
        for path, leaf in state_values(name, state_dict_of(name, obj)):
            if is_number(leaf):
                out.append((path, type(leaf).__name__, ()))
            elif isinstance(leaf, Repr):
                out.append((path, "repr", ()))
            else:
                view = arrays.describe(leaf)
                out.append((path, view.dtype, tuple(view.shape)))
    return out


def payload(step: int, state: Mapping[str, Any]) -> Dict[str, Any]:
    """What a plain checkpoint holds: the one list of a step's state, for files
    and for the copy a replay session keeps (snapshot)."""
    return {"format": FORMAT, "step": step, "signature": signature(state),
            "state": {name: state_dict_of(name, obj) for name, obj in state.items()},
            "rng": generators.host_state()}


def apply(payload: Mapping[str, Any], where: str, state: Mapping[str, Any]) -> None:
    """Puts a payload back into the state objects (copies: the program may
    change what load_state_dict hands it in place)."""
    mine, theirs = signature(state), [(p, d, tuple(s)) for p, d, s in payload["signature"]]
    if mine != theirs:
        names_mine, names_theirs = {p for p, *_ in mine}, {p for p, *_ in theirs}
        changed = sorted(p for p, *a in mine for q, *b in theirs if p == q and a != b)
        raise CheckpointError(f"{where}: written for other state (missing {sorted(names_mine - names_theirs)[:5]}, "
                              f"unexpected {sorted(names_theirs - names_mine)[:5]}, dtype or shape changed {changed[:5]})")
    for name, obj in state.items():
        load_state_dict_into(obj, copy.deepcopy(payload["state"][name]))
    generators.set_host_state(payload["rng"])


def save(directory: str, step: int, state: Mapping[str, Any]) -> str:
    """Writes the plain state at the start of `step` atomically; returns the file."""
    data = payload(step, state)
    return write_atomically(path_of(directory, step), lambda f: pickle.dump(data, f, protocol=4))


def load(directory: str, step: int, state: Mapping[str, Any]) -> None:
    """Restores the plain state at the start of `step` from its checkpoint, or
    raises CheckpointError naming the file and what does not fit."""
    path = path_of(directory, step)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no checkpoint of step {step} (checkpoints in {directory}: "
                              f"{steps_in(directory) or 'none'})")
    try:
        with open(path, "rb") as f:
            data = pickle.load(f)  # written by this package for this program's run
    except Exception as e:  # a torn or foreign file: say which
        raise CheckpointError(f"{path}: not a readable checkpoint ({e})") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a dtrace checkpoint ({FORMAT})")
    apply(data, path, state)


def snapshot(step: int, state: Mapping[str, Any]) -> Dict[str, Any]:
    """The plain state at the start of `step`, copied in memory: a replay
    session starts each later step request from it (dtrace-fp(5), "Replay
    sessions") without reading the checkpoint again."""
    return copy.deepcopy(payload(step, state))


def restore_snapshot(data: Mapping[str, Any], state: Mapping[str, Any]) -> None:
    apply(data, "the replay session's copy", state)
