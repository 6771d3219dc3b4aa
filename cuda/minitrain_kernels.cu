// minitrain's GPU kernels: the bodies of cuda/minitrain_ops.cuh mapped onto
// threads (one output or one row each), and the planted variants' atomics.
// Built with --fmad=false (cuda/meson.build): a contracted a*b+c would round
// differently from the CPU bodies the unit tests prove.
#include <cuda_runtime.h>

#include "cuda/check.cuh"
#include "cuda/minitrain_kernels.cuh"

namespace minitrain::gpu {

namespace {

constexpr int kThreads = 256;

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }
unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}
__device__ std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// A launch of `kernel` over n threads, then the launch error through the macro.
#define MT_LAUNCH(n, stream, kernel, ...)                                             \
  do {                                                                                \
    if ((n) > 0) kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(__VA_ARGS__); \
    DTRACE_CUDA_CHECK(cudaGetLastError());                                            \
  } while (0)

__global__ void embedding_kernel(const std::int32_t* tokens, const float* tok, const float* pos,
                                 int T, int D, std::size_t n, float* x) {
  const std::size_t i = thread_index();
  if (i < n) x[i] = ops::embedding_at(tokens, tok, pos, T, D, i);
}
__global__ void embedding_grad_kernel(const float* dx, const std::int32_t* tokens, int B, int T,
                                      int D, int V, float* d_tok, float* d_pos) {
  const std::size_t i = thread_index();
  const std::size_t tok_n = static_cast<std::size_t>(V) * D;
  if (i < tok_n) {
    d_tok[i] = ops::embedding_grad_tok_at(dx, tokens, B * T, D, static_cast<int>(i / D),
                                          static_cast<int>(i % D));
  } else if (i < tok_n + static_cast<std::size_t>(T) * D) {
    const std::size_t j = i - tok_n;
    d_pos[j] = ops::embedding_grad_pos_at(dx, B, T, D, static_cast<int>(j / D),
                                          static_cast<int>(j % D));
  }
}
__global__ void layernorm_kernel(const float* x, const float* g, const float* b, int M, int D,
                                 float* y, float* mean, float* rstd) {
  const std::size_t i = thread_index();
  if (i < static_cast<std::size_t>(M)) ops::layernorm_row(x, g, b, D, static_cast<int>(i), y, mean, rstd);
}
__global__ void layernorm_grad_kernel(const float* dy, const float* x, const float* mean,
                                      const float* rstd, const float* g, int M, int D, float* dx,
                                      float* dg, float* db) {
  const std::size_t i = thread_index();
  if (i < static_cast<std::size_t>(M)) {
    ops::layernorm_grad_row(dy, x, mean, rstd, g, D, static_cast<int>(i), dx);
  } else if (i < static_cast<std::size_t>(M) + D) {
    ops::layernorm_grad_param_at(dy, x, mean, rstd, M, D, static_cast<int>(i - M), dg, db);
  }
}
__global__ void gemm_kernel(const float* x, const float* w, const float* b, int M, int K, int N,
                            int config, float* y) {
  const std::size_t i = thread_index();
  if (i >= static_cast<std::size_t>(M) * N) return;
  const int r = static_cast<int>(i / N), c = static_cast<int>(i % N);
  y[i] = config == 0 ? ops::gemm_at(x, w, b, K, N, r, c)
                     : ops::gemm_interleaved_at(x, w, b, K, N, r, c);
}
__global__ void gemm_dx_kernel(const float* dy, const float* w, int M, int K, int N, float* dx) {
  const std::size_t i = thread_index();
  if (i < static_cast<std::size_t>(M) * K)
    dx[i] = ops::gemm_dx_at(dy, w, K, N, static_cast<int>(i / K), static_cast<int>(i % K));
}
__global__ void gemm_dw_kernel(const float* x, const float* dy, int M, int K, int N, float* dw) {
  const std::size_t i = thread_index();
  if (i < static_cast<std::size_t>(K) * N)
    dw[i] = ops::gemm_dw_at(x, dy, M, K, N, static_cast<int>(i / N), static_cast<int>(i % N));
}
__global__ void bias_grad_kernel(const float* dy, int M, int N, float* db) {
  const std::size_t j = thread_index();
  if (j < static_cast<std::size_t>(N)) db[j] = ops::bias_grad_at(dy, M, N, static_cast<int>(j));
}
// One thread per (b, h, t, u) of the [B, H, T, T] score layout.
__global__ void attn_scores_kernel(const float* qkv, ops::Heads ix, float* scores) {
  const std::size_t i = thread_index();
  const std::size_t n = static_cast<std::size_t>(ix.B) * ix.H * ix.T * ix.T;
  if (i >= n) return;
  const int u = static_cast<int>(i % ix.T), t = static_cast<int>(i / ix.T % ix.T);
  const int h = static_cast<int>(i / (static_cast<std::size_t>(ix.T) * ix.T) % ix.H);
  const int b = static_cast<int>(i / (static_cast<std::size_t>(ix.T) * ix.T * ix.H));
  scores[i] = ops::attn_scores_at(qkv, ix, b, h, t, u);
}
__global__ void softmax_kernel(const float* scores, int rows, int T, float* probs) {
  const std::size_t r = thread_index();
  if (r < static_cast<std::size_t>(rows)) ops::softmax_causal_row(scores, T, static_cast<int>(r), probs);
}
// One thread per element of out [B*T, D]: (b, t, h, e).
__global__ void attn_values_kernel(const float* probs, const float* qkv, ops::Heads ix,
                                   float* out) {
  const std::size_t i = thread_index();
  if (i >= static_cast<std::size_t>(ix.B) * ix.T * ix.D) return;
  const int col = static_cast<int>(i % ix.D);
  const std::size_t row = i / ix.D;
  out[i] = ops::attn_values_at(probs, qkv, ix, static_cast<int>(row / ix.T),
                               static_cast<int>(row % ix.T), col / ix.hd, col % ix.hd);
}
__global__ void attn_values_grad_probs_kernel(const float* d_out, const float* qkv, ops::Heads ix,
                                              float* d_probs) {
  const std::size_t i = thread_index();
  const std::size_t n = static_cast<std::size_t>(ix.B) * ix.H * ix.T * ix.T;
  if (i >= n) return;
  const int u = static_cast<int>(i % ix.T), t = static_cast<int>(i / ix.T % ix.T);
  const int h = static_cast<int>(i / (static_cast<std::size_t>(ix.T) * ix.T) % ix.H);
  const int b = static_cast<int>(i / (static_cast<std::size_t>(ix.T) * ix.T * ix.H));
  d_probs[i] = ops::attn_values_grad_probs_at(d_out, qkv, ix, b, h, t, u);
}
// d_qkv [B*T, 3D]: q and k parts 0, the v part from the probabilities.
__global__ void attn_values_grad_qkv_kernel(const float* d_out, const float* probs, ops::Heads ix,
                                            float* d_qkv) {
  const std::size_t i = thread_index();
  if (i >= static_cast<std::size_t>(ix.B) * ix.T * 3 * ix.D) return;
  const int col = static_cast<int>(i % (3 * static_cast<std::size_t>(ix.D)));
  const std::size_t row = i / (3 * static_cast<std::size_t>(ix.D));
  if (col < 2 * ix.D) {
    d_qkv[i] = 0.0f;
    return;
  }
  const int c = col - 2 * ix.D;
  d_qkv[i] = ops::attn_values_grad_v_at(d_out, probs, ix, static_cast<int>(row / ix.T),
                                        static_cast<int>(row % ix.T), c / ix.hd, c % ix.hd);
}
__global__ void softmax_grad_kernel(const float* probs, const float* d_probs, int rows, int T,
                                    float* d_scores) {
  const std::size_t r = thread_index();
  if (r < static_cast<std::size_t>(rows))
    ops::softmax_grad_row(probs, d_probs, T, static_cast<int>(r), d_scores);
}
// The q and k parts of d_qkv; the v part is left as it is.
__global__ void attn_scores_grad_kernel(const float* d_scores, const float* qkv, ops::Heads ix,
                                        float* d_qkv) {
  const std::size_t i = thread_index();
  if (i >= static_cast<std::size_t>(ix.B) * ix.T * 2 * ix.D) return;
  const int col = static_cast<int>(i % (2 * static_cast<std::size_t>(ix.D)));
  const std::size_t row = i / (2 * static_cast<std::size_t>(ix.D));
  const int b = static_cast<int>(row / ix.T), t = static_cast<int>(row % ix.T);
  const int c = col % ix.D;
  const float value = col < ix.D
                          ? ops::attn_scores_grad_q_at(d_scores, qkv, ix, b, t, c / ix.hd, c % ix.hd)
                          : ops::attn_scores_grad_k_at(d_scores, qkv, ix, b, t, c / ix.hd, c % ix.hd);
  d_qkv[row * 3 * ix.D + col] = value;
}
__global__ void gelu_kernel(const float* x, std::size_t n, float* y) {
  const std::size_t i = thread_index();
  if (i < n) y[i] = ops::gelu_at(x[i]);
}
__global__ void gelu_grad_kernel(const float* dy, const float* x, std::size_t n, float* dx) {
  const std::size_t i = thread_index();
  if (i < n) dx[i] = ops::gelu_grad_at(dy[i], x[i]);
}
__global__ void multiply_kernel(const float* a, const float* b, std::size_t n, float* y) {
  const std::size_t i = thread_index();
  if (i < n) y[i] = a[i] * b[i];
}
__global__ void add_kernel(const float* a, const float* b, std::size_t n, float* y) {
  const std::size_t i = thread_index();
  if (i < n) y[i] = a[i] + b[i];
}
__global__ void scale_kernel(float* x, std::size_t n, float factor) {
  const std::size_t i = thread_index();
  if (i < n) x[i] *= factor;
}
__global__ void token_loss_kernel(const float* logits, const std::int32_t* targets, int M, int V,
                                  float* token_losses) {
  const std::size_t i = thread_index();
  if (i < static_cast<std::size_t>(M))
    token_losses[i] = ops::token_loss_row(logits, targets, V, static_cast<int>(i));
}
// One thread: the token order of the CPU, not a tree.
__global__ void mean_loss_kernel(const float* token_losses, int M, float* loss) {
  if (thread_index() == 0) *loss = ops::mean_loss(token_losses, M);
}
__global__ void cross_entropy_grad_kernel(const float* logits, const std::int32_t* targets, int M,
                                          int V, float* dlogits) {
  const std::size_t i = thread_index();
  if (i < static_cast<std::size_t>(M))
    ops::cross_entropy_grad_row(logits, targets, M, V, static_cast<int>(i), dlogits);
}
__global__ void grad_norm_kernel(const float* grads, std::size_t n, float* norm) {
  if (thread_index() == 0) *norm = sqrtf(ops::sum_of_squares(grads, n));
}
__global__ void adamw_kernel(ops::AdamWConstants c, float* params, const float* grads, float* m,
                             float* v, std::size_t begin, std::size_t end, bool decay,
                             const float* grad_norm) {
  const std::size_t i = begin + thread_index();
  if (i < end) ops::adamw_at(c, params, grads, m, v, i, decay, *grad_norm);
}

// ---- planted ----

__global__ void bias_fill_kernel(const float* b, int M, int N, float* y) {
  const std::size_t i = thread_index();
  if (i < static_cast<std::size_t>(M) * N) y[i] = b != nullptr ? b[i % N] : 0.0f;
}
// One thread per (chunk, i, j): the chunks of an output race to add.
__global__ void gemm_splitk_kernel(const float* x, const float* w, int M, int K, int N, int chunks,
                                   float* y) {
  const std::size_t i = thread_index();
  const std::size_t outputs = static_cast<std::size_t>(M) * N;
  if (i >= outputs * chunks) return;
  const int c = static_cast<int>(i / outputs);
  const std::size_t o = i % outputs;
  atomicAdd(&y[o], ops::gemm_splitk_partial_at(x, w, K, N, static_cast<int>(o / N),
                                               static_cast<int>(o % N), c));
}
__global__ void zero_kernel(float* x, std::size_t n) {
  const std::size_t i = thread_index();
  if (i < n) x[i] = 0.0f;
}
__global__ void bias_grad_atomic_kernel(const float* dy, int M, int N, float* db) {
  const std::size_t i = thread_index();
  if (i < static_cast<std::size_t>(M) * N) atomicAdd(&db[i % N], dy[i]);
}
__global__ void cross_entropy_atomic_kernel(const float* logits, const std::int32_t* targets,
                                            int M, int V, float* token_losses, float* total) {
  const std::size_t i = thread_index();
  if (i >= static_cast<std::size_t>(M)) return;
  const float loss = ops::token_loss_row(logits, targets, V, static_cast<int>(i));
  token_losses[i] = loss;
  atomicAdd(total, loss);
}
__global__ void divide_kernel(float* x, float by) {
  if (thread_index() == 0) *x = *x / by;
}
// Bits that depend on when the kernel ran: what a reused allocation holds.
__global__ void dirty_kernel(std::uint32_t* words, std::size_t n) {
  const std::size_t i = thread_index();
  if (i < n) words[i] = static_cast<std::uint32_t>(clock64() * 2654435761ULL) ^ static_cast<std::uint32_t>(i);
}

}  // namespace

Status embedding(const std::int32_t* tokens, const float* tok_emb, const float* pos_emb, int B,
                 int T, int D, float* x, void* stream) {
  const std::size_t n = static_cast<std::size_t>(B) * T * D;
  MT_LAUNCH(n, stream, embedding_kernel, tokens, tok_emb, pos_emb, T, D, n, x);
  return {};
}
Status embedding_grad(const float* dx, const std::int32_t* tokens, int B, int T, int D, int V,
                      float* d_tok_emb, float* d_pos_emb, void* stream) {
  const std::size_t n = static_cast<std::size_t>(V + T) * D;
  MT_LAUNCH(n, stream, embedding_grad_kernel, dx, tokens, B, T, D, V, d_tok_emb, d_pos_emb);
  return {};
}
Status layernorm(const float* x, const float* g, const float* b, int M, int D, float* y,
                 float* mean, float* rstd, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(M), stream, layernorm_kernel, x, g, b, M, D, y, mean, rstd);
  return {};
}
Status layernorm_grad(const float* dy, const float* x, const float* mean, const float* rstd,
                      const float* g, int M, int D, float* dx, float* dg, float* db, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(M + D), stream, layernorm_grad_kernel, dy, x, mean, rstd, g,
            M, D, dx, dg, db);
  return {};
}
Status gemm(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
            void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(M) * N, stream, gemm_kernel, x, w, b, M, K, N, 0, y);
  return {};
}
Status gemm_interleaved(const float* x, const float* w, const float* b, int M, int K, int N,
                        float* y, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(M) * N, stream, gemm_kernel, x, w, b, M, K, N, 1, y);
  return {};
}
Status gemm_dx(const float* dy, const float* w, int M, int K, int N, float* dx, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(M) * K, stream, gemm_dx_kernel, dy, w, M, K, N, dx);
  return {};
}
Status gemm_dw(const float* x, const float* dy, int M, int K, int N, float* dw, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(K) * N, stream, gemm_dw_kernel, x, dy, M, K, N, dw);
  return {};
}
Status bias_grad(const float* dy, int M, int N, float* db, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(N), stream, bias_grad_kernel, dy, M, N, db);
  return {};
}
Status attn_scores(const float* qkv, int B, int T, int H, int D, float* scores, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(B) * H * T * T, stream, attn_scores_kernel, qkv,
            ops::heads(B, T, H, D), scores);
  return {};
}
Status softmax_causal(const float* scores, int rows, int T, float* probs, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(rows), stream, softmax_kernel, scores, rows, T, probs);
  return {};
}
Status attn_values(const float* probs, const float* qkv, int B, int T, int H, int D, float* out,
                   void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(B) * T * D, stream, attn_values_kernel, probs, qkv,
            ops::heads(B, T, H, D), out);
  return {};
}
Status attn_values_grad(const float* d_out, const float* probs, const float* qkv, int B, int T,
                        int H, int D, float* d_probs, float* d_qkv, void* stream) {
  const ops::Heads ix = ops::heads(B, T, H, D);
  MT_LAUNCH(static_cast<std::size_t>(B) * H * T * T, stream, attn_values_grad_probs_kernel, d_out,
            qkv, ix, d_probs);
  MT_LAUNCH(static_cast<std::size_t>(B) * T * 3 * D, stream, attn_values_grad_qkv_kernel, d_out,
            probs, ix, d_qkv);
  return {};
}
Status softmax_grad(const float* probs, const float* d_probs, int rows, int T, float* d_scores,
                    void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(rows), stream, softmax_grad_kernel, probs, d_probs, rows, T,
            d_scores);
  return {};
}
Status attn_scores_grad(const float* d_scores, const float* qkv, int B, int T, int H, int D,
                        float* d_qkv, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(B) * T * 2 * D, stream, attn_scores_grad_kernel, d_scores,
            qkv, ops::heads(B, T, H, D), d_qkv);
  return {};
}
Status gelu(const float* x, std::size_t n, float* y, void* stream) {
  MT_LAUNCH(n, stream, gelu_kernel, x, n, y);
  return {};
}
Status gelu_grad(const float* dy, const float* x, std::size_t n, float* dx, void* stream) {
  MT_LAUNCH(n, stream, gelu_grad_kernel, dy, x, n, dx);
  return {};
}
Status multiply(const float* a, const float* b, std::size_t n, float* y, void* stream) {
  MT_LAUNCH(n, stream, multiply_kernel, a, b, n, y);
  return {};
}
Status add(const float* a, const float* b, std::size_t n, float* y, void* stream) {
  MT_LAUNCH(n, stream, add_kernel, a, b, n, y);
  return {};
}
Status scale(float* x, std::size_t n, float factor, void* stream) {
  MT_LAUNCH(n, stream, scale_kernel, x, n, factor);
  return {};
}
Status cross_entropy(const float* logits, const std::int32_t* targets, int M, int V,
                     float* token_losses, float* loss, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(M), stream, token_loss_kernel, logits, targets, M, V,
            token_losses);
  MT_LAUNCH(std::size_t{1}, stream, mean_loss_kernel, token_losses, M, loss);
  return {};
}
Status cross_entropy_grad(const float* logits, const std::int32_t* targets, int M, int V,
                          float* dlogits, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(M), stream, cross_entropy_grad_kernel, logits, targets, M, V,
            dlogits);
  return {};
}
Status grad_norm(const float* grads, std::size_t n, float* norm, void* stream) {
  MT_LAUNCH(std::size_t{1}, stream, grad_norm_kernel, grads, n, norm);
  return {};
}
Status adamw(const ops::AdamWConstants& c, float* params, const float* grads, float* m, float* v,
             std::size_t begin, std::size_t end, bool decay, const float* grad_norm,
             void* stream) {
  MT_LAUNCH(end - begin, stream, adamw_kernel, c, params, grads, m, v, begin, end, decay,
            grad_norm);
  return {};
}

Status gemm_splitk_atomic(const float* x, const float* w, const float* b, int M, int K, int N,
                          float* y, void* stream) {
  const std::size_t outputs = static_cast<std::size_t>(M) * N;
  const int chunks = ops::splitk_chunks(K);
  MT_LAUNCH(outputs, stream, bias_fill_kernel, b, M, N, y);
  MT_LAUNCH(outputs * chunks, stream, gemm_splitk_kernel, x, w, M, K, N, chunks, y);
  return {};
}
Status bias_grad_atomic(const float* dy, int M, int N, float* db, void* stream) {
  MT_LAUNCH(static_cast<std::size_t>(N), stream, zero_kernel, db, static_cast<std::size_t>(N));
  MT_LAUNCH(static_cast<std::size_t>(M) * N, stream, bias_grad_atomic_kernel, dy, M, N, db);
  return {};
}
Status bias_grad_padded(const float* dy, int M, int N, float* db, void* stream) {
  const int padded = ops::padded_rows(M);
  const std::size_t bytes = static_cast<std::size_t>(padded) * N * sizeof(float);
  void* workspace = nullptr;
  // From the stream's pool: the tail holds whatever the block's last user left.
  DTRACE_CUDA_CHECK(cudaMallocAsync(&workspace, bytes, as_stream(stream)));
  DTRACE_CUDA_CHECK(cudaMemcpyAsync(workspace, dy, static_cast<std::size_t>(M) * N * sizeof(float),
                                    cudaMemcpyDeviceToDevice, as_stream(stream)));
  MT_LAUNCH(static_cast<std::size_t>(N), stream, bias_grad_kernel,
            static_cast<const float*>(workspace), padded, N, db);
  DTRACE_CUDA_CHECK(cudaFreeAsync(workspace, as_stream(stream)));
  return {};
}
Status cross_entropy_atomic(const float* logits, const std::int32_t* targets, int M, int V,
                            float* token_losses, float* loss, void* stream) {
  MT_LAUNCH(std::size_t{1}, stream, zero_kernel, loss, std::size_t{1});
  // One token per block: the blocks' atomics race across SMs (lanes of one
  // warp would add in a fixed order).
  if (M > 0) {
    cross_entropy_atomic_kernel<<<static_cast<unsigned>(M), 1, 0, as_stream(stream)>>>(
        logits, targets, M, V, token_losses, loss);
  }
  DTRACE_CUDA_CHECK(cudaGetLastError());
  MT_LAUNCH(std::size_t{1}, stream, divide_kernel, loss, static_cast<float>(M));
  return {};
}
Status dirty_pool(std::size_t bytes, void* stream) {
  cudaMemPool_t pool = nullptr;
  int device = 0;
  DTRACE_CUDA_CHECK(cudaGetDevice(&device));
  DTRACE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  // Keep freed blocks in the pool, so the next allocation reuses this one.
  std::uint64_t keep = ~std::uint64_t{0};
  DTRACE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  void* block = nullptr;
  DTRACE_CUDA_CHECK(cudaMallocAsync(&block, bytes, as_stream(stream)));
  const std::size_t words = bytes / sizeof(std::uint32_t);
  MT_LAUNCH(words, stream, dirty_kernel, static_cast<std::uint32_t*>(block), words);
  DTRACE_CUDA_CHECK(cudaFreeAsync(block, as_stream(stream)));
  return {};
}
Status time_gemm(int config, const float* x, const float* w, const float* b, int M, int K, int N,
                 float* y, int repeats, void* stream, float* milliseconds) {
  cudaEvent_t start = nullptr, stop = nullptr;
  DTRACE_CUDA_CHECK(cudaEventCreate(&start));
  DTRACE_CUDA_CHECK(cudaEventCreate(&stop));
  DTRACE_CUDA_CHECK(cudaEventRecord(start, as_stream(stream)));
  for (int r = 0; r < repeats; ++r)
    MT_LAUNCH(static_cast<std::size_t>(M) * N, stream, gemm_kernel, x, w, b, M, K, N, config, y);
  DTRACE_CUDA_CHECK(cudaEventRecord(stop, as_stream(stream)));
  DTRACE_CUDA_CHECK(cudaEventSynchronize(stop));
  DTRACE_CUDA_CHECK(cudaEventElapsedTime(milliseconds, start, stop));
  *milliseconds /= static_cast<float>(repeats > 0 ? repeats : 1);
  DTRACE_CUDA_CHECK(cudaEventDestroy(start));
  DTRACE_CUDA_CHECK(cudaEventDestroy(stop));
  return {};
}

}  // namespace minitrain::gpu
