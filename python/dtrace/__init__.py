"""dtrace for Python programs (docs/python.md).

One module per concern:

- ``dtrace.postmortem``: run ``dtrace diff``, ``bisect``, ``check`` and ``show``
  with ``--json`` and get typed results (post-mortem scripts, CI jobs, notebooks);
- ``dtrace.documents``: those results, dataclasses whose fields follow the JSON
  Schemas in share/dtrace/;
- ``dtrace.schemas``: finding the installed schema and validating a document;
- ``dtrace.errors``: what the package raises.

Importing the package does nothing else: no binary is looked for and nothing
runs until a function is called.
"""

from .errors import CommandError, DocumentError, Error

__all__ = ["CommandError", "DocumentError", "Error"]
