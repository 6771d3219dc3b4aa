#!/usr/bin/env python3
"""torch.hash_tensor against dtrace_fingerprint_device on the same CUDA buffer.

    torch_hash.py LIBDTRACE_SO [BYTES] [REPEATS]

Calls libdtrace through ctypes, as a Python recorder would. torch.hash_tensor
(PyTorch >= 2.9) is an XOR reduction of elements widened to 64 bits; the buffer
is viewed as int64 so both read the same bytes once. Prints `key value` lines,
or one SKIP line when python3 has no CUDA torch or no hash_tensor.
"""
import ctypes
import sys
import time


def main():
    try:
        import torch
    except ImportError:
        print("SKIP: python3 has no torch")
        return 0
    if not torch.cuda.is_available():
        print("SKIP: torch has no CUDA device")
        return 0
    if not hasattr(torch, "hash_tensor"):
        print(f"SKIP: torch {torch.__version__} has no torch.hash_tensor")
        return 0
    lib = ctypes.CDLL(sys.argv[1])
    lib.dtrace_fingerprint_device.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                              ctypes.POINTER(ctypes.c_uint64)]
    nbytes = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    x = torch.randint(-(2**62), 2**62, (nbytes // 8,), dtype=torch.int64, device="cuda")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    out = ctypes.c_uint64()

    def dtrace_once():
        code = lib.dtrace_fingerprint_device(ctypes.c_void_p(x.data_ptr()), nbytes, stream, ctypes.byref(out))
        if code != 0:
            raise RuntimeError(f"dtrace_fingerprint_device returned {code}")

    def torch_once():
        torch.hash_tensor(x).item()  # .item() waits for the result, as dtrace's call does

    def median_seconds(fn):
        fn()
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return sorted(times)[len(times) // 2]

    dtrace_s = median_seconds(dtrace_once)
    torch_s = median_seconds(torch_once)
    print(f"torch_version {torch.__version__}")
    print(f"torch_hash_tensor_TBps {nbytes / torch_s / 1e12:.3f}")
    print(f"torch_dtrace_TBps {nbytes / dtrace_s / 1e12:.3f}")
    print(f"torch_dtrace_time_over_hash_tensor_time {dtrace_s / torch_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
