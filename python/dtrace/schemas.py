"""Which JSON Schema a dtrace document follows, and checking it against the
installed one (man/dtrace.1, JSON OUTPUT: prefix/share/dtrace/NAME-1.schema.json).

The schema looked for first is the one installed beside the dtrace binary that
printed the document (BINDIR/../share/dtrace/), which knows that binary's
verdicts and fields, then the one this package was built with. Validation uses
jsonschema when it can be imported (Debian: python3-jsonschema) and has the
2020-12 draft; without it, or without a schema file, the document is not
validated as a whole, and documents.from_json still checks every field it reads
for presence and type.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Optional

from .errors import DocumentError

try:
    from . import _paths  # written by meson (build tree or install)
except ImportError:
    _paths = None

MAJOR = 1


def check_name(document: Any, name: str, where: str, argv: list[str]) -> None:
    """The document is a JSON object naming schema ``name`` (dtrace-diff, ...)
    at major version 1, the one this package reads. ``where`` names the
    document in the error (the command, or its file), ``argv`` the command."""
    if not isinstance(document, dict):
        raise DocumentError(f"{where}: JSON, but not an object", argv)
    got, version = document.get("schema"), document.get("schema_version")
    if got != name or not isinstance(version, str) or version.split(".")[0] != str(MAJOR):
        raise DocumentError(f"{where}: the document names schema {got!r} version {version!r}; "
                            f"this package reads {name} {MAJOR}.x", argv)


def schema_file(name: str, binary: Optional[str]) -> Optional[str]:
    """The schema file for ``name``: beside ``binary``'s installation, else the
    one this package was built with; None when neither exists."""
    places = []
    found = shutil.which(binary) if binary else None
    if found:
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(found)))
        places.append(os.path.join(prefix, "share", "dtrace"))
    if _paths is not None:
        places.append(_paths.SCHEMAS)
    for place in places:
        path = os.path.join(place, f"{name}-{MAJOR}.schema.json")
        if os.path.isfile(path):
            return path
    return None


def validate(document: Any, name: str, binary: Optional[str], where: str, argv: list[str]) -> Optional[str]:
    """Validates the document against schema ``name``'s file (beside
    ``binary``, the dtrace that printed it, when known); returns that file, or
    None when it could not validate (no jsonschema, no file). Raises
    DocumentError listing what does not hold."""
    try:
        import jsonschema
    except ImportError:
        return None
    validator = getattr(jsonschema, "Draft202012Validator", None)
    path = schema_file(name, binary)
    if validator is None or path is None:
        return None
    with open(path, encoding="utf-8") as f:
        schema = json.load(f)
    errors = sorted(validator(schema).iter_errors(document), key=lambda e: [str(p) for p in e.path])
    if errors:
        lines = [f"{'/'.join(map(str, e.path)) or '(document)'}: {e.message[:300]}" for e in errors[:5]]
        raise DocumentError(f"{where}: the document does not follow {path}:\n  " + "\n  ".join(lines), argv)
    return path
