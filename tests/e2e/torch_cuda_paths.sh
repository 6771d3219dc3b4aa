#!/usr/bin/env bash
# The CUDA paths of dtrace_torch, checked on the CPU: CUDA tensors go to
# libdtrace's device entry point (dtrace_fingerprint_device_batch), one call per
# device, on the device's current stream, with each tensor's device pointer and
# byte count, and their digests land at the right places; a CPU-only libdtrace
# answers CudaUnavailable (its own error) and the caller falls back to the host;
# the profiler's device kernels (CUDA events, and the kernels CPU events
# launched) are what the confirm evidence lists, the op itself left out. Fakes
# stand for the GPU (torch.cuda's device and stream, tensors, profiler events);
# the last check calls the real CPU-only libdtrace.
. "$(dirname "$0")/torch-lib.sh"
"$PYTHON" - <<'PY' || fail "dtrace_torch's CUDA paths"
import contextlib, types
import torch
import dtrace.capi as lib
from dtrace.arrays import ArrayView
from dtrace_torch import kernels
from dtrace_torch.records import Sink

current = {"device": None}
@contextlib.contextmanager
def device(index):
    current["device"] = index
    yield
torch.cuda.device = device

calls = []
real_batch = lib.fingerprint_device_batch
def batch(addresses, sizes, stream):
    calls.append((list(addresses), list(sizes), stream, current["device"]))
    return [a * 7 for a in addresses]
lib.fingerprint_device_batch = batch

def cuda(device, ptr, n):  # a CUDA tensor's view: device, its current stream
    return ArrayView("f32", (n,), ptr, 4 * n, device, 1000 + device, None)

host = torch.arange(4, dtype=torch.float32)
sink = Sink(None)
views = [cuda(1, 100, 3), sink.view(host), cuda(0, 200, 5), cuda(1, 300, 2)]
assert views[1].device is None and views[1].address == host.data_ptr() and views[1].nbytes == 16, views[1]
digests = sink.device_digests(views)
assert digests == [700, None, 1400, 2100], digests
# One call per device, on that device's stream, with that device current.
assert sorted(calls) == sorted([([100, 300], [12, 8], 1001, 1), ([200], [20], 1000, 0)]), calls

def unavailable(addresses, sizes, stream):
    raise lib.CudaUnavailable("built without CUDA")
lib.fingerprint_device_batch = unavailable
assert sink.device_digests([cuda(0, 8, 1)]) == [None]
lib.fingerprint_device_batch = real_batch

# Profiler events as torch 1.13 and 2.x give them.
DT = torch.autograd.DeviceType
ev = lambda name, dt, kernels=(): types.SimpleNamespace(name=name, device_type=dt,
                                                        kernels=[types.SimpleNamespace(name=k) for k in kernels])
events = [ev("aten::index_add_", DT.CPU, ["void indexFuncLargeIndex<float>"]),
          ev("cudaLaunchKernel", DT.CPU),
          ev("void indexFuncLargeIndex<float>", DT.CUDA),
          ev("void at::native::vectorized_elementwise_kernel<4>", DT.CUDA)]
assert kernels.launched(events, "cuda", "aten.index_add_.default") == [
    "void indexFuncLargeIndex<float>", "void at::native::vectorized_elementwise_kernel<4>"]
assert kernels.launched(events, "cpu", "aten.index_add_.default") == []
assert kernels.profiler_name("dtrace_example.combine.default") == "dtrace_example::combine"
assert kernels.device_of([host]) == "cpu"

# The real libdtrace of this build without a device: a CPU-only one answers
# CudaUnavailable, one built with CUDA says there is no device.
# (Only without a device: with one, a host pointer is not what the call takes.)
try:
    if torch.cuda.is_available():
        raise SystemExit(0)
    lib.fingerprint_device_batch([host.data_ptr()], [16], 0)
    built_with_cuda = True
except lib.CudaUnavailable as e:
    built_with_cuda = False
    assert "CUDA" in str(e) or "cuda" in str(e), e
except lib.RecorderError as e:
    # A libdtrace built with CUDA on a machine without a device: its own
    # error, naming the missing device (no host fallback for device memory).
    built_with_cuda = True
    assert "no CUDA device" in str(e), e
print("with CUDA" if built_with_cuda else "CPU-only libdtrace: CudaUnavailable")
PY
echo ok
