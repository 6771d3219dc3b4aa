// The device-only pieces of minitrain's planted switches: uninit-pad's padded
// workspace and the dirty pool it comes from, autotune's event timing. (The
// ops themselves are cuda/minitrain_ops.cuh, run by Launch.)
// Built with --fmad=false (cuda/meson.build): a contracted a*b+c would round
// differently from the CPU bodies the unit tests prove.
#include <cuda_runtime.h>

#include "cuda/check.cuh"
#include "cuda/minitrain_kernels.cuh"

namespace minitrain::gpu {

namespace {

// Bits that depend on when the kernel ran: what a reused allocation holds.
__global__ void dirty_kernel(std::uint32_t* words, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    words[i] =
        static_cast<std::uint32_t>(clock64() * 2654435761ULL) ^ static_cast<std::uint32_t>(i);
  }
}

}  // namespace

Status bias_grad_padded(const float* dy, int M, int N, float* db, cudaStream_t stream) {
  const int padded = ops::padded_rows(M);
  const std::size_t bytes = static_cast<std::size_t>(padded) * N * sizeof(float);
  void* workspace = nullptr;
  // From the stream's pool: the tail holds whatever the block's last user left.
  DTRACE_CUDA_CHECK(cudaMallocAsync(&workspace, bytes, stream));
  DTRACE_CUDA_CHECK(cudaMemcpyAsync(workspace, dy, static_cast<std::size_t>(M) * N * sizeof(float),
                                    cudaMemcpyDefault, stream));
  Launch run{stream};
  ops::bias_grad(run, static_cast<const float*>(workspace), padded, N, db);
  DTRACE_CUDA_CHECK(cudaGetLastError());
  DTRACE_CUDA_CHECK(cudaFreeAsync(workspace, stream));
  return {};
}
Status dirty_pool(std::size_t bytes, cudaStream_t stream) {
  cudaMemPool_t pool = nullptr;
  int device = 0;
  DTRACE_CUDA_CHECK(cudaGetDevice(&device));
  DTRACE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  // Keep freed blocks in the pool, so the next allocation reuses this one.
  std::uint64_t keep = ~std::uint64_t{0};
  DTRACE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  void* block = nullptr;
  DTRACE_CUDA_CHECK(cudaMallocAsync(&block, bytes, stream));
  const std::size_t words = bytes / sizeof(std::uint32_t);
  if (words > 0) {
    dirty_kernel<<<static_cast<unsigned>((words + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        static_cast<std::uint32_t*>(block), words);
  }
  DTRACE_CUDA_CHECK(cudaGetLastError());
  DTRACE_CUDA_CHECK(cudaFreeAsync(block, stream));
  return {};
}
Status time_gemm(int config, const float* x, const float* w, const float* b, int M, int K, int N,
                 float* y, int repeats, cudaStream_t stream, float* milliseconds) {
  cudaEvent_t start = nullptr, stop = nullptr;
  DTRACE_CUDA_CHECK(cudaEventCreate(&start));
  DTRACE_CUDA_CHECK(cudaEventCreate(&stop));
  DTRACE_CUDA_CHECK(cudaEventRecord(start, stream));
  Launch run{stream};
  for (int r = 0; r < repeats; ++r) ops::gemm(run, x, w, b, M, K, N, y, config);
  DTRACE_CUDA_CHECK(cudaGetLastError());
  DTRACE_CUDA_CHECK(cudaEventRecord(stop, stream));
  DTRACE_CUDA_CHECK(cudaEventSynchronize(stop));
  DTRACE_CUDA_CHECK(cudaEventElapsedTime(milliseconds, start, stop));
  *milliseconds /= static_cast<float>(repeats > 0 ? repeats : 1);
  DTRACE_CUDA_CHECK(cudaEventDestroy(start));
  DTRACE_CUDA_CHECK(cudaEventDestroy(stop));
  return {};
}

}  // namespace minitrain::gpu
