"""What goes into a run's header besides the protocol: the variables that decide
determinism ("env") and what changes kernels without changing the code ("config":
torch, CUDA, cuDNN and NCCL versions, GPU and driver, the determinism flags in
force), so that `dtrace diff` lists a library or driver change among the first
suspects. Also DTRACE_DETERMINISTIC applied to torch's flags. (The variables
themselves are every recorder's: dtrace.recording.DETERMINISM_VARIABLES.)"""
from __future__ import annotations

import subprocess
from typing import Any, Dict, Optional

import torch

def apply_deterministic(on: bool) -> None:
    """DTRACE_DETERMINISTIC: 1 deterministic algorithms, cuDNN deterministic, no
    cuDNN benchmark; 0 the opposite."""
    torch.use_deterministic_algorithms(on)
    torch.backends.cudnn.deterministic = on
    torch.backends.cudnn.benchmark = not on


def _driver() -> Optional[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def config(extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    c: Dict[str, Any] = {"framework": "pytorch", "torch": torch.__version__,
                         "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
                         "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
                         "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                         "num_threads": torch.get_num_threads()}
    if hasattr(torch.backends.cuda, "matmul"):
        c["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
    c["tf32_cudnn"] = bool(getattr(torch.backends.cudnn, "allow_tf32", False))
    if torch.version.cuda:
        c["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        c["cudnn"] = torch.backends.cudnn.version()
        c["gpu"] = torch.cuda.get_device_name()
        driver = _driver()
        if driver:
            c["driver"] = driver
        if hasattr(torch.cuda, "nccl"):
            try:
                v = torch.cuda.nccl.version()
                c["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
            except Exception:
                pass
    if extra:
        c.update(extra)
    return c
