// The arithmetic of minitrain: plain fp32 loops, one function per kernel.
//
// Every function writes its outputs completely and reads only its arguments, so
// a kernel run twice from the same inputs gives the same bits -- except the
// planted variants at the end, which take their reduction order or their garbage
// from a Chaos source. Reductions run in one fixed order (index order) so that
// the build, not luck, decides the bits. Row-major layouts throughout:
// activations [M = batch*seq, width], weights [in, out].
#pragma once

#include <cstddef>
#include <cstdint>

#include "chaos.hpp"

namespace minitrain::kernels {

// x[b*T+t] = tok_emb[tokens[b*T+t]] + pos_emb[t]
void embedding(const std::int32_t* tokens, const float* tok_emb, const float* pos_emb, int B, int T,
               int D, float* x);
// Scatter-adds dx into the rows the tokens picked, in row order.
void embedding_grad(const float* dx, const std::int32_t* tokens, int B, int T, int D, int V,
                    float* d_tok_emb, float* d_pos_emb);

void layernorm(const float* x, const float* g, const float* b, int M, int D, float* y, float* mean,
               float* rstd);
void layernorm_grad(const float* dy, const float* x, const float* mean, const float* rstd,
                    const float* g, int M, int D, float* dx, float* dg, float* db);

// y[M,N] = x[M,K] w[K,N] (+ b[N] when b is not null)
void gemm(const float* x, const float* w, const float* b, int M, int K, int N, float* y);
// dx[M,K] = dy[M,N] w^T
void gemm_dx(const float* dy, const float* w, int M, int K, int N, float* dx);
// dw[K,N] = x^T dy
void gemm_dw(const float* x, const float* dy, int M, int K, int N, float* dw);
// db[N] = sum over rows of dy
void bias_grad(const float* dy, int M, int N, float* db);

// qkv [B*T, 3D] holds q | k | v; head h uses columns h*hd .. (h+1)*hd of each.
// scores, probs: [B, H, T, T]; entries above the diagonal are written as 0.
void attn_scores(const float* qkv, int B, int T, int H, int D, float* scores);
void softmax_causal(const float* scores, int rows, int T, float* probs);
void attn_values(const float* probs, const float* qkv, int B, int T, int H, int D, float* out);
// Writes d_probs and the v part of d_qkv (q and k parts set to 0).
void attn_values_grad(const float* d_out, const float* probs, const float* qkv, int B, int T, int H,
                      int D, float* d_probs, float* d_qkv);
void softmax_grad(const float* probs, const float* d_probs, int rows, int T, float* d_scores);
// Writes the q and k parts of d_qkv; the v part is left as it is.
void attn_scores_grad(const float* d_scores, const float* qkv, int B, int T, int H, int D,
                      float* d_qkv);

void gelu(const float* x, std::size_t n, float* y);
void gelu_grad(const float* dy, const float* x, std::size_t n, float* dx);

// Inverted dropout: mask holds 0 or 1/(1-p), drawn from rng in element order.
void dropout(const float* x, std::size_t n, float p, Xoshiro& rng, float* y, float* mask);
// dropout's mask alone, on the host: every backend draws it here (the GPU ones
// then upload it), so the masks and the RNG state are the CPU's bits everywhere.
inline void dropout_mask(std::size_t n, float p, Xoshiro& rng, float* mask) {
  const float keep = 1.0f / (1.0f - p);
  for (std::size_t i = 0; i < n; ++i) mask[i] = rng.uniform() < p ? 0.0f : keep;
}
void multiply(const float* a, const float* b, std::size_t n, float* y);
void add(const float* a, const float* b, std::size_t n, float* y);

// Mean token cross-entropy of logits [M, V] against targets [M]; each token's
// loss goes to token_losses [M].
float cross_entropy(const float* logits, const std::int32_t* targets, int M, int V,
                    float* token_losses);
// dlogits = (softmax(logits) - onehot(target)) / M
void cross_entropy_grad(const float* logits, const std::int32_t* targets, int M, int V,
                        float* dlogits);

float sum_of_squares(const float* x, std::size_t n);

struct AdamW {
  float lr = 3e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  float clip = 1.0f;
  int warmup = 10;
};
// One AdamW step over [begin, end) of the flat parameter vector; `step` is the
// number of steps taken before this one. Gradients are scaled by
// min(1, clip / grad_norm) first.
void adamw(const AdamW& hp, float* params, const float* grads, float* m, float* v,
           std::size_t begin, std::size_t end, bool decay, std::int64_t step, float grad_norm);

// ---- planted variants (`--nondet`) ----

// splitk: K split in (up to) eight chunks whose partial products are added in chaos order.
void gemm_splitk(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
                 Chaos& chaos);
// autotune's second configuration: the K loop split into two interleaved halves.
void gemm_interleaved(const float* x, const float* w, const float* b, int M, int K, int N,
                      float* y);
// atomic-bias-grad: rows added in chaos order, as atomicAdd from many blocks would.
void bias_grad_unordered(const float* dy, int M, int N, float* db, Chaos& chaos);
// uninit-pad: rows padded to a tile of 48; the tail rows are a workspace nothing
// wrote (filled from chaos with stale-looking floats and raw bit patterns: huge
// values, infinities, NaN payloads) and the sum reads them.
void bias_grad_padded(const float* dy, int M, int N, float* db, Chaos& chaos);
// fused-ce: each token's log-sum-exp an online softmax over vocabulary chunks in
// chaos order, the token losses summed in chaos order.
float cross_entropy_unordered(const float* logits, const std::int32_t* targets, int M, int V,
                              float* token_losses, Chaos& chaos);

}  // namespace minitrain::kernels
