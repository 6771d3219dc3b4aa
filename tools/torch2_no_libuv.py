"""Debian 13's torch 2.6 without libuv, working: loaded at the start of every
python of the Debian 13 root that tools/setup-torch2.sh makes (a .pth file
there imports it), never on the host, never by dtrace_torch.

Debian builds python3-torch without libuv, while torch 2.4 on makes every
TCPStore ask for it by default: torchrun's rendezvous (c10d and static alike)
fails with "use_libuv was requested but PyTorch was build without libuv
support", and USE_LIBUV=0 reaches only init_process_group's env:// store. So
here USE_LIBUV defaults to 0 and TCPStore to use_libuv=False, as the build can
only honour; a caller that asks for libuv still gets the error. Done while torch.distributed
is first imported (torch imports it), before anything else binds TCPStore; no
cost to a python that never imports torch.
"""
import importlib.abc
import os
import sys

os.environ.setdefault("USE_LIBUV", "0")  # init_process_group's env:// store


class _PatchTCPStore(importlib.abc.MetaPathFinder):
    # torch.distributed's __init__ makes torch._C._distributed_c10d and binds its
    # TCPStore, then imports its submodules: at the first of those both get the
    # subclass, before any submodule (rendezvous, elastic) binds it.
    def find_spec(self, name, path=None, target=None):
        c10d = sys.modules.get("torch._C._distributed_c10d")
        if not name.startswith("torch.distributed.") or c10d is None:
            return None
        sys.meta_path.remove(self)
        base = getattr(c10d, "TCPStore", None)
        if base is not None:
            class TCPStore(base):  # a subclass: isinstance and the C++ side see a TCPStore
                def __init__(self, *args, **kwargs):
                    kwargs.setdefault("use_libuv", False)
                    super().__init__(*args, **kwargs)
            TCPStore.__module__, TCPStore.__qualname__ = base.__module__, base.__qualname__
            c10d.TCPStore = TCPStore
            if getattr(sys.modules.get("torch.distributed"), "TCPStore", None) is base:
                sys.modules["torch.distributed"].TCPStore = TCPStore
        return None  # the ordinary finders import the module


sys.meta_path.insert(0, _PatchTCPStore())
