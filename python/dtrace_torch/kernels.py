"""What an isolated op ran beneath it, from torch.profiler: on CUDA the device
kernels it launched (the atomic kernel under aten.index_add_), on the CPU the
ATen ops it called. Written during an op's isolation while a capture is active
(bisect's confirm replay) to <capture>/kernels.rank<r>.json, which bisect lists
in its confirm evidence (dtrace-fp(5), dtrace(1)).

torch 1.13 and 2.x: the profiler's events are FunctionEvents with device_type
and, on CPU events, the device kernels they launched (`kernels`); both are read
with getattr, so a version lacking one still gives what the other holds."""
from __future__ import annotations

import contextlib
import json
import os
from typing import Iterable, List, Optional

import torch

from dtrace import checkpoints as files


def profiler_name(op: str) -> str:
    """aten::index_add_ for aten.index_add_.default: how the profiler names an op."""
    parts = op.split(".")
    return "::".join([parts[0], ".".join(parts[1:-1])]) if len(parts) >= 3 else op


def launched(events: Iterable, device: str, op: str) -> List[str]:
    """Names, in first-seen order without repeats, of what ran beneath `op`: for
    device "cuda" the device kernels, for "cpu" the CPU ops other than `op`
    itself and the profiler's own bookkeeping."""
    own = profiler_name(op)
    names: List[str] = []
    for e in events:
        kind = str(getattr(e, "device_type", "")).rsplit(".", 1)[-1].lower()
        if device == "cuda":
            found = [e.name] if kind == "cuda" else [k.name for k in getattr(e, "kernels", []) or []]
        else:
            found = [e.name] if kind == "cpu" else []
        for name in found:
            if name != own and not name.startswith(("ProfilerStep", "[memory]", "profiler::", "cuda")) \
                    and name not in names:
                names.append(name)
    return names


class KernelList:
    """Profiles the calls of one isolated op; write() saves what they ran."""

    def __init__(self, op: str, device: str):
        self.op, self.device = op, device
        self.names: List[str] = []

    @contextlib.contextmanager
    def profile(self):
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU]
        if self.device == "cuda":
            activities.append(ProfilerActivity.CUDA)
        with profile(activities=activities) as prof:
            yield
        if self.device == "cuda":
            torch.cuda.synchronize()
        for name in launched(prof.events(), self.device, self.op):
            if name not in self.names:
                self.names.append(name)

    def write(self, capture_dir: str, rank: int, scope: str, source: str = "torch.profiler") -> str:
        text = json.dumps({"scope": scope, "op": self.op, "device": self.device, "source": source,
                           "kernels": self.names}).encode()
        return files.write_atomically(os.path.join(capture_dir, f"kernels.rank{rank}.json"), lambda f: f.write(text))


def device_of(tensors: Iterable) -> str:
    return "cuda" if any(isinstance(t, torch.Tensor) and t.is_cuda for t in tensors) else "cpu"


def wanted(native) -> Optional[str]:
    """The capture directory when this op isolation should list its kernels."""
    return native.capture_dir() if native.isolate_op() else None


def profile_generated_kernels() -> None:
    """Inductor's generated kernels report to the profiler from here on, so
    that a compiled region's listing names them (graph_0_cpp_fused_..._0).
    Set before the region is compiled in this process; dynamo's compiled code
    is dropped when it was not, so the region is compiled again with it (a
    replay session's earlier requests, or steps run to reach the isolated
    one, compiled it as the job ran it). It adds the profiler's calls around
    each kernel and changes none of its arithmetic."""
    import torch._inductor.config
    if not torch._inductor.config.cpp.enable_kernel_profile:
        torch._inductor.config.cpp.enable_kernel_profile = True
        import torch._dynamo
        torch._dynamo.reset()
