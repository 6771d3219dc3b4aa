#include "backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>

namespace minitrain {

namespace {

void* heap_allocate(std::size_t bytes) { return ::operator new(bytes); }
void heap_release(void* data) { ::operator delete(data); }

TensorMemory& memory() {
  static TensorMemory m{heap_allocate, heap_release};
  return m;
}

namespace k = kernels;

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  void embedding(const std::int32_t* tokens, const float* tok_emb, const float* pos_emb, int B,
                 int T, int D, float* x) override {
    k::embedding(tokens, tok_emb, pos_emb, B, T, D, x);
  }
  void embedding_grad(const float* dx, const std::int32_t* tokens, int B, int T, int D, int V,
                      float* d_tok_emb, float* d_pos_emb) override {
    k::embedding_grad(dx, tokens, B, T, D, V, d_tok_emb, d_pos_emb);
  }
  void layernorm(const float* x, const float* g, const float* b, int M, int D, float* y,
                 float* mean, float* rstd) override {
    k::layernorm(x, g, b, M, D, y, mean, rstd);
  }
  void layernorm_grad(const float* dy, const float* x, const float* mean, const float* rstd,
                      const float* g, int M, int D, float* dx, float* dg, float* db) override {
    k::layernorm_grad(dy, x, mean, rstd, g, M, D, dx, dg, db);
  }
  void gemm(const float* x, const float* w, const float* b, int M, int K, int N,
            float* y) override {
    k::gemm(x, w, b, M, K, N, y);
  }
  void gemm_dx(const float* dy, const float* w, int M, int K, int N, float* dx) override {
    k::gemm_dx(dy, w, M, K, N, dx);
  }
  void gemm_dw(const float* x, const float* dy, int M, int K, int N, float* dw) override {
    k::gemm_dw(x, dy, M, K, N, dw);
  }
  void bias_grad(const float* dy, int M, int N, float* db) override { k::bias_grad(dy, M, N, db); }
  void attn_scores(const float* qkv, int B, int T, int H, int D, float* scores) override {
    k::attn_scores(qkv, B, T, H, D, scores);
  }
  void softmax_causal(const float* scores, int rows, int T, float* probs) override {
    k::softmax_causal(scores, rows, T, probs);
  }
  void attn_values(const float* probs, const float* qkv, int B, int T, int H, int D,
                   float* out) override {
    k::attn_values(probs, qkv, B, T, H, D, out);
  }
  void attn_values_grad(const float* d_out, const float* probs, const float* qkv, int B, int T,
                        int H, int D, float* d_probs, float* d_qkv) override {
    k::attn_values_grad(d_out, probs, qkv, B, T, H, D, d_probs, d_qkv);
  }
  void softmax_grad(const float* probs, const float* d_probs, int rows, int T,
                    float* d_scores) override {
    k::softmax_grad(probs, d_probs, rows, T, d_scores);
  }
  void attn_scores_grad(const float* d_scores, const float* qkv, int B, int T, int H, int D,
                        float* d_qkv) override {
    k::attn_scores_grad(d_scores, qkv, B, T, H, D, d_qkv);
  }
  void gelu(const float* x, std::size_t n, float* y) override { k::gelu(x, n, y); }
  void gelu_grad(const float* dy, const float* x, std::size_t n, float* dx) override {
    k::gelu_grad(dy, x, n, dx);
  }
  void dropout(const float* x, std::size_t n, float p, Xoshiro& rng, float* y,
               float* mask) override {
    k::dropout(x, n, p, rng, y, mask);
  }
  void multiply(const float* a, const float* b, std::size_t n, float* y) override {
    k::multiply(a, b, n, y);
  }
  void add(const float* a, const float* b, std::size_t n, float* y) override { k::add(a, b, n, y); }
  void cross_entropy(const float* logits, const std::int32_t* targets, int M, int V,
                     float* token_losses, float* loss) override {
    *loss = k::cross_entropy(logits, targets, M, V, token_losses);
  }
  void cross_entropy_grad(const float* logits, const std::int32_t* targets, int M, int V,
                          float* dlogits) override {
    k::cross_entropy_grad(logits, targets, M, V, dlogits);
  }
  void copy(const float* in, std::size_t n, float* out) override { std::copy(in, in + n, out); }
  void grad_norm(const float* grads, std::size_t n, float* norm) override {
    *norm = std::sqrt(k::sum_of_squares(grads, n));
  }
  void adamw(const kernels::AdamW& hp, float* params, const float* grads, float* m, float* v,
             std::size_t begin, std::size_t end, bool decay, std::int64_t step,
             const float* grad_norm) override {
    k::adamw(hp, params, grads, m, v, begin, end, decay, step, *grad_norm);
  }
  void gemm_splitk(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
                   Chaos& chaos) override {
    k::gemm_splitk(x, w, b, M, K, N, y, chaos);
  }
  void gemm_autotuned(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
                      int cpu_pick) override {
    if (cpu_pick == 1) {
      k::gemm_interleaved(x, w, b, M, K, N, y);
    } else {
      k::gemm(x, w, b, M, K, N, y);
    }
  }
  void bias_grad_unordered(const float* dy, int M, int N, float* db, Chaos& chaos) override {
    k::bias_grad_unordered(dy, M, N, db, chaos);
  }
  void bias_grad_padded(const float* dy, int M, int N, float* db, Chaos& chaos) override {
    k::bias_grad_padded(dy, M, N, db, chaos);
  }
  void cross_entropy_unordered(const float* logits, const std::int32_t* targets, int M, int V,
                               float* token_losses, float* loss, Chaos& chaos) override {
    *loss = k::cross_entropy_unordered(logits, targets, M, V, token_losses, chaos);
  }
};

}  // namespace

const TensorMemory& tensor_memory() { return memory(); }

void install_tensor_memory(const TensorMemory& m) { memory() = m; }

void Backend::upload(void* to, const void* from, std::size_t bytes) {
  std::memcpy(to, from, bytes);
}

void Backend::fingerprint(std::span<const void* const>, std::span<const std::size_t>,
                          std::uint64_t*) {
  throw std::logic_error("Backend::fingerprint: this backend's tensors are on the host");
}

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace minitrain
