// Launches of minitrain's GPU kernels (cuda/minitrain_kernels.cu), one per op
// of tools/minitrain/kernels.hpp, on a stream. Names no CUDA type: `stream` is
// a cudaStream_t; pointers are device (or managed) memory. Each returns the
// launch's Status (file, line, call and error when it failed); the work itself
// runs asynchronously on the stream.
//
// Deterministic kernels give one output per thread from the bodies of
// cuda/minitrain_ops.cuh (a fixed order of additions, the CPU's where the math
// library agrees). The planted ones are real GPU mechanisms: atomicAdd arrival
// order (bias gradient rows, split-K partials, the fused cross-entropy's token
// losses) and a workspace tail nothing wrote (uninit-pad).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/fingerprint.cuh"
#include "cuda/minitrain_ops.cuh"

namespace minitrain::gpu {

using dtrace::gpu::Status;

Status embedding(const std::int32_t* tokens, const float* tok_emb, const float* pos_emb, int B,
                 int T, int D, float* x, void* stream);
Status embedding_grad(const float* dx, const std::int32_t* tokens, int B, int T, int D, int V,
                      float* d_tok_emb, float* d_pos_emb, void* stream);
Status layernorm(const float* x, const float* g, const float* b, int M, int D, float* y,
                 float* mean, float* rstd, void* stream);
Status layernorm_grad(const float* dy, const float* x, const float* mean, const float* rstd,
                      const float* g, int M, int D, float* dx, float* dg, float* db, void* stream);
Status gemm(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
            void* stream);
Status gemm_interleaved(const float* x, const float* w, const float* b, int M, int K, int N,
                        float* y, void* stream);
Status gemm_dx(const float* dy, const float* w, int M, int K, int N, float* dx, void* stream);
Status gemm_dw(const float* x, const float* dy, int M, int K, int N, float* dw, void* stream);
Status bias_grad(const float* dy, int M, int N, float* db, void* stream);
Status attn_scores(const float* qkv, int B, int T, int H, int D, float* scores, void* stream);
Status softmax_causal(const float* scores, int rows, int T, float* probs, void* stream);
Status attn_values(const float* probs, const float* qkv, int B, int T, int H, int D, float* out,
                   void* stream);
Status attn_values_grad(const float* d_out, const float* probs, const float* qkv, int B, int T,
                        int H, int D, float* d_probs, float* d_qkv, void* stream);
Status softmax_grad(const float* probs, const float* d_probs, int rows, int T, float* d_scores,
                    void* stream);
Status attn_scores_grad(const float* d_scores, const float* qkv, int B, int T, int H, int D,
                        float* d_qkv, void* stream);
Status gelu(const float* x, std::size_t n, float* y, void* stream);
Status gelu_grad(const float* dy, const float* x, std::size_t n, float* dx, void* stream);
Status multiply(const float* a, const float* b, std::size_t n, float* y, void* stream);
Status add(const float* a, const float* b, std::size_t n, float* y, void* stream);
Status scale(float* x, std::size_t n, float factor, void* stream);
Status cross_entropy(const float* logits, const std::int32_t* targets, int M, int V,
                     float* token_losses, float* loss, void* stream);
Status cross_entropy_grad(const float* logits, const std::int32_t* targets, int M, int V,
                          float* dlogits, void* stream);
Status grad_norm(const float* grads, std::size_t n, float* norm, void* stream);
Status adamw(const ops::AdamWConstants& c, float* params, const float* grads, float* m, float* v,
             std::size_t begin, std::size_t end, bool decay, const float* grad_norm,
             void* stream);

// ---- planted ----
// y = b + the eight K-chunk partials, each atomically added as its block ends.
Status gemm_splitk_atomic(const float* x, const float* w, const float* b, int M, int K, int N,
                          float* y, void* stream);
// db = rows of dy atomically added, one block of rows at a time.
Status bias_grad_atomic(const float* dy, int M, int N, float* db, void* stream);
// db = the sum over a padded workspace whose tail rows nothing wrote.
Status bias_grad_padded(const float* dy, int M, int N, float* db, void* stream);
// Token losses as the ordered kernel; their sum atomically added.
Status cross_entropy_atomic(const float* logits, const std::int32_t* targets, int M, int V,
                            float* token_losses, float* loss, void* stream);
// Leaves stale, run-dependent bits in the stream's memory pool, as a previous
// tenant of reused memory would (uninit-pad reads them back).
Status dirty_pool(std::size_t bytes, void* stream);
// Mean milliseconds of `repeats` runs of the lm-head GEMM in configuration
// `config` (0 ordered, 1 interleaved), timed with CUDA events.
Status time_gemm(int config, const float* x, const float* w, const float* b, int M, int K, int N,
                 float* y, int repeats, void* stream, float* milliseconds);

}  // namespace minitrain::gpu
