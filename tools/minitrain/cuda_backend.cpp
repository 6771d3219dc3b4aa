// The CUDA backend: every op a launch of cuda/minitrain_kernels.cu on one
// stream, tensors in managed memory, records fingerprinted on the device.
// Host C++ linked with the CUDA runtime; every runtime call is checked through
// DTRACE_CUDA_CHECK (cuda/check.cuh) and a failure becomes an Error naming the
// file, line, call and CUDA error.
#include "cuda_backend.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <thread>

#include "checkpoint.hpp"
#include "cuda/check.cuh"
#include "cuda/minitrain_kernels.cuh"

namespace minitrain {

namespace {

using dtrace::gpu::Status;

void throw_if_failed(const Status& status) {
  if (!status.ok()) throw Error("--backend cuda: " + status.message);
}

// Managed memory: one pointer for the device kernels and for the host code
// that fills batches, writes checkpoints and loads captured inputs.
void* managed_allocate(std::size_t bytes) {
  void* data = nullptr;
  if (cudaMallocManaged(&data, bytes == 0 ? 1 : bytes) != cudaSuccess) throw std::bad_alloc();
  return data;
}
void managed_release(void* data) { cudaFree(data); }

Status open_device(int device, cudaStream_t* stream) {
  int count = 0;
  DTRACE_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device >= count) {
    // NCCL takes one GPU per rank: rank r runs on device r.
    return {dtrace::gpu::Code::no_device, "rank " + std::to_string(device) + " needs device " +
                                              std::to_string(device) + ", " +
                                              std::to_string(count) + " visible"};
  }
  DTRACE_CUDA_CHECK(cudaSetDevice(device));
  DTRACE_CUDA_CHECK(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
  return {};
}

Status synchronize(cudaStream_t stream) {
  DTRACE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {};
}

}  // namespace

// NCCL calls go through the same kind of checked macro: a failure returns a
// Status naming file, line, call and NCCL's error string.
#define MINITRAIN_NCCL_CHECK(call)                                                     \
  do {                                                                                 \
    const ncclResult_t minitrain_nccl_result_ = (call);                                \
    if (minitrain_nccl_result_ != ncclSuccess) {                                       \
      return Status{dtrace::gpu::Code::cuda_error,                                     \
                    std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #call + \
                        " failed: " + ncclGetErrorString(minitrain_nccl_result_)};     \
    }                                                                                  \
  } while (0)

namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) {
    throw_if_failed(open_device(device, &stream_));
    install_tensor_memory({managed_allocate, managed_release});
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  bool device_resident() const override { return true; }
  void sync() override { throw_if_failed(synchronize(stream_)); }
  void fingerprint(std::span<const void* const> data, std::span<const std::size_t> bytes,
                   std::uint64_t* out) override {
    throw_if_failed(dtrace::gpu::fingerprint_device_batch(data.data(), bytes.data(), data.size(),
                                                          stream_, out));
  }

  void embedding(const std::int32_t* tokens, const float* tok_emb, const float* pos_emb, int B,
                 int T, int D, float* x) override {
    throw_if_failed(gpu::embedding(tokens, tok_emb, pos_emb, B, T, D, x, stream_));
  }
  void embedding_grad(const float* dx, const std::int32_t* tokens, int B, int T, int D, int V,
                      float* d_tok_emb, float* d_pos_emb) override {
    throw_if_failed(gpu::embedding_grad(dx, tokens, B, T, D, V, d_tok_emb, d_pos_emb, stream_));
  }
  void layernorm(const float* x, const float* g, const float* b, int M, int D, float* y,
                 float* mean, float* rstd) override {
    throw_if_failed(gpu::layernorm(x, g, b, M, D, y, mean, rstd, stream_));
  }
  void layernorm_grad(const float* dy, const float* x, const float* mean, const float* rstd,
                      const float* g, int M, int D, float* dx, float* dg, float* db) override {
    throw_if_failed(gpu::layernorm_grad(dy, x, mean, rstd, g, M, D, dx, dg, db, stream_));
  }
  void gemm(const float* x, const float* w, const float* b, int M, int K, int N,
            float* y) override {
    throw_if_failed(gpu::gemm(x, w, b, M, K, N, y, stream_));
  }
  void gemm_dx(const float* dy, const float* w, int M, int K, int N, float* dx) override {
    throw_if_failed(gpu::gemm_dx(dy, w, M, K, N, dx, stream_));
  }
  void gemm_dw(const float* x, const float* dy, int M, int K, int N, float* dw) override {
    throw_if_failed(gpu::gemm_dw(x, dy, M, K, N, dw, stream_));
  }
  void bias_grad(const float* dy, int M, int N, float* db) override {
    throw_if_failed(gpu::bias_grad(dy, M, N, db, stream_));
  }
  void attn_scores(const float* qkv, int B, int T, int H, int D, float* scores) override {
    throw_if_failed(gpu::attn_scores(qkv, B, T, H, D, scores, stream_));
  }
  void softmax_causal(const float* scores, int rows, int T, float* probs) override {
    throw_if_failed(gpu::softmax_causal(scores, rows, T, probs, stream_));
  }
  void attn_values(const float* probs, const float* qkv, int B, int T, int H, int D,
                   float* out) override {
    throw_if_failed(gpu::attn_values(probs, qkv, B, T, H, D, out, stream_));
  }
  void attn_values_grad(const float* d_out, const float* probs, const float* qkv, int B, int T,
                        int H, int D, float* d_probs, float* d_qkv) override {
    throw_if_failed(gpu::attn_values_grad(d_out, probs, qkv, B, T, H, D, d_probs, d_qkv, stream_));
  }
  void softmax_grad(const float* probs, const float* d_probs, int rows, int T,
                    float* d_scores) override {
    throw_if_failed(gpu::softmax_grad(probs, d_probs, rows, T, d_scores, stream_));
  }
  void attn_scores_grad(const float* d_scores, const float* qkv, int B, int T, int H, int D,
                        float* d_qkv) override {
    throw_if_failed(gpu::attn_scores_grad(d_scores, qkv, B, T, H, D, d_qkv, stream_));
  }
  void gelu(const float* x, std::size_t n, float* y) override {
    throw_if_failed(gpu::gelu(x, n, y, stream_));
  }
  void gelu_grad(const float* dy, const float* x, std::size_t n, float* dx) override {
    throw_if_failed(gpu::gelu_grad(dy, x, n, dx, stream_));
  }
  // The mask is drawn on the host in element order (the CPU's draws, the RNG
  // state that records and checkpoints hold), written to managed memory once
  // the device is done with it, then applied on the device.
  void dropout(const float* x, std::size_t n, float p, Xoshiro& rng, float* y,
               float* mask) override {
    sync();
    const float keep = 1.0f / (1.0f - p);
    for (std::size_t i = 0; i < n; ++i) mask[i] = rng.uniform() < p ? 0.0f : keep;
    throw_if_failed(gpu::multiply(x, mask, n, y, stream_));
  }
  void multiply(const float* a, const float* b, std::size_t n, float* y) override {
    throw_if_failed(gpu::multiply(a, b, n, y, stream_));
  }
  void add(const float* a, const float* b, std::size_t n, float* y) override {
    throw_if_failed(gpu::add(a, b, n, y, stream_));
  }
  void cross_entropy(const float* logits, const std::int32_t* targets, int M, int V,
                     float* token_losses, float* loss) override {
    throw_if_failed(gpu::cross_entropy(logits, targets, M, V, token_losses, loss, stream_));
  }
  void cross_entropy_grad(const float* logits, const std::int32_t* targets, int M, int V,
                          float* dlogits) override {
    throw_if_failed(gpu::cross_entropy_grad(logits, targets, M, V, dlogits, stream_));
  }
  void grad_norm(const float* grads, std::size_t n, float* norm) override {
    throw_if_failed(gpu::grad_norm(grads, n, norm, stream_));
  }
  void adamw(const kernels::AdamW& hp, float* params, const float* grads, float* m, float* v,
             std::size_t begin, std::size_t end, bool decay, std::int64_t step,
             const float* grad_norm) override {
    // The step's constants with the host's pow, as kernels::adamw computes them.
    const float t = static_cast<float>(step + 1);
    const ops::AdamWConstants c{hp.lr * std::min(1.0f, t / static_cast<float>(hp.warmup)),
                                hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.clip,
                                1.0f - std::pow(hp.beta1, t), 1.0f - std::pow(hp.beta2, t)};
    throw_if_failed(gpu::adamw(c, params, grads, m, v, begin, end, decay, grad_norm, stream_));
  }

  void begin_repetition() override { autotune_pick_ = -1; }
  cudaStream_t stream() const { return stream_; }

  void gemm_splitk(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
                   Chaos&) override {
    throw_if_failed(gpu::gemm_splitk_atomic(x, w, b, M, K, N, y, stream_));
  }
  // Tuned once per process: both configurations timed with CUDA events, the
  // faster kept. They run at about the same speed, so the pick is timing noise.
  void gemm_autotuned(const float* x, const float* w, const float* b, int M, int K, int N,
                      float* y, int) override {
    if (autotune_pick_ < 0) {
      float ms[2] = {0.0f, 0.0f};
      for (int config = 0; config < 2; ++config)
        throw_if_failed(gpu::time_gemm(config, x, w, b, M, K, N, y, 5, stream_, &ms[config]));
      autotune_pick_ = ms[1] < ms[0] ? 1 : 0;
    }
    throw_if_failed(autotune_pick_ == 1 ? gpu::gemm_interleaved(x, w, b, M, K, N, y, stream_)
                                        : gpu::gemm(x, w, b, M, K, N, y, stream_));
  }
  void bias_grad_unordered(const float* dy, int M, int N, float* db, Chaos&) override {
    throw_if_failed(gpu::bias_grad_atomic(dy, M, N, db, stream_));
  }
  void bias_grad_padded(const float* dy, int M, int N, float* db, Chaos&) override {
    // The pool's next block holds what its last tenant left (bits that depend
    // on when that kernel ran); the padded reduction reads its unwritten tail.
    const std::size_t bytes =
        static_cast<std::size_t>(ops::padded_rows(M)) * static_cast<std::size_t>(N) * sizeof(float);
    throw_if_failed(gpu::dirty_pool(bytes, stream_));
    throw_if_failed(gpu::bias_grad_padded(dy, M, N, db, stream_));
  }
  void cross_entropy_unordered(const float* logits, const std::int32_t* targets, int M, int V,
                               float* token_losses, float* loss, Chaos&) override {
    throw_if_failed(gpu::cross_entropy_atomic(logits, targets, M, V, token_losses, loss, stream_));
  }

 private:
  cudaStream_t stream_ = nullptr;
  int autotune_pick_ = -1;
};

namespace fs = std::filesystem;

// The unique id through a file: rank 0 writes it whole (temporary file, then
// rename), the others wait for it. No MPI, no sockets of our own.
Status exchange_unique_id(int rank, const std::string& dir, ncclUniqueId* id) {
  const fs::path path = fs::path(dir) / "nccl-id";
  if (rank == 0) {
    MINITRAIN_NCCL_CHECK(ncclGetUniqueId(id));
    const fs::path temporary = fs::path(dir) / "nccl-id.tmp";
    {
      std::ofstream out(temporary, std::ios::binary);
      out.write(id->internal, sizeof(id->internal));
      if (!out) return {dtrace::gpu::Code::cuda_error, "cannot write " + temporary.string()};
    }
    fs::rename(temporary, path);
    return {};
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(id->internal, sizeof(id->internal))) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {dtrace::gpu::Code::cuda_error,
          "rank " + std::to_string(rank) + ": no NCCL unique id from rank 0 in " + path.string() +
              " after 60 s"};
}

class NcclCollective final : public Collective {
 public:
  NcclCollective(CudaBackend& backend, int rank, int world, const std::string& dir, bool tree)
      : backend_(backend), rank_(rank), world_(world) {
    // NCCL reads NCCL_ALGO when the communicator is made.
    if (tree) setenv("NCCL_ALGO", "Tree", 1);
    throw_if_failed(init(dir));
  }
  ~NcclCollective() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (gather_ != nullptr) cudaFree(gather_);
  }
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  void allreduce_mean(const float* in, float* out, std::size_t n) override {
    throw_if_failed(sum(in, out, n));
    throw_if_failed(gpu::scale(out, n, 1.0f / static_cast<float>(world_), backend_.stream()));
  }
  std::vector<Xoshiro> allgather(const Xoshiro& mine) override {
    backend_.sync();
    std::copy(mine.s.begin(), mine.s.end(), gather_ + 4 * rank_);
    throw_if_failed(gather());
    backend_.sync();
    std::vector<Xoshiro> all(static_cast<std::size_t>(world_));
    for (int r = 0; r < world_; ++r)
      std::copy(gather_ + 4 * r, gather_ + 4 * r + 4, all[static_cast<std::size_t>(r)].s.begin());
    return all;
  }
  void barrier() override {
    throw_if_failed(sum(gather_, gather_, 1));
    backend_.sync();
  }

 private:
  Status init(const std::string& dir) {
    ncclUniqueId id;
    const Status exchanged = exchange_unique_id(rank_, dir, &id);
    if (!exchanged.ok()) return exchanged;
    MINITRAIN_NCCL_CHECK(ncclCommInitRank(&comm_, world_, id, rank_));
    void* buffer = nullptr;
    DTRACE_CUDA_CHECK(cudaMallocManaged(&buffer, sizeof(std::uint64_t) * 4 * world_));
    gather_ = static_cast<std::uint64_t*>(buffer);
    return {};
  }
  Status sum(const void* in, void* out, std::size_t n) {
    MINITRAIN_NCCL_CHECK(ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm_, backend_.stream()));
    return {};
  }
  Status gather() {
    MINITRAIN_NCCL_CHECK(ncclAllGather(gather_ + 4 * rank_, gather_, 4, ncclUint64, comm_,
                                       backend_.stream()));
    return {};
  }

  CudaBackend& backend_;
  int rank_, world_;
  ncclComm_t comm_ = nullptr;
  std::uint64_t* gather_ = nullptr;  // world x u64[4], managed
};

}  // namespace

std::unique_ptr<Backend> open_cuda_backend(int device) {
  return std::make_unique<CudaBackend>(device);
}

std::unique_ptr<Collective> open_nccl(Backend& backend, int rank, int world,
                                      const std::string& bootstrap_dir, bool tree) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr) throw Error("NCCL needs the cuda backend");
  return std::make_unique<NcclCollective>(*cuda, rank, world, bootstrap_dir, tree);
}

}  // namespace minitrain
