// OpsBackend<Run>: a Backend whose every op is the op of cuda/minitrain_ops.cuh
// run by the executor `Run`. The CUDA backend (cuda_backend.cu) is
// OpsBackend<gpu::Launch>, a launch of n device threads on its stream;
// tests/minitrain_ops_test.cpp instantiates it with a plain loop and trains the
// model with it against the CPU backend, bit for bit. So the CPU proves the GPU
// backend's code itself: its extents, thread mapping, arguments and bodies.
//
// What only a device has stays with the subclass: synchronization, the device
// fingerprint, autotune's timing and the dirty workspace of uninit-pad.
#pragma once

#include "backend.hpp"
#include "cuda/minitrain_ops.cuh"

namespace minitrain {

template <class Run>
class OpsBackend : public Backend {
 public:
  explicit OpsBackend(Run run) : run_(run) {}

  void embedding(const std::int32_t* tokens, const float* tok_emb, const float* pos_emb, int B,
                 int T, int D, float* x) override {
    ops::embedding(run_, tokens, tok_emb, pos_emb, B, T, D, x);
  }
  void embedding_grad(const float* dx, const std::int32_t* tokens, int B, int T, int D, int V,
                      float* d_tok_emb, float* d_pos_emb) override {
    ops::embedding_grad(run_, dx, tokens, B, T, D, V, d_tok_emb, d_pos_emb);
  }
  void layernorm(const float* x, const float* g, const float* b, int M, int D, float* y,
                 float* mean, float* rstd) override {
    ops::layernorm(run_, x, g, b, M, D, y, mean, rstd);
  }
  void layernorm_grad(const float* dy, const float* x, const float* mean, const float* rstd,
                      const float* g, int M, int D, float* dx, float* dg, float* db) override {
    ops::layernorm_grad(run_, dy, x, mean, rstd, g, M, D, dx, dg, db);
  }
  void gemm(const float* x, const float* w, const float* b, int M, int K, int N,
            float* y) override {
    ops::gemm(run_, x, w, b, M, K, N, y);
  }
  void gemm_dx(const float* dy, const float* w, int M, int K, int N, float* dx) override {
    ops::gemm_dx(run_, dy, w, M, K, N, dx);
  }
  void gemm_dw(const float* x, const float* dy, int M, int K, int N, float* dw) override {
    ops::gemm_dw(run_, x, dy, M, K, N, dw);
  }
  void bias_grad(const float* dy, int M, int N, float* db) override {
    ops::bias_grad(run_, dy, M, N, db);
  }
  void attn_scores(const float* qkv, int B, int T, int H, int D, float* scores) override {
    ops::attn_scores(run_, qkv, B, T, H, D, scores);
  }
  void softmax_causal(const float* scores, int rows, int T, float* probs) override {
    ops::softmax_causal(run_, scores, rows, T, probs);
  }
  void attn_values(const float* probs, const float* qkv, int B, int T, int H, int D,
                   float* out) override {
    ops::attn_values(run_, probs, qkv, B, T, H, D, out);
  }
  void attn_values_grad(const float* d_out, const float* probs, const float* qkv, int B, int T,
                        int H, int D, float* d_probs, float* d_qkv) override {
    ops::attn_values_grad(run_, d_out, probs, qkv, B, T, H, D, d_probs, d_qkv);
  }
  void softmax_grad(const float* probs, const float* d_probs, int rows, int T,
                    float* d_scores) override {
    ops::softmax_grad(run_, probs, d_probs, rows, T, d_scores);
  }
  void attn_scores_grad(const float* d_scores, const float* qkv, int B, int T, int H, int D,
                        float* d_qkv) override {
    ops::attn_scores_grad(run_, d_scores, qkv, B, T, H, D, d_qkv);
  }
  void gelu(const float* x, std::size_t n, float* y) override { ops::gelu(run_, x, n, y); }
  void gelu_grad(const float* dy, const float* x, std::size_t n, float* dx) override {
    ops::gelu_grad(run_, dy, x, n, dx);
  }
  // The mask is drawn on the host in element order (the CPU's draws, and the
  // RNG state that records and checkpoints hold), written to tensor memory once
  // the device is done with it, then applied where the tensors live.
  void dropout(const float* x, std::size_t n, float p, Xoshiro& rng, float* y,
               float* mask) override {
    sync();
    kernels::dropout_mask(n, p, rng, mask);
    ops::multiply(run_, x, mask, n, y);
  }
  void multiply(const float* a, const float* b, std::size_t n, float* y) override {
    ops::multiply(run_, a, b, n, y);
  }
  void add(const float* a, const float* b, std::size_t n, float* y) override {
    ops::add(run_, a, b, n, y);
  }
  void cross_entropy(const float* logits, const std::int32_t* targets, int M, int V,
                     float* token_losses, float* loss) override {
    ops::cross_entropy(run_, logits, targets, M, V, token_losses, loss);
  }
  void cross_entropy_grad(const float* logits, const std::int32_t* targets, int M, int V,
                          float* dlogits) override {
    ops::cross_entropy_grad(run_, logits, targets, M, V, dlogits);
  }
  void grad_norm(const float* grads, std::size_t n, float* norm) override {
    if (norm_partials_.size() < ops::norm_chunks(n)) {
      sync();  // nothing queued may still use the old buffer
      norm_partials_.resize(ops::norm_chunks(n));
    }
    ops::grad_norm(run_, grads, n, norm_partials_.data(), norm);
  }
  void adamw(const kernels::AdamW& hp, float* params, const float* grads, float* m, float* v,
             std::size_t begin, std::size_t end, bool decay, std::int64_t step,
             const float* grad_norm) override {
    const ops::AdamWConstants c = ops::adamw_constants(hp.lr, hp.beta1, hp.beta2, hp.eps,
                                                       hp.weight_decay, hp.clip, hp.warmup, step);
    ops::adamw(run_, c, params, grads, m, v, begin, end, decay, grad_norm);
  }
  void copy(const float* in, std::size_t n, float* out) override { ops::copy(run_, in, n, out); }

  // Planted: the disorder comes from atomics, not from chaos.
  void gemm_splitk(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
                   Chaos&) override {
    ops::gemm_splitk_atomic(run_, x, w, b, M, K, N, y);
  }
  void gemm_autotuned(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
                      int cpu_pick) override {
    ops::gemm(run_, x, w, b, M, K, N, y, autotune_pick(x, w, b, M, K, N, y, cpu_pick));
  }
  void bias_grad_unordered(const float* dy, int M, int N, float* db, Chaos&) override {
    ops::bias_grad_atomic(run_, dy, M, N, db);
  }
  void cross_entropy_unordered(const float* logits, const std::int32_t* targets, int M, int V,
                               float* token_losses, float* loss, Chaos&) override {
    ops::cross_entropy_atomic(run_, logits, targets, M, V, token_losses, loss);
  }

 protected:
  // autotune: which lm-head configuration to run (0 ordered, 1 interleaved).
  virtual int autotune_pick(const float* x, const float* w, const float* b, int M, int K, int N,
                            float* y, int cpu_pick) = 0;

  Run run_;

 private:
  Floats norm_partials_;  // grad_norm's per-chunk sums, in tensor memory
};

}  // namespace minitrain
