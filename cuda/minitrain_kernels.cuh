// How minitrain's GPU ops run: Launch, the executor that runs an op of
// cuda/minitrain_ops.cuh as launches of n device threads on a stream (the
// backend is OpsBackend<Launch>, tools/minitrain/cuda_backend.cu), and the
// device-only pieces of the planted switches (cuda/minitrain_kernels.cu).
// A CUDA header: included by .cu files only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/fingerprint.cuh"
#include "cuda/minitrain_ops.cuh"

namespace minitrain::gpu {

using dtrace::gpu::Status;

inline constexpr int kThreads = 256;

template <class F>
__global__ void for_each_kernel(std::size_t n, F f) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}

// run(n, f): f(i) for i in [0, n) as one launch of 256-thread blocks; spread:
// one thread per block (atomics that race across SMs). Launch errors surface
// at the backend's next checked call (cudaGetLastError after each op).
struct Launch {
  cudaStream_t stream = nullptr;
  template <class F>
  void operator()(std::size_t n, F f) const {
    if (n == 0) return;
    const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
    for_each_kernel<<<blocks, kThreads, 0, stream>>>(n, f);
  }
  template <class F>
  void spread(std::size_t n, F f) const {
    if (n > 0) for_each_kernel<<<static_cast<unsigned>(n), 1, 0, stream>>>(n, f);
  }
};

// uninit-pad: db = the column sums of a workspace of padded_rows(M) rows,
// allocated from the stream's pool, of which only the first M are written.
Status bias_grad_padded(const float* dy, int M, int N, float* db, cudaStream_t stream);
// Leaves stale, run-dependent bits in the stream's memory pool, as a previous
// tenant of reused memory would (uninit-pad reads them back).
Status dirty_pool(std::size_t bytes, cudaStream_t stream);
// Mean milliseconds of `repeats` runs of the GEMM in configuration `config`
// (0 ordered, 1 interleaved), timed with CUDA events.
Status time_gemm(int config, const float* x, const float* w, const float* b, int M, int K, int N,
                 float* y, int repeats, cudaStream_t stream, float* milliseconds);

}  // namespace minitrain::gpu
