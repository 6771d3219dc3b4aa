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
import dtrace_torch._lib as lib
from dtrace_torch import fingerprints, kernels

class FakeCuda:
    def __init__(self, device, ptr, n):
        self.is_cuda, self.device, self._ptr, self._n = True, types.SimpleNamespace(index=device), ptr, n
    def data_ptr(self): return self._ptr
    def numel(self): return self._n
    def element_size(self): return 4

current = {"device": None}
@contextlib.contextmanager
def device(index):
    current["device"] = index
    yield
torch.cuda.device = device
torch.cuda.current_stream = lambda: types.SimpleNamespace(cuda_stream=1000 + current["device"])

calls = []
class FakeLib:
    CudaUnavailable = lib.CudaUnavailable
    @staticmethod
    def fingerprint_device_batch(addresses, sizes, stream):
        calls.append((list(addresses), list(sizes), stream))
        return [a * 7 for a in addresses]

host = torch.arange(4, dtype=torch.float32)
tensors = [FakeCuda(1, 100, 3), host, FakeCuda(0, 200, 5), FakeCuda(1, 300, 2)]
digests = fingerprints.device_digests(tensors, FakeLib)
assert digests == [700, None, 1400, 2100], digests
assert sorted(calls) == sorted([([100, 300], [12, 8], 1001), ([200], [20], 1000)]), calls

class NoCuda(FakeLib):
    @staticmethod
    def fingerprint_device_batch(addresses, sizes, stream):
        raise lib.CudaUnavailable("built without CUDA")
assert fingerprints.device_digests([FakeCuda(0, 8, 1)], NoCuda) == [None]

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
