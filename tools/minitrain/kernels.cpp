#include "kernels.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace minitrain::kernels {

void embedding(const std::int32_t* tokens, const float* tok_emb, const float* pos_emb, int B, int T,
               int D, float* x) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const float* te = tok_emb + static_cast<std::size_t>(tokens[b * T + t]) * D;
      const float* pe = pos_emb + static_cast<std::size_t>(t) * D;
      float* row = x + static_cast<std::size_t>(b * T + t) * D;
      for (int d = 0; d < D; ++d) row[d] = te[d] + pe[d];
    }
  }
}

void embedding_grad(const float* dx, const std::int32_t* tokens, int B, int T, int D, int V,
                    float* d_tok_emb, float* d_pos_emb) {
  std::fill(d_tok_emb, d_tok_emb + static_cast<std::size_t>(V) * D, 0.0f);
  std::fill(d_pos_emb, d_pos_emb + static_cast<std::size_t>(T) * D, 0.0f);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const float* row = dx + static_cast<std::size_t>(b * T + t) * D;
      float* te = d_tok_emb + static_cast<std::size_t>(tokens[b * T + t]) * D;
      float* pe = d_pos_emb + static_cast<std::size_t>(t) * D;
      for (int d = 0; d < D; ++d) {
        te[d] += row[d];
        pe[d] += row[d];
      }
    }
  }
}

void layernorm(const float* x, const float* g, const float* b, int M, int D, float* y, float* mean,
               float* rstd) {
  for (int i = 0; i < M; ++i) {
    const float* row = x + static_cast<std::size_t>(i) * D;
    float sum = 0.0f;
    for (int d = 0; d < D; ++d) sum += row[d];
    const float mu = sum / static_cast<float>(D);
    float var = 0.0f;
    for (int d = 0; d < D; ++d) var += (row[d] - mu) * (row[d] - mu);
    const float rs = 1.0f / std::sqrt(var / static_cast<float>(D) + 1e-5f);
    float* out = y + static_cast<std::size_t>(i) * D;
    for (int d = 0; d < D; ++d) out[d] = (row[d] - mu) * rs * g[d] + b[d];
    mean[i] = mu;
    rstd[i] = rs;
  }
}

void layernorm_grad(const float* dy, const float* x, const float* mean, const float* rstd,
                    const float* g, int M, int D, float* dx, float* dg, float* db) {
  std::fill(dg, dg + D, 0.0f);
  std::fill(db, db + D, 0.0f);
  for (int i = 0; i < M; ++i) {
    const float* dyr = dy + static_cast<std::size_t>(i) * D;
    const float* xr = x + static_cast<std::size_t>(i) * D;
    float* dxr = dx + static_cast<std::size_t>(i) * D;
    float mean_dxhat = 0.0f;
    float mean_dxhat_xhat = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float xhat = (xr[d] - mean[i]) * rstd[i];
      const float dxhat = dyr[d] * g[d];
      dg[d] += dyr[d] * xhat;
      db[d] += dyr[d];
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
}

void gemm(const float* x, const float* w, const float* b, int M, int K, int N, float* y) {
  for (int i = 0; i < M; ++i) {
    float* out = y + static_cast<std::size_t>(i) * N;
    if (b != nullptr) {
      std::copy(b, b + N, out);
    } else {
      std::fill(out, out + N, 0.0f);
    }
    const float* xr = x + static_cast<std::size_t>(i) * K;
    for (int k = 0; k < K; ++k) {
      const float xk = xr[k];
      const float* wr = w + static_cast<std::size_t>(k) * N;
      for (int j = 0; j < N; ++j) out[j] += xk * wr[j];
    }
  }
}

void gemm_dx(const float* dy, const float* w, int M, int K, int N, float* dx) {
  for (int i = 0; i < M; ++i) {
    const float* dyr = dy + static_cast<std::size_t>(i) * N;
    for (int k = 0; k < K; ++k) {
      const float* wr = w + static_cast<std::size_t>(k) * N;
      float acc = 0.0f;
      for (int j = 0; j < N; ++j) acc += dyr[j] * wr[j];
      dx[static_cast<std::size_t>(i) * K + k] = acc;
    }
  }
}

void gemm_dw(const float* x, const float* dy, int M, int K, int N, float* dw) {
  std::fill(dw, dw + static_cast<std::size_t>(K) * N, 0.0f);
  for (int i = 0; i < M; ++i) {
    const float* xr = x + static_cast<std::size_t>(i) * K;
    const float* dyr = dy + static_cast<std::size_t>(i) * N;
    for (int k = 0; k < K; ++k) {
      const float xk = xr[k];
      float* out = dw + static_cast<std::size_t>(k) * N;
      for (int j = 0; j < N; ++j) out[j] += xk * dyr[j];
    }
  }
}

void bias_grad(const float* dy, int M, int N, float* db) {
  std::fill(db, db + N, 0.0f);
  for (int i = 0; i < M; ++i) {
    const float* row = dy + static_cast<std::size_t>(i) * N;
    for (int j = 0; j < N; ++j) db[j] += row[j];
  }
}

namespace {

struct Heads {
  int B, T, H, D, hd;
  std::size_t q(int b, int t, int h) const {
    return (static_cast<std::size_t>(b) * T + t) * 3 * D + h * hd;
  }
  std::size_t k(int b, int t, int h) const { return q(b, t, h) + D; }
  std::size_t v(int b, int t, int h) const { return q(b, t, h) + 2 * D; }
  std::size_t row(int b, int h, int t) const {
    return ((static_cast<std::size_t>(b) * H + h) * T + t) * T;
  }
  std::size_t out(int b, int t, int h) const {
    return (static_cast<std::size_t>(b) * T + t) * D + h * hd;
  }
};

}  // namespace

void attn_scores(const float* qkv, int B, int T, int H, int D, float* scores) {
  const Heads ix{B, T, H, D, D / H};
  const float scale = 1.0f / std::sqrt(static_cast<float>(ix.hd));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        float* row = scores + ix.row(b, h, t);
        const float* q = qkv + ix.q(b, t, h);
        for (int u = 0; u < T; ++u) {
          if (u > t) {
            row[u] = 0.0f;
            continue;
          }
          const float* k = qkv + ix.k(b, u, h);
          float acc = 0.0f;
          for (int e = 0; e < ix.hd; ++e) acc += q[e] * k[e];
          row[u] = acc * scale;
        }
      }
}

void softmax_causal(const float* scores, int rows, int T, float* probs) {
  for (int r = 0; r < rows; ++r) {
    const int t = r % T;
    const float* s = scores + static_cast<std::size_t>(r) * T;
    float* p = probs + static_cast<std::size_t>(r) * T;
    float mx = s[0];
    for (int u = 1; u <= t; ++u) mx = std::max(mx, s[u]);
    float sum = 0.0f;
    for (int u = 0; u <= t; ++u) {
      p[u] = std::exp(s[u] - mx);
      sum += p[u];
    }
    const float inv = 1.0f / sum;
    for (int u = 0; u <= t; ++u) p[u] *= inv;
    for (int u = t + 1; u < T; ++u) p[u] = 0.0f;
  }
}

void attn_values(const float* probs, const float* qkv, int B, int T, int H, int D, float* out) {
  const Heads ix{B, T, H, D, D / H};
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        float* o = out + ix.out(b, t, h);
        std::fill(o, o + ix.hd, 0.0f);
        const float* p = probs + ix.row(b, h, t);
        for (int u = 0; u <= t; ++u) {
          const float* v = qkv + ix.v(b, u, h);
          for (int e = 0; e < ix.hd; ++e) o[e] += p[u] * v[e];
        }
      }
}

void attn_values_grad(const float* d_out, const float* probs, const float* qkv, int B, int T, int H,
                      int D, float* d_probs, float* d_qkv) {
  const Heads ix{B, T, H, D, D / H};
  std::fill(d_qkv, d_qkv + static_cast<std::size_t>(B) * T * 3 * D, 0.0f);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        const float* dout = d_out + ix.out(b, t, h);
        const float* p = probs + ix.row(b, h, t);
        float* dp = d_probs + ix.row(b, h, t);
        for (int u = 0; u < T; ++u) {
          if (u > t) {
            dp[u] = 0.0f;
            continue;
          }
          const float* v = qkv + ix.v(b, u, h);
          float* dv = d_qkv + ix.v(b, u, h);
          float acc = 0.0f;
          for (int e = 0; e < ix.hd; ++e) {
            acc += dout[e] * v[e];
            dv[e] += p[u] * dout[e];
          }
          dp[u] = acc;
        }
      }
}

void softmax_grad(const float* probs, const float* d_probs, int rows, int T, float* d_scores) {
  for (int r = 0; r < rows; ++r) {
    const int t = r % T;
    const float* p = probs + static_cast<std::size_t>(r) * T;
    const float* dp = d_probs + static_cast<std::size_t>(r) * T;
    float* ds = d_scores + static_cast<std::size_t>(r) * T;
    float dot = 0.0f;
    for (int u = 0; u <= t; ++u) dot += p[u] * dp[u];
    for (int u = 0; u <= t; ++u) ds[u] = p[u] * (dp[u] - dot);
    for (int u = t + 1; u < T; ++u) ds[u] = 0.0f;
  }
}

void attn_scores_grad(const float* d_scores, const float* qkv, int B, int T, int H, int D,
                      float* d_qkv) {
  const Heads ix{B, T, H, D, D / H};
  const float scale = 1.0f / std::sqrt(static_cast<float>(ix.hd));
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        std::fill(d_qkv + ix.q(b, t, h), d_qkv + ix.q(b, t, h) + ix.hd, 0.0f);
        std::fill(d_qkv + ix.k(b, t, h), d_qkv + ix.k(b, t, h) + ix.hd, 0.0f);
      }
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        const float* ds = d_scores + ix.row(b, h, t);
        const float* q = qkv + ix.q(b, t, h);
        float* dq = d_qkv + ix.q(b, t, h);
        for (int u = 0; u <= t; ++u) {
          const float g = ds[u] * scale;
          const float* k = qkv + ix.k(b, u, h);
          float* dk = d_qkv + ix.k(b, u, h);
          for (int e = 0; e < ix.hd; ++e) {
            dq[e] += g * k[e];
            dk[e] += g * q[e];
          }
        }
      }
}

namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
}

void gelu(const float* x, std::size_t n, float* y) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kGeluC * (v + 0.044715f * v * v * v)));
  }
}

void gelu_grad(const float* dy, const float* x, std::size_t n, float* dx) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float th = std::tanh(kGeluC * (v + 0.044715f * v * v * v));
    const float dth = (1.0f - th * th) * kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * v * dth);
  }
}

void dropout(const float* x, std::size_t n, float p, Xoshiro& rng, float* y, float* mask) {
  dropout_mask(n, p, rng, mask);
  multiply(x, mask, n, y);
}

void multiply(const float* a, const float* b, std::size_t n, float* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void add(const float* a, const float* b, std::size_t n, float* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

namespace {

float token_loss(const float* row, int target, int V) {
  float mx = row[0];
  for (int j = 1; j < V; ++j) mx = std::max(mx, row[j]);
  float sum = 0.0f;
  for (int j = 0; j < V; ++j) sum += std::exp(row[j] - mx);
  return std::log(sum) + mx - row[target];
}

}  // namespace

float cross_entropy(const float* logits, const std::int32_t* targets, int M, int V,
                    float* token_losses) {
  float total = 0.0f;
  for (int i = 0; i < M; ++i) {
    token_losses[i] = token_loss(logits + static_cast<std::size_t>(i) * V, targets[i], V);
    total += token_losses[i];
  }
  return total / static_cast<float>(M);
}

void cross_entropy_grad(const float* logits, const std::int32_t* targets, int M, int V,
                        float* dlogits) {
  const float inv_m = 1.0f / static_cast<float>(M);
  for (int i = 0; i < M; ++i) {
    const float* row = logits + static_cast<std::size_t>(i) * V;
    float* d = dlogits + static_cast<std::size_t>(i) * V;
    float mx = row[0];
    for (int j = 1; j < V; ++j) mx = std::max(mx, row[j]);
    float sum = 0.0f;
    for (int j = 0; j < V; ++j) {
      d[j] = std::exp(row[j] - mx);
      sum += d[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < V; ++j) d[j] = d[j] * inv * inv_m;
    d[targets[i]] -= inv_m;
  }
}

float sum_of_squares(const float* x, std::size_t n) {
  float acc = 0.0f;
  for (std::size_t i = 0; i < n; ++i) acc += x[i] * x[i];
  return acc;
}

void adamw(const AdamW& hp, float* params, const float* grads, float* m, float* v,
           std::size_t begin, std::size_t end, bool decay, std::int64_t step, float grad_norm) {
  const float t = static_cast<float>(step + 1);
  const float lr = hp.lr * std::min(1.0f, t / static_cast<float>(hp.warmup));
  const float scale = grad_norm > hp.clip ? hp.clip / grad_norm : 1.0f;
  const float bc1 = 1.0f - std::pow(hp.beta1, t);
  const float bc2 = 1.0f - std::pow(hp.beta2, t);
  for (std::size_t i = begin; i < end; ++i) {
    const float g = grads[i] * scale;
    m[i] = hp.beta1 * m[i] + (1.0f - hp.beta1) * g;
    v[i] = hp.beta2 * v[i] + (1.0f - hp.beta2) * g * g;
    const float mhat = m[i] / bc1;
    const float vhat = v[i] / bc2;
    float p = params[i];
    if (decay) p -= lr * hp.weight_decay * p;
    params[i] = p - lr * mhat / (std::sqrt(vhat) + hp.eps);
  }
}

void gemm_splitk(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
                 Chaos& chaos) {
  // Eight partials at most sizes: enough that the order of their sum matters.
  const int kChunk = std::max(1, (K + 7) / 8);
  const int chunks = (K + kChunk - 1) / kChunk;
  std::vector<float> partial(static_cast<std::size_t>(chunks) * N);
  std::vector<int> order(chunks);
  for (int i = 0; i < M; ++i) {
    const float* xr = x + static_cast<std::size_t>(i) * K;
    std::fill(partial.begin(), partial.end(), 0.0f);
    for (int c = 0; c < chunks; ++c) {
      float* part = partial.data() + static_cast<std::size_t>(c) * N;
      for (int k = c * kChunk; k < std::min(K, (c + 1) * kChunk); ++k) {
        const float* wr = w + static_cast<std::size_t>(k) * N;
        for (int j = 0; j < N; ++j) part[j] += xr[k] * wr[j];
      }
    }
    std::iota(order.begin(), order.end(), 0);
    chaos.shuffle(std::span<int>(order));
    float* out = y + static_cast<std::size_t>(i) * N;
    for (int j = 0; j < N; ++j) out[j] = b != nullptr ? b[j] : 0.0f;
    for (int c : order) {
      const float* part = partial.data() + static_cast<std::size_t>(c) * N;
      for (int j = 0; j < N; ++j) out[j] += part[j];
    }
  }
}

void gemm_interleaved(const float* x, const float* w, const float* b, int M, int K, int N,
                      float* y) {
  std::vector<float> odd(N);
  for (int i = 0; i < M; ++i) {
    float* out = y + static_cast<std::size_t>(i) * N;
    std::fill(out, out + N, 0.0f);
    std::fill(odd.begin(), odd.end(), 0.0f);
    const float* xr = x + static_cast<std::size_t>(i) * K;
    for (int k = 0; k < K; ++k) {
      float* acc = (k % 2 == 0) ? out : odd.data();
      const float* wr = w + static_cast<std::size_t>(k) * N;
      for (int j = 0; j < N; ++j) acc[j] += xr[k] * wr[j];
    }
    for (int j = 0; j < N; ++j) out[j] = (b != nullptr ? b[j] : 0.0f) + (out[j] + odd[j]);
  }
}

void bias_grad_unordered(const float* dy, int M, int N, float* db, Chaos& chaos) {
  std::vector<int> rows(M);
  std::iota(rows.begin(), rows.end(), 0);
  chaos.shuffle(std::span<int>(rows));
  std::fill(db, db + N, 0.0f);
  for (int i : rows) {
    const float* row = dy + static_cast<std::size_t>(i) * N;
    for (int j = 0; j < N; ++j) db[j] += row[j];
  }
}

void bias_grad_padded(const float* dy, int M, int N, float* db, Chaos& chaos) {
  constexpr int kTile = 48;
  const int padded = (M / kTile + 1) * kTile;  // always at least one tail row
  std::vector<float> workspace(static_cast<std::size_t>(padded) * N);
  std::copy(dy, dy + static_cast<std::size_t>(M) * N, workspace.begin());
  // What a reused allocation holds: mostly stale activations, sometimes any bits.
  for (std::size_t i = static_cast<std::size_t>(M) * N; i < workspace.size(); ++i) {
    const std::uint64_t r = chaos.next();
    workspace[i] = (r & 3) == 0
                       ? std::bit_cast<float>(static_cast<std::uint32_t>(r >> 32))
                       : static_cast<float>(static_cast<std::int32_t>(r >> 32)) * 0x1.0p-31f;
  }
  std::fill(db, db + N, 0.0f);
  for (int i = 0; i < padded; ++i) {
    const float* row = workspace.data() + static_cast<std::size_t>(i) * N;
    for (int j = 0; j < N; ++j) db[j] += row[j];
  }
}

float cross_entropy_unordered(const float* logits, const std::int32_t* targets, int M, int V,
                              float* token_losses, Chaos& chaos) {
  // A fused kernel: each token's log-sum-exp is an online softmax over
  // vocabulary chunks taken in the order they arrive (each rescales the running
  // sum by its own max), then the token losses are summed in arrival order.
  constexpr int kChunk = 32;
  const int chunks = (V + kChunk - 1) / kChunk;
  std::vector<int> order(static_cast<std::size_t>(chunks));
  for (int i = 0; i < M; ++i) {
    const float* row = logits + static_cast<std::size_t>(i) * V;
    std::iota(order.begin(), order.end(), 0);
    chaos.shuffle(std::span<int>(order));
    float running_max = -std::numeric_limits<float>::infinity();
    float running_sum = 0.0f;
    for (int c : order) {
      const int begin = c * kChunk, end = std::min(V, (c + 1) * kChunk);
      float chunk_max = row[begin];
      for (int j = begin + 1; j < end; ++j) chunk_max = std::max(chunk_max, row[j]);
      float chunk_sum = 0.0f;
      for (int j = begin; j < end; ++j) chunk_sum += std::exp(row[j] - chunk_max);
      const float new_max = std::max(running_max, chunk_max);
      running_sum =
          running_sum * std::exp(running_max - new_max) + chunk_sum * std::exp(chunk_max - new_max);
      running_max = new_max;
    }
    token_losses[i] = std::log(running_sum) + running_max - row[targets[i]];
  }
  std::vector<int> rows(static_cast<std::size_t>(M));
  std::iota(rows.begin(), rows.end(), 0);
  chaos.shuffle(std::span<int>(rows));
  float total = 0.0f;
  for (int i : rows) total += token_losses[i];
  return total / static_cast<float>(M);
}

}  // namespace minitrain::kernels
