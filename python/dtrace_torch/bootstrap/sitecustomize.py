"""dtrace record's way into every Python process of the command it records
(dtrace(1), RECORD): `dtrace record` puts this directory first on PYTHONPATH,
so Python imports this file at start-up, before the program.

It does two things and nothing else:
- runs the sitecustomize this one stands in front of (Debian's, a site's own),
  found further along sys.path, so a program behaves as it does without dtrace;
- under dtrace record (DTRACE_RECORD_REPLAY_ARGV set), waits for the program
  to import torch and then starts dtrace_torch.auto, which records it. A
  process that never imports torch (a launcher script, a data tool) is left
  alone, and torch is never imported here: that costs the program nothing
  until it imports torch itself."""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_next_sitecustomize() -> None:
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or os.path.abspath(spec.origin or "") == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


class _AfterTorch:
    """torch's own loader, then dtrace_torch.auto.install(). Anything else asked
    of it (get_source, resources) is the original loader's answer."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        from dtrace_torch import auto
        auto.install()


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Finds torch as the other finders do, once, and wraps its loader."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _AfterTorch(spec.loader)
        return spec


_run_next_sitecustomize()
if os.environ.get("DTRACE_RECORD_REPLAY_ARGV"):
    if "torch" in sys.modules:  # imported by the sitecustomize above
        from dtrace_torch import auto
        auto.install()
    else:
        sys.meta_path.insert(0, _TorchFinder())
