// Backend: where minitrain's tensors live and its ops run. The model and the
// trainer call every op through one Backend, so the same GPT, scopes and
// records run on the CPU (`--backend cpu`, kernels::) or on a GPU
// (`--backend cuda`, cuda_backend.cu on cuda/minitrain_ops.cuh).
//
// Memory: every tensor (Buffer, Floats) is allocated through the process's
// TensorMemory, which the backend installs before the first tensor exists:
// plain heap memory on the CPU, CUDA managed memory for the GPU backend, so one
// pointer is valid on both sides and the host-side code (batches, checkpoints,
// capture loads) keeps working; host access is allowed only after sync().
//
// Ops take the arguments of their kernels:: namesake. Planted variants take the
// chaos source the CPU draws its disorder from; a GPU backend ignores it and
// gets its disorder from the hardware (atomicAdd arrival order, timing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chaos.hpp"
#include "kernels.hpp"

namespace minitrain {

struct TensorMemory {
  void* (*allocate)(std::size_t bytes) = nullptr;
  void (*release)(void* data) = nullptr;
};
// The process's tensor memory (plain heap memory unless a backend installed
// another). Installed once, before any tensor is allocated: memory is released
// by the functions that allocated it.
const TensorMemory& tensor_memory();
void install_tensor_memory(const TensorMemory& memory);

template <class T>
struct TensorAllocator {
  using value_type = T;
  TensorAllocator() = default;
  template <class U>
  TensorAllocator(const TensorAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(tensor_memory().allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t) noexcept { tensor_memory().release(p); }
  template <class U>
  bool operator==(const TensorAllocator<U>&) const noexcept {
    return true;
  }
};

// A flat float vector in tensor memory: parameters, gradients, Adam moments.
using Floats = std::vector<float, TensorAllocator<float>>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // True when tensors live in device memory: records then take the device
  // fingerprint (fingerprint()) instead of the recorder hashing host bytes.
  virtual bool device_resident() const { return false; }
  // Waits for queued work: the host may read or write tensor memory after it.
  virtual void sync() {}
  // An isolated repetition stands for a fresh process: what a backend tuned
  // (autotune's pick) is forgotten.
  virtual void begin_repetition() {}
  // Writes `bytes` host bytes over tensor memory at `to` (a pinned op's output,
  // DTRACE_PIN), after the queued work that wrote it and before any queued
  // after; `from` may be freed once it returns. The host's: a plain copy.
  virtual void upload(void* to, const void* from, std::size_t bytes);
  // xxh3-64k/1 of each view, computed where the tensors live (device backends).
  virtual void fingerprint(std::span<const void* const> data, std::span<const std::size_t> bytes,
                           std::uint64_t* out);

  virtual void embedding(const std::int32_t* tokens, const float* tok_emb, const float* pos_emb,
                         int B, int T, int D, float* x) = 0;
  virtual void embedding_grad(const float* dx, const std::int32_t* tokens, int B, int T, int D,
                              int V, float* d_tok_emb, float* d_pos_emb) = 0;
  virtual void layernorm(const float* x, const float* g, const float* b, int M, int D, float* y,
                         float* mean, float* rstd) = 0;
  virtual void layernorm_grad(const float* dy, const float* x, const float* mean, const float* rstd,
                              const float* g, int M, int D, float* dx, float* dg, float* db) = 0;
  virtual void gemm(const float* x, const float* w, const float* b, int M, int K, int N,
                    float* y) = 0;
  virtual void gemm_dx(const float* dy, const float* w, int M, int K, int N, float* dx) = 0;
  virtual void gemm_dw(const float* x, const float* dy, int M, int K, int N, float* dw) = 0;
  virtual void bias_grad(const float* dy, int M, int N, float* db) = 0;
  virtual void attn_scores(const float* qkv, int B, int T, int H, int D, float* scores) = 0;
  virtual void softmax_causal(const float* scores, int rows, int T, float* probs) = 0;
  virtual void attn_values(const float* probs, const float* qkv, int B, int T, int H, int D,
                           float* out) = 0;
  virtual void attn_values_grad(const float* d_out, const float* probs, const float* qkv, int B,
                                int T, int H, int D, float* d_probs, float* d_qkv) = 0;
  virtual void softmax_grad(const float* probs, const float* d_probs, int rows, int T,
                            float* d_scores) = 0;
  virtual void attn_scores_grad(const float* d_scores, const float* qkv, int B, int T, int H, int D,
                                float* d_qkv) = 0;
  virtual void gelu(const float* x, std::size_t n, float* y) = 0;
  virtual void gelu_grad(const float* dy, const float* x, std::size_t n, float* dx) = 0;
  // The mask is drawn from rng in element order on the host on every backend,
  // so the dropout RNG state stays a host u64[4] that records and checkpoints hold.
  virtual void dropout(const float* x, std::size_t n, float p, Xoshiro& rng, float* y,
                       float* mask) = 0;
  virtual void multiply(const float* a, const float* b, std::size_t n, float* y) = 0;
  virtual void add(const float* a, const float* b, std::size_t n, float* y) = 0;
  // The mean token loss goes to *loss (tensor memory), not a return value: a
  // device backend keeps it on the device until a record or the host needs it.
  virtual void cross_entropy(const float* logits, const std::int32_t* targets, int M, int V,
                             float* token_losses, float* loss) = 0;
  virtual void cross_entropy_grad(const float* logits, const std::int32_t* targets, int M, int V,
                                  float* dlogits) = 0;
  // *norm = sqrt(sum of squares of grads[0, n)).
  virtual void grad_norm(const float* grads, std::size_t n, float* norm) = 0;
  // out = in (the all-reduce of a world of one).
  virtual void copy(const float* in, std::size_t n, float* out) = 0;
  // kernels::adamw with the gradient norm read from tensor memory.
  virtual void adamw(const kernels::AdamW& hp, float* params, const float* grads, float* m,
                     float* v, std::size_t begin, std::size_t end, bool decay, std::int64_t step,
                     const float* grad_norm) = 0;

  // Planted variants (`--nondet`, `--fast-kernels`).
  virtual void gemm_splitk(const float* x, const float* w, const float* b, int M, int K, int N,
                           float* y, Chaos& chaos) = 0;
  // autotune: which of the two lm-head configurations to run. The CPU has no
  // timing worth the name and lets `planted` decide; a GPU times both.
  virtual void gemm_autotuned(const float* x, const float* w, const float* b, int M, int K, int N,
                              float* y, int cpu_pick) = 0;
  virtual void bias_grad_unordered(const float* dy, int M, int N, float* db, Chaos& chaos) = 0;
  virtual void bias_grad_padded(const float* dy, int M, int N, float* db, Chaos& chaos) = 0;
  virtual void cross_entropy_unordered(const float* logits, const std::int32_t* targets, int M,
                                       int V, float* token_losses, float* loss, Chaos& chaos) = 0;
};

// The CPU backend: kernels:: exactly, on heap memory (the bits of every run
// before backends existed).
Backend& cpu_backend();

// The collectives of data parallelism across processes (one rank, one GPU,
// one process each): NCCL with the CUDA backend. Every rank calls each one.
class Collective {
 public:
  virtual ~Collective() = default;
  // out = (sum over ranks of in) / world size, on every rank (tensor memory).
  virtual void allreduce_mean(const float* in, float* out, std::size_t n) = 0;
  // Every rank's dropout RNG state, in rank order (for checkpoints).
  virtual std::vector<Xoshiro> allgather(const Xoshiro& mine) = 0;
  virtual void barrier() = 0;
};
// Joins the process group of `world` ranks as `rank`, through a unique id that
// rank 0 writes to `bootstrap_dir`/nccl-id and the others wait for (60 s).
// `tree`: NCCL's Tree algorithm (allreduce-arrival: its order is not fixed);
// otherwise NCCL_ALGO as the environment says (Ring in a deterministic one).
// Throws Error without CUDA.
std::unique_ptr<Collective> open_collective(Backend& backend, int rank, int world,
                                            const std::string& bootstrap_dir, bool tree);

// The backend `--backend` names ("cpu" or "cuda") on device `device`. Throws
// Error for "cuda" in a build without CUDA, or without a usable device.
Backend& open_backend(std::string_view name, int device);
bool cuda_backend_built();

}  // namespace minitrain
