// The one checked macro every CUDA runtime call goes through (nvbench's
// NVBENCH_CUDA_CALL, minus the throw: library code returns its errors).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/fingerprint.cuh"

namespace dtrace::gpu {

// A failed call as a Status whose message reads
// "cuda/fingerprint.cu:123: cudaMallocAsync(...) failed: out of memory
// (cudaErrorMemoryAllocation)".
Status cuda_failure(cudaError_t error, const char* call, const char* file, int line);

}  // namespace dtrace::gpu

// Evaluates a CUDA runtime call; on failure returns its Status from the
// enclosing function (which must return dtrace::gpu::Status).
#define DTRACE_CUDA_CHECK(call)                                                          \
  do {                                                                                   \
    const cudaError_t dtrace_cuda_error_ = (call);                                       \
    if (dtrace_cuda_error_ != cudaSuccess) {                                             \
      return ::dtrace::gpu::cuda_failure(dtrace_cuda_error_, #call, __FILE__, __LINE__); \
    }                                                                                    \
  } while (0)
