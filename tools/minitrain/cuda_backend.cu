// The CUDA backend: OpsBackend<gpu::Launch> (every op of cuda/minitrain_ops.cuh
// launched on one stream; the same class code the CPU test runs with a loop),
// tensors in managed memory, records fingerprinted on the device, and NCCL for
// data parallelism across processes. Every runtime call is checked through
// DTRACE_CUDA_CHECK (cuda/check.cuh), every NCCL call through
// MINITRAIN_NCCL_CHECK; a failure becomes an Error naming the file, line, call
// and error.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>
#include <vector>

#include "checkpoint.hpp"
#include "cuda/check.cuh"
#include "cuda/minitrain_kernels.cuh"
#include "cuda_backend.hpp"
#include "launcher.hpp"
#include "ops_backend.hpp"

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

Status copy_to_device(void* to, const void* from, std::size_t bytes, cudaStream_t stream) {
  DTRACE_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream));
  DTRACE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {};
}

Status synchronize(cudaStream_t stream) {
  DTRACE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {};
}

// NCCL is loaded when a job of several ranks first needs it, not linked: a
// world of one never touches it, so `--backend cuda` runs where libnccl (over
// 200 MB) is absent, and a build carried to a GPU machine stays small.
struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclGetErrorString) error_string;
};

NcclApi load_nccl() {
  // The loader's search path first (LD_LIBRARY_PATH, ldconfig), then the CUDA
  // installation minitrain was built against.
  void* library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  std::string why = library == nullptr ? dlerror() : "";
#ifdef MINITRAIN_NCCL_LIBRARY
  if (library == nullptr) library = dlopen(MINITRAIN_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
#endif
  if (library == nullptr) {
    throw Error("--backend cuda with several ranks needs NCCL: cannot load libnccl.so.2 (" + why +
                "); put its directory on LD_LIBRARY_PATH");
  }
  auto symbol = [&](const char* name) {
    void* address = dlsym(library, name);
    if (address == nullptr) throw Error(std::string("libnccl.so.2 lacks ") + name);
    return address;
  };
  NcclApi api{};
  api.get_unique_id = reinterpret_cast<decltype(api.get_unique_id)>(symbol("ncclGetUniqueId"));
  api.comm_init_rank = reinterpret_cast<decltype(api.comm_init_rank)>(symbol("ncclCommInitRank"));
  api.all_reduce = reinterpret_cast<decltype(api.all_reduce)>(symbol("ncclAllReduce"));
  api.all_gather = reinterpret_cast<decltype(api.all_gather)>(symbol("ncclAllGather"));
  api.comm_destroy = reinterpret_cast<decltype(api.comm_destroy)>(symbol("ncclCommDestroy"));
  api.error_string = reinterpret_cast<decltype(api.error_string)>(symbol("ncclGetErrorString"));
  return api;
}

// Loaded once, on first use; a failure is thrown again on the next use.
const NcclApi& nccl() {
  static const NcclApi api = load_nccl();
  return api;
}

}  // namespace

// NCCL calls go through the same kind of checked macro: a failure returns a
// Status naming file, line, call and NCCL's error string.
#define MINITRAIN_NCCL_CHECK(call)                                                          \
  do {                                                                                      \
    const ncclResult_t minitrain_nccl_result_ = (call);                                     \
    if (minitrain_nccl_result_ != ncclSuccess) {                                            \
      return Status{dtrace::gpu::Code::cuda_error,                                          \
                    std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #call + \
                        " failed: " + nccl().error_string(minitrain_nccl_result_)};         \
    }                                                                                       \
  } while (0)

namespace {

class CudaBackend final : public OpsBackend<gpu::Launch> {
 public:
  explicit CudaBackend(int device) : OpsBackend<gpu::Launch>(gpu::Launch{}) {
    throw_if_failed(open_device(device, &run_.stream));
    install_tensor_memory({managed_allocate, managed_release});
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(run_.stream);
    if (staged_ != nullptr) cudaEventDestroy(staged_);
    if (staging_ != nullptr) cudaFreeHost(staging_);
    cudaStreamDestroy(run_.stream);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  bool device_resident() const override { return true; }
  // Also where a failed launch of the ops since the last sync surfaces.
  void sync() override {
    throw_if_failed(launched());
    throw_if_failed(synchronize(run_.stream));
  }
  void fingerprint(std::span<const void* const> data, std::span<const std::size_t> bytes,
                   std::uint64_t* out) override {
    throw_if_failed(launched());
    throw_if_failed(dtrace::gpu::fingerprint_device_batch(data.data(), bytes.data(), data.size(),
                                                          run_.stream, out));
  }
  void begin_repetition() override { autotune_pick_ = -1; }
  // A pinned output: copied to the device on the stream, after the op that
  // computed it; waited for, since `from` is the caller's.
  void upload(void* to, const void* from, std::size_t bytes) override {
    throw_if_failed(launched());
    throw_if_failed(copy_to_device(to, from, bytes, run_.stream));
  }
  cudaStream_t stream() const { return run_.stream; }
  void scale(float* x, std::size_t n, float factor) { ops::scale(run_, x, n, factor); }

  // The mask is drawn on the host (the CPU's draws from the recorded RNG) into
  // pinned staging memory and copied on the stream: the device keeps working
  // meanwhile; only the previous copy out of the staging buffer is waited for.
  void dropout(const float* x, std::size_t n, float p, Xoshiro& rng, float* y,
               float* mask) override {
    throw_if_failed(stage(n));
    kernels::dropout_mask(n, p, rng, staging_);
    throw_if_failed(upload(mask, n));
    ops::multiply(run_, x, mask, n, y);
  }

  void bias_grad_padded(const float* dy, int M, int N, float* db, Chaos&) override {
    // The pool's next block holds what its last tenant left (bits that depend
    // on when that kernel ran); the padded reduction reads its unwritten tail.
    const std::size_t bytes =
        static_cast<std::size_t>(ops::padded_rows(M)) * static_cast<std::size_t>(N) * sizeof(float);
    throw_if_failed(gpu::dirty_pool(bytes, run_.stream));
    throw_if_failed(gpu::bias_grad_padded(dy, M, N, db, run_.stream));
  }

 protected:
  // Tuned once per process (and per isolated repetition, a fresh process): both
  // configurations timed with CUDA events, the faster kept. They run at about
  // the same speed, so the pick is timing noise.
  int autotune_pick(const float* x, const float* w, const float* b, int M, int K, int N, float* y,
                    int) override {
    if (autotune_pick_ < 0) {
      float ms[2] = {0.0f, 0.0f};
      for (int config = 0; config < 2; ++config)
        throw_if_failed(gpu::time_gemm(config, x, w, b, M, K, N, y, 5, run_.stream, &ms[config]));
      autotune_pick_ = ms[1] < ms[0] ? 1 : 0;
    }
    return autotune_pick_;
  }

 private:
  static Status launched() {
    DTRACE_CUDA_CHECK(cudaGetLastError());
    return {};
  }
  // Staging for n floats, free to write: the last upload out of it is done.
  Status stage(std::size_t n) {
    if (staged_ == nullptr)
      DTRACE_CUDA_CHECK(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
    DTRACE_CUDA_CHECK(cudaEventSynchronize(staged_));
    if (n > staging_size_) {
      if (staging_ != nullptr) DTRACE_CUDA_CHECK(cudaFreeHost(staging_));
      void* memory = nullptr;
      DTRACE_CUDA_CHECK(cudaMallocHost(&memory, n * sizeof(float)));
      staging_ = static_cast<float*>(memory);
      staging_size_ = n;
    }
    return {};
  }
  Status upload(float* to, std::size_t n) {
    DTRACE_CUDA_CHECK(
        cudaMemcpyAsync(to, staging_, n * sizeof(float), cudaMemcpyDefault, run_.stream));
    DTRACE_CUDA_CHECK(cudaEventRecord(staged_, run_.stream));
    return {};
  }

  int autotune_pick_ = -1;
  float* staging_ = nullptr;  // pinned host memory for dropout masks
  std::size_t staging_size_ = 0;
  cudaEvent_t staged_ = nullptr;  // recorded after the last upload from staging_
};

class NcclCollective final : public Collective {
 public:
  NcclCollective(CudaBackend& backend, int rank, int world, const std::string& dir, bool tree)
      : backend_(backend), rank_(rank), world_(world) {
    // NCCL reads NCCL_ALGO when the communicator is made.
    if (tree) setenv("NCCL_ALGO", "Tree", 1);
    throw_if_failed(init(dir));
  }
  ~NcclCollective() override {
    if (comm_ != nullptr) nccl().comm_destroy(comm_);
    if (gather_ != nullptr) cudaFree(gather_);
  }
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  void allreduce_mean(const float* in, float* out, std::size_t n) override {
    throw_if_failed(sum(in, out, n));
    backend_.scale(out, n, 1.0f / static_cast<float>(world_));
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
  // The unique id through a file (launcher.hpp): no MPI, no sockets of ours.
  Status init(const std::string& dir) {
    ncclUniqueId id;
    if (rank_ == 0) {
      MINITRAIN_NCCL_CHECK(nccl().get_unique_id(&id));
      publish_unique_id(dir, id.internal, sizeof(id.internal));
    } else {
      await_unique_id(dir, id.internal, sizeof(id.internal), rank_, 60000);
    }
    MINITRAIN_NCCL_CHECK(nccl().comm_init_rank(&comm_, world_, id, rank_));
    void* buffer = nullptr;
    DTRACE_CUDA_CHECK(cudaMallocManaged(&buffer, sizeof(std::uint64_t) * 4 * world_));
    gather_ = static_cast<std::uint64_t*>(buffer);
    return {};
  }
  Status sum(const void* in, void* out, std::size_t n) {
    MINITRAIN_NCCL_CHECK(
        nccl().all_reduce(in, out, n, ncclFloat, ncclSum, comm_, backend_.stream()));
    return {};
  }
  Status gather() {
    MINITRAIN_NCCL_CHECK(
        nccl().all_gather(gather_ + 4 * rank_, gather_, 4, ncclUint64, comm_, backend_.stream()));
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
