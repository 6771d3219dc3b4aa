// minitrain's GPU ops, written once: per-output (or per-row) bodies and, at the
// end, each op's extents and thread mapping, as __host__ __device__ code that
// an executor runs (a launch in the CUDA backend, tools/minitrain/cuda_backend.cu;
// a loop in tests/minitrain_ops_test.cpp, which compares against
// tools/minitrain/kernels.cpp). Each body adds in the order the
// CPU kernel does, so the deterministic GPU kernels compute the CPU's bits
// wherever the math library agrees (+ - * / sqrt are IEEE on both sides with
// nvcc --fmad=false; exp, log, tanh may differ by an ulp between glibc and
// CUDA's libdevice, which the CPU proof cannot and does not claim to cover).
//
// g++ compiles this header with the CUDA qualifiers defined away.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define MT_HD __host__ __device__
#else
#define MT_HD
#endif

namespace minitrain::ops {

using std::size_t;

// std::max's answer (the first argument unless the second is larger), NaNs included.
MT_HD inline float max_of(float a, float b) { return (a < b) ? b : a; }

// ---- embedding ----

// x[i] for i over [B*T*D).
MT_HD inline float embedding_at(const std::int32_t* tokens, const float* tok_emb,
                                const float* pos_emb, int T, int D, size_t i) {
  const size_t row = i / static_cast<size_t>(D);
  const int d = static_cast<int>(i % static_cast<size_t>(D));
  const int t = static_cast<int>(row % static_cast<size_t>(T));
  return tok_emb[static_cast<size_t>(tokens[row]) * D + d] +
         pos_emb[static_cast<size_t>(t) * D + d];
}
// d_tok_emb[v, d]: the rows that picked token v, added in row order.
MT_HD inline float embedding_grad_tok_at(const float* dx, const std::int32_t* tokens, int M, int D,
                                         int v, int d) {
  float acc = 0.0f;
  for (int row = 0; row < M; ++row)
    if (tokens[row] == v) acc += dx[static_cast<size_t>(row) * D + d];
  return acc;
}
// d_pos_emb[t, d]: position t of every sequence, in sequence order.
MT_HD inline float embedding_grad_pos_at(const float* dx, int B, int T, int D, int t, int d) {
  float acc = 0.0f;
  for (int b = 0; b < B; ++b) acc += dx[(static_cast<size_t>(b) * T + t) * D + d];
  return acc;
}

// ---- layernorm ----

MT_HD inline void layernorm_row(const float* x, const float* g, const float* b, int D, int i,
                                float* y, float* mean, float* rstd) {
  const float* row = x + static_cast<size_t>(i) * D;
  float sum = 0.0f;
  for (int d = 0; d < D; ++d) sum += row[d];
  const float mu = sum / static_cast<float>(D);
  float var = 0.0f;
  for (int d = 0; d < D; ++d) var += (row[d] - mu) * (row[d] - mu);
  const float rs = 1.0f / sqrtf(var / static_cast<float>(D) + 1e-5f);
  float* out = y + static_cast<size_t>(i) * D;
  for (int d = 0; d < D; ++d) out[d] = (row[d] - mu) * rs * g[d] + b[d];
  mean[i] = mu;
  rstd[i] = rs;
}
// dx of row i.
MT_HD inline void layernorm_grad_row(const float* dy, const float* x, const float* mean,
                                     const float* rstd, const float* g, int D, int i, float* dx) {
  const float* dyr = dy + static_cast<size_t>(i) * D;
  const float* xr = x + static_cast<size_t>(i) * D;
  float* dxr = dx + static_cast<size_t>(i) * D;
  float mean_dxhat = 0.0f;
  float mean_dxhat_xhat = 0.0f;
  for (int d = 0; d < D; ++d) {
    const float xhat = (xr[d] - mean[i]) * rstd[i];
    const float dxhat = dyr[d] * g[d];
    mean_dxhat += dxhat;
    mean_dxhat_xhat += dxhat * xhat;
  }
  mean_dxhat /= static_cast<float>(D);
  mean_dxhat_xhat /= static_cast<float>(D);
  for (int d = 0; d < D; ++d) {
    const float xhat = (xr[d] - mean[i]) * rstd[i];
    const float dxhat = dyr[d] * g[d];
    dxr[d] = rstd[i] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
  }
}
// dg[d] and db[d]: over the rows in row order.
MT_HD inline void layernorm_grad_param_at(const float* dy, const float* x, const float* mean,
                                          const float* rstd, int M, int D, int d, float* dg,
                                          float* db) {
  float acc_g = 0.0f, acc_b = 0.0f;
  for (int i = 0; i < M; ++i) {
    const size_t at = static_cast<size_t>(i) * D + d;
    const float xhat = (x[at] - mean[i]) * rstd[i];
    acc_g += dy[at] * xhat;
    acc_b += dy[at];
  }
  dg[d] = acc_g;
  db[d] = acc_b;
}

// ---- GEMMs: y[M,N] = x[M,K] w[K,N] (+ b), K in index order ----

MT_HD inline float gemm_at(const float* x, const float* w, const float* b, int K, int N, int i,
                           int j) {
  float acc = b != nullptr ? b[j] : 0.0f;
  const float* xr = x + static_cast<size_t>(i) * K;
  for (int k = 0; k < K; ++k) acc += xr[k] * w[static_cast<size_t>(k) * N + j];
  return acc;
}
// dx[i, k] = sum_j dy[i, j] w[k, j]
MT_HD inline float gemm_dx_at(const float* dy, const float* w, int K, int N, int i, int k) {
  (void)K;
  const float* dyr = dy + static_cast<size_t>(i) * N;
  const float* wr = w + static_cast<size_t>(k) * N;
  float acc = 0.0f;
  for (int j = 0; j < N; ++j) acc += dyr[j] * wr[j];
  return acc;
}
// dw[k, j] = sum_i x[i, k] dy[i, j], rows in order
MT_HD inline float gemm_dw_at(const float* x, const float* dy, int M, int K, int N, int k, int j) {
  float acc = 0.0f;
  for (int i = 0; i < M; ++i)
    acc += x[static_cast<size_t>(i) * K + k] * dy[static_cast<size_t>(i) * N + j];
  return acc;
}
MT_HD inline float bias_grad_at(const float* dy, int M, int N, int j) {
  float acc = 0.0f;
  for (int i = 0; i < M; ++i) acc += dy[static_cast<size_t>(i) * N + j];
  return acc;
}

// ---- attention: qkv [B*T, 3D] = q | k | v, head h at columns h*hd ----

struct Heads {
  int B, T, H, D, hd;
  MT_HD size_t q(int b, int t, int h) const {
    return (static_cast<size_t>(b) * T + t) * 3 * D + static_cast<size_t>(h) * hd;
  }
  MT_HD size_t k(int b, int t, int h) const { return q(b, t, h) + D; }
  MT_HD size_t v(int b, int t, int h) const { return q(b, t, h) + 2 * static_cast<size_t>(D); }
  MT_HD size_t row(int b, int h, int t) const {
    return ((static_cast<size_t>(b) * H + h) * T + t) * T;
  }
  MT_HD size_t out(int b, int t, int h) const {
    return (static_cast<size_t>(b) * T + t) * D + static_cast<size_t>(h) * hd;
  }
};
MT_HD inline Heads heads(int B, int T, int H, int D) { return {B, T, H, D, D / H}; }
MT_HD inline float attn_scale(const Heads& ix) { return 1.0f / sqrtf(static_cast<float>(ix.hd)); }

// scores[b, h, t, u]
MT_HD inline float attn_scores_at(const float* qkv, const Heads& ix, int b, int h, int t, int u) {
  if (u > t) return 0.0f;
  const float* q = qkv + ix.q(b, t, h);
  const float* k = qkv + ix.k(b, u, h);
  float acc = 0.0f;
  for (int e = 0; e < ix.hd; ++e) acc += q[e] * k[e];
  return acc * attn_scale(ix);
}
MT_HD inline void softmax_causal_row(const float* scores, int T, int r, float* probs) {
  const int t = r % T;
  const float* s = scores + static_cast<size_t>(r) * T;
  float* p = probs + static_cast<size_t>(r) * T;
  float mx = s[0];
  for (int u = 1; u <= t; ++u) mx = max_of(mx, s[u]);
  float sum = 0.0f;
  for (int u = 0; u <= t; ++u) {
    p[u] = expf(s[u] - mx);
    sum += p[u];
  }
  const float inv = 1.0f / sum;
  for (int u = 0; u <= t; ++u) p[u] *= inv;
  for (int u = t + 1; u < T; ++u) p[u] = 0.0f;
}
// out[b, t, h*hd + e]
MT_HD inline float attn_values_at(const float* probs, const float* qkv, const Heads& ix, int b,
                                  int t, int h, int e) {
  const float* p = probs + ix.row(b, h, t);
  float acc = 0.0f;
  for (int u = 0; u <= t; ++u) acc += p[u] * qkv[ix.v(b, u, h) + e];
  return acc;
}
// d_probs[b, h, t, u]
MT_HD inline float attn_values_grad_probs_at(const float* d_out, const float* qkv, const Heads& ix,
                                             int b, int h, int t, int u) {
  if (u > t) return 0.0f;
  const float* dout = d_out + ix.out(b, t, h);
  const float* v = qkv + ix.v(b, u, h);
  float acc = 0.0f;
  for (int e = 0; e < ix.hd; ++e) acc += dout[e] * v[e];
  return acc;
}
// The v part of d_qkv at (b, u, h, e): the queries t >= u, in t order.
MT_HD inline float attn_values_grad_v_at(const float* d_out, const float* probs, const Heads& ix,
                                         int b, int u, int h, int e) {
  float acc = 0.0f;
  for (int t = u; t < ix.T; ++t) acc += probs[ix.row(b, h, t) + u] * d_out[ix.out(b, t, h) + e];
  return acc;
}
MT_HD inline void softmax_grad_row(const float* probs, const float* d_probs, int T, int r,
                                   float* d_scores) {
  const int t = r % T;
  const float* p = probs + static_cast<size_t>(r) * T;
  const float* dp = d_probs + static_cast<size_t>(r) * T;
  float* ds = d_scores + static_cast<size_t>(r) * T;
  float dot = 0.0f;
  for (int u = 0; u <= t; ++u) dot += p[u] * dp[u];
  for (int u = 0; u <= t; ++u) ds[u] = p[u] * (dp[u] - dot);
  for (int u = t + 1; u < T; ++u) ds[u] = 0.0f;
}
// The q part of d_qkv at (b, t, h, e): keys u <= t in order.
MT_HD inline float attn_scores_grad_q_at(const float* d_scores, const float* qkv, const Heads& ix,
                                         int b, int t, int h, int e) {
  const float* ds = d_scores + ix.row(b, h, t);
  float acc = 0.0f;
  for (int u = 0; u <= t; ++u) acc += (ds[u] * attn_scale(ix)) * qkv[ix.k(b, u, h) + e];
  return acc;
}
// The k part of d_qkv at (b, u, h, e): queries t >= u in order.
MT_HD inline float attn_scores_grad_k_at(const float* d_scores, const float* qkv, const Heads& ix,
                                         int b, int u, int h, int e) {
  float acc = 0.0f;
  for (int t = u; t < ix.T; ++t)
    acc += (d_scores[ix.row(b, h, t) + u] * attn_scale(ix)) * qkv[ix.q(b, t, h) + e];
  return acc;
}

// ---- elementwise ----

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)

MT_HD inline float gelu_at(float v) {
  return 0.5f * v * (1.0f + tanhf(kGeluC * (v + 0.044715f * v * v * v)));
}
MT_HD inline float gelu_grad_at(float dy, float v) {
  const float th = tanhf(kGeluC * (v + 0.044715f * v * v * v));
  const float dth = (1.0f - th * th) * kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
  return dy * (0.5f * (1.0f + th) + 0.5f * v * dth);
}

// ---- cross-entropy ----

MT_HD inline float token_loss_row(const float* logits, const std::int32_t* targets, int V, int i) {
  const float* row = logits + static_cast<size_t>(i) * V;
  float mx = row[0];
  for (int j = 1; j < V; ++j) mx = max_of(mx, row[j]);
  float sum = 0.0f;
  for (int j = 0; j < V; ++j) sum += expf(row[j] - mx);
  return logf(sum) + mx - row[targets[i]];
}
// The mean of the token losses, added in token order.
MT_HD inline float mean_loss(const float* token_losses, int M) {
  float total = 0.0f;
  for (int i = 0; i < M; ++i) total += token_losses[i];
  return total / static_cast<float>(M);
}
MT_HD inline void cross_entropy_grad_row(const float* logits, const std::int32_t* targets, int M,
                                         int V, int i, float* dlogits) {
  const float inv_m = 1.0f / static_cast<float>(M);
  const float* row = logits + static_cast<size_t>(i) * V;
  float* d = dlogits + static_cast<size_t>(i) * V;
  float mx = row[0];
  for (int j = 1; j < V; ++j) mx = max_of(mx, row[j]);
  float sum = 0.0f;
  for (int j = 0; j < V; ++j) {
    d[j] = expf(row[j] - mx);
    sum += d[j];
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j < V; ++j) d[j] = d[j] * inv * inv_m;
  d[targets[i]] -= inv_m;
}

// ---- optimizer ----

MT_HD inline float sum_of_squares(const float* x, size_t n) {
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) acc += x[i] * x[i];
  return acc;
}

// What an AdamW step computes once (on the host, with the CPU's pow).
struct AdamWConstants {
  float lr, beta1, beta2, eps, weight_decay, clip, bc1, bc2;
};
// As kernels::adamw computes them for the step after `step` steps.
inline AdamWConstants adamw_constants(float lr, float beta1, float beta2, float eps,
                                      float weight_decay, float clip, int warmup,
                                      std::int64_t step) {
  const float t = static_cast<float>(step + 1);
  const float ramp = t / static_cast<float>(warmup);
  return {lr * (ramp < 1.0f ? ramp : 1.0f),
          beta1,
          beta2,
          eps,
          weight_decay,
          clip,
          1.0f - std::pow(beta1, t),
          1.0f - std::pow(beta2, t)};
}
MT_HD inline void adamw_at(const AdamWConstants& c, float* params, const float* grads, float* m,
                           float* v, size_t i, bool decay, float grad_norm) {
  const float scale = grad_norm > c.clip ? c.clip / grad_norm : 1.0f;
  const float g = grads[i] * scale;
  m[i] = c.beta1 * m[i] + (1.0f - c.beta1) * g;
  v[i] = c.beta2 * v[i] + (1.0f - c.beta2) * g * g;
  const float mhat = m[i] / c.bc1;
  const float vhat = v[i] / c.bc2;
  float p = params[i];
  if (decay) p -= c.lr * c.weight_decay * p;
  params[i] = p - c.lr * mhat / (sqrtf(vhat) + c.eps);
}

// ---- planted variants ----

// splitk: K in (up to) eight chunks of this size.
MT_HD inline int splitk_chunk(int K) { return (K + 7) / 8 > 1 ? (K + 7) / 8 : 1; }
MT_HD inline int splitk_chunks(int K) { return (K + splitk_chunk(K) - 1) / splitk_chunk(K); }
// Chunk c's partial product at (i, j).
MT_HD inline float gemm_splitk_partial_at(const float* x, const float* w, int K, int N, int i,
                                          int j, int c) {
  const int chunk = splitk_chunk(K);
  const int end = (c + 1) * chunk < K ? (c + 1) * chunk : K;
  float acc = 0.0f;
  for (int k = c * chunk; k < end; ++k)
    acc += x[static_cast<size_t>(i) * K + k] * w[static_cast<size_t>(k) * N + j];
  return acc;
}
// autotune's second configuration: even and odd k summed apart, then together.
MT_HD inline float gemm_interleaved_at(const float* x, const float* w, const float* b, int K, int N,
                                       int i, int j) {
  float even = 0.0f, odd = 0.0f;
  const float* xr = x + static_cast<size_t>(i) * K;
  for (int k = 0; k < K; ++k) {
    const float term = xr[k] * w[static_cast<size_t>(k) * N + j];
    if (k % 2 == 0) {
      even += term;
    } else {
      odd += term;
    }
  }
  return (b != nullptr ? b[j] : 0.0f) + (even + odd);
}
// uninit-pad: rows padded to a tile of 48, always at least one tail row.
constexpr int kPadTile = 48;
MT_HD inline int padded_rows(int M) { return (M / kPadTile + 1) * kPadTile; }

// fused-ce: one vocabulary chunk's max and sum of exp, and the online-softmax
// merge of a chunk into the running (max, sum).
constexpr int kCeChunk = 32;
MT_HD inline void ce_chunk_stats(const float* row, int V, int c, float* chunk_max,
                                 float* chunk_sum) {
  const int begin = c * kCeChunk;
  const int end = (c + 1) * kCeChunk < V ? (c + 1) * kCeChunk : V;
  float mx = row[begin];
  for (int j = begin + 1; j < end; ++j) mx = max_of(mx, row[j]);
  float sum = 0.0f;
  for (int j = begin; j < end; ++j) sum += expf(row[j] - mx);
  *chunk_max = mx;
  *chunk_sum = sum;
}
MT_HD inline void ce_merge(float* running_max, float* running_sum, float chunk_max,
                           float chunk_sum) {
  const float new_max = max_of(*running_max, chunk_max);
  *running_sum =
      *running_sum * expf(*running_max - new_max) + chunk_sum * expf(chunk_max - new_max);
  *running_max = new_max;
}

// ---- whole ops: extents and thread mapping ----
//
// Each op below is the GPU kernel sequence of one minitrain op, written against
// an executor: `run(n, f)` calls f(i) for every i in [0, n), in any order and
// concurrently (a launch of n threads on the device, a plain loop in the CPU
// test); `run.spread(n, f)` the same with one thread per block, for atomics
// that must race across SMs. Launches of one op follow each other (one stream).
// So the CPU test runs the very index arithmetic the kernels run.

// atomicAdd on the device; a plain += on the host (a sequential executor).
MT_HD inline void add_to(float* at, float value) {
#if defined(__CUDA_ARCH__)
  atomicAdd(at, value);
#else
  *at += value;
#endif
}

template <class Run>
void embedding(Run& run, const std::int32_t* tokens, const float* tok_emb, const float* pos_emb,
               int B, int T, int D, float* x) {
  run(static_cast<size_t>(B) * T * D,
      [=] MT_HD(size_t i) { x[i] = embedding_at(tokens, tok_emb, pos_emb, T, D, i); });
}
template <class Run>
void embedding_grad(Run& run, const float* dx, const std::int32_t* tokens, int B, int T, int D,
                    int V, float* d_tok_emb, float* d_pos_emb) {
  const size_t tok_n = static_cast<size_t>(V) * D;
  run(tok_n + static_cast<size_t>(T) * D, [=] MT_HD(size_t i) {
    if (i < tok_n) {
      d_tok_emb[i] = embedding_grad_tok_at(dx, tokens, B * T, D, static_cast<int>(i / D),
                                           static_cast<int>(i % D));
    } else {
      const size_t j = i - tok_n;
      d_pos_emb[j] =
          embedding_grad_pos_at(dx, B, T, D, static_cast<int>(j / D), static_cast<int>(j % D));
    }
  });
}
template <class Run>
void layernorm(Run& run, const float* x, const float* g, const float* b, int M, int D, float* y,
               float* mean, float* rstd) {
  run(static_cast<size_t>(M),
      [=] MT_HD(size_t i) { layernorm_row(x, g, b, D, static_cast<int>(i), y, mean, rstd); });
}
// Rows' dx, then (the same launch) one thread per column for dg and db.
template <class Run>
void layernorm_grad(Run& run, const float* dy, const float* x, const float* mean, const float* rstd,
                    const float* g, int M, int D, float* dx, float* dg, float* db) {
  run(static_cast<size_t>(M) + D, [=] MT_HD(size_t i) {
    if (i < static_cast<size_t>(M)) {
      layernorm_grad_row(dy, x, mean, rstd, g, D, static_cast<int>(i), dx);
    } else {
      layernorm_grad_param_at(dy, x, mean, rstd, M, D, static_cast<int>(i - M), dg, db);
    }
  });
}
// config 0: K in order; 1: autotune's interleaved configuration.
template <class Run>
void gemm(Run& run, const float* x, const float* w, const float* b, int M, int K, int N, float* y,
          int config = 0) {
  run(static_cast<size_t>(M) * N, [=] MT_HD(size_t i) {
    const int r = static_cast<int>(i / N), c = static_cast<int>(i % N);
    y[i] = config == 0 ? gemm_at(x, w, b, K, N, r, c) : gemm_interleaved_at(x, w, b, K, N, r, c);
  });
}
template <class Run>
void gemm_dx(Run& run, const float* dy, const float* w, int M, int K, int N, float* dx) {
  run(static_cast<size_t>(M) * K, [=] MT_HD(size_t i) {
    dx[i] = gemm_dx_at(dy, w, K, N, static_cast<int>(i / K), static_cast<int>(i % K));
  });
}
template <class Run>
void gemm_dw(Run& run, const float* x, const float* dy, int M, int K, int N, float* dw) {
  run(static_cast<size_t>(K) * N, [=] MT_HD(size_t i) {
    dw[i] = gemm_dw_at(x, dy, M, K, N, static_cast<int>(i / N), static_cast<int>(i % N));
  });
}
template <class Run>
void bias_grad(Run& run, const float* dy, int M, int N, float* db) {
  run(static_cast<size_t>(N),
      [=] MT_HD(size_t j) { db[j] = bias_grad_at(dy, M, N, static_cast<int>(j)); });
}

// (b, h, t, u) of the [B, H, T, T] layout from its flat index.
struct ScoreIndex {
  int b, h, t, u;
};
MT_HD inline ScoreIndex score_index(const Heads& ix, size_t i) {
  const size_t TT = static_cast<size_t>(ix.T) * ix.T;
  return {static_cast<int>(i / (TT * ix.H)), static_cast<int>(i / TT % ix.H),
          static_cast<int>(i / ix.T % ix.T), static_cast<int>(i % ix.T)};
}
template <class Run>
void attn_scores(Run& run, const float* qkv, int B, int T, int H, int D, float* scores) {
  const Heads ix = heads(B, T, H, D);
  run(static_cast<size_t>(B) * H * T * T, [=] MT_HD(size_t i) {
    const ScoreIndex s = score_index(ix, i);
    scores[i] = attn_scores_at(qkv, ix, s.b, s.h, s.t, s.u);
  });
}
template <class Run>
void softmax_causal(Run& run, const float* scores, int rows, int T, float* probs) {
  run(static_cast<size_t>(rows),
      [=] MT_HD(size_t r) { softmax_causal_row(scores, T, static_cast<int>(r), probs); });
}
template <class Run>
void attn_values(Run& run, const float* probs, const float* qkv, int B, int T, int H, int D,
                 float* out) {
  const Heads ix = heads(B, T, H, D);
  run(static_cast<size_t>(B) * T * D, [=] MT_HD(size_t i) {
    const int col = static_cast<int>(i % ix.D);
    const size_t row = i / ix.D;
    out[i] = attn_values_at(probs, qkv, ix, static_cast<int>(row / ix.T),
                            static_cast<int>(row % ix.T), col / ix.hd, col % ix.hd);
  });
}
// d_probs; then d_qkv: q and k parts 0, the v part from the probabilities.
template <class Run>
void attn_values_grad(Run& run, const float* d_out, const float* probs, const float* qkv, int B,
                      int T, int H, int D, float* d_probs, float* d_qkv) {
  const Heads ix = heads(B, T, H, D);
  run(static_cast<size_t>(B) * H * T * T, [=] MT_HD(size_t i) {
    const ScoreIndex s = score_index(ix, i);
    d_probs[i] = attn_values_grad_probs_at(d_out, qkv, ix, s.b, s.h, s.t, s.u);
  });
  run(static_cast<size_t>(B) * T * 3 * D, [=] MT_HD(size_t i) {
    const size_t width = 3 * static_cast<size_t>(ix.D);
    const int col = static_cast<int>(i % width);
    const size_t row = i / width;
    if (col < 2 * ix.D) {
      d_qkv[i] = 0.0f;
      return;
    }
    const int c = col - 2 * ix.D;
    d_qkv[i] = attn_values_grad_v_at(d_out, probs, ix, static_cast<int>(row / ix.T),
                                     static_cast<int>(row % ix.T), c / ix.hd, c % ix.hd);
  });
}
template <class Run>
void softmax_grad(Run& run, const float* probs, const float* d_probs, int rows, int T,
                  float* d_scores) {
  run(static_cast<size_t>(rows),
      [=] MT_HD(size_t r) { softmax_grad_row(probs, d_probs, T, static_cast<int>(r), d_scores); });
}
// The q and k parts of d_qkv; the v part is left as it is.
template <class Run>
void attn_scores_grad(Run& run, const float* d_scores, const float* qkv, int B, int T, int H, int D,
                      float* d_qkv) {
  const Heads ix = heads(B, T, H, D);
  run(static_cast<size_t>(B) * T * 2 * D, [=] MT_HD(size_t i) {
    const size_t width = 2 * static_cast<size_t>(ix.D);
    const int col = static_cast<int>(i % width);
    const size_t row = i / width;
    const int b = static_cast<int>(row / ix.T), t = static_cast<int>(row % ix.T);
    const int c = col % ix.D;
    d_qkv[row * 3 * ix.D + col] =
        col < ix.D ? attn_scores_grad_q_at(d_scores, qkv, ix, b, t, c / ix.hd, c % ix.hd)
                   : attn_scores_grad_k_at(d_scores, qkv, ix, b, t, c / ix.hd, c % ix.hd);
  });
}
template <class Run>
void gelu(Run& run, const float* x, size_t n, float* y) {
  run(n, [=] MT_HD(size_t i) { y[i] = gelu_at(x[i]); });
}
template <class Run>
void gelu_grad(Run& run, const float* dy, const float* x, size_t n, float* dx) {
  run(n, [=] MT_HD(size_t i) { dx[i] = gelu_grad_at(dy[i], x[i]); });
}
template <class Run>
void multiply(Run& run, const float* a, const float* b, size_t n, float* y) {
  run(n, [=] MT_HD(size_t i) { y[i] = a[i] * b[i]; });
}
template <class Run>
void add(Run& run, const float* a, const float* b, size_t n, float* y) {
  run(n, [=] MT_HD(size_t i) { y[i] = a[i] + b[i]; });
}
template <class Run>
void scale(Run& run, float* x, size_t n, float factor) {
  run(n, [=] MT_HD(size_t i) { x[i] *= factor; });
}
template <class Run>
void copy(Run& run, const float* in, size_t n, float* out) {
  run(n, [=] MT_HD(size_t i) { out[i] = in[i]; });
}
// Token losses, then one thread for their mean in token order (not a tree).
template <class Run>
void cross_entropy(Run& run, const float* logits, const std::int32_t* targets, int M, int V,
                   float* token_losses, float* loss) {
  run(static_cast<size_t>(M), [=] MT_HD(size_t i) {
    token_losses[i] = token_loss_row(logits, targets, V, static_cast<int>(i));
  });
  run(size_t{1}, [=] MT_HD(size_t) { *loss = mean_loss(token_losses, M); });
}
template <class Run>
void cross_entropy_grad(Run& run, const float* logits, const std::int32_t* targets, int M, int V,
                        float* dlogits) {
  run(static_cast<size_t>(M), [=] MT_HD(size_t i) {
    cross_entropy_grad_row(logits, targets, M, V, static_cast<int>(i), dlogits);
  });
}
// The gradient norm in a fixed order that a GPU can run in parallel: chunks
// of kNormChunk elements summed in index order, one thread each, then the
// chunks' sums in chunk order by one thread. (The CPU's single running sum
// would be one thread over millions of elements; this order differs from it,
// so grad_norm is the one op whose GPU bits are not the CPU's by design.)
constexpr size_t kNormChunk = 1024;
MT_HD inline size_t norm_chunks(size_t n) { return (n + kNormChunk - 1) / kNormChunk; }
MT_HD inline float sum_of_squares_chunk(const float* x, size_t n, size_t c) {
  const size_t end = (c + 1) * kNormChunk < n ? (c + 1) * kNormChunk : n;
  float acc = 0.0f;
  for (size_t i = c * kNormChunk; i < end; ++i) acc += x[i] * x[i];
  return acc;
}
// `partials` holds norm_chunks(n) floats.
template <class Run>
void grad_norm(Run& run, const float* grads, size_t n, float* partials, float* norm) {
  const size_t chunks = norm_chunks(n);
  run(chunks, [=] MT_HD(size_t c) { partials[c] = sum_of_squares_chunk(grads, n, c); });
  run(size_t{1}, [=] MT_HD(size_t) {
    float acc = 0.0f;
    for (size_t c = 0; c < chunks; ++c) acc += partials[c];
    *norm = sqrtf(acc);
  });
}
template <class Run>
void adamw(Run& run, const AdamWConstants& c, float* params, const float* grads, float* m, float* v,
           size_t begin, size_t end, bool decay, const float* grad_norm) {
  run(end - begin,
      [=] MT_HD(size_t i) { adamw_at(c, params, grads, m, v, begin + i, decay, *grad_norm); });
}

// ---- planted ops ----

// y = b, then every (chunk, output) partial added atomically: the chunks of an
// output race. Sequentially: chunk order 0, 1, ... after the bias.
template <class Run>
void gemm_splitk_atomic(Run& run, const float* x, const float* w, const float* b, int M, int K,
                        int N, float* y) {
  const size_t outputs = static_cast<size_t>(M) * N;
  run(outputs, [=] MT_HD(size_t i) { y[i] = b != nullptr ? b[i % N] : 0.0f; });
  run(outputs * splitk_chunks(K), [=] MT_HD(size_t i) {
    const int c = static_cast<int>(i / outputs);
    const size_t o = i % outputs;
    add_to(&y[o],
           gemm_splitk_partial_at(x, w, K, N, static_cast<int>(o / N), static_cast<int>(o % N), c));
  });
}
// db = 0, then every element of dy added atomically to its column.
template <class Run>
void bias_grad_atomic(Run& run, const float* dy, int M, int N, float* db) {
  run(static_cast<size_t>(N), [=] MT_HD(size_t j) { db[j] = 0.0f; });
  run(static_cast<size_t>(M) * N, [=] MT_HD(size_t i) { add_to(&db[i % N], dy[i]); });
}
// Token losses as the ordered op; their sum added atomically, one token per
// block (lanes of one warp would add in a fixed order), then divided by M.
template <class Run>
void cross_entropy_atomic(Run& run, const float* logits, const std::int32_t* targets, int M, int V,
                          float* token_losses, float* loss) {
  run(size_t{1}, [=] MT_HD(size_t) { *loss = 0.0f; });
  run.spread(static_cast<size_t>(M), [=] MT_HD(size_t i) {
    const float value = token_loss_row(logits, targets, V, static_cast<int>(i));
    token_losses[i] = value;
    add_to(loss, value);
  });
  run(size_t{1}, [=] MT_HD(size_t) { *loss = *loss / static_cast<float>(M); });
}

}  // namespace minitrain::ops
