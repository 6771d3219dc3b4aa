// xxh3-64k/1 on the GPU. The arithmetic is include/dtrace/xxh3_lane.cuh (proven
// against libxxhash on the CPU); this file only maps it onto threads.
//
// Two launches per call, however many tensors:
//   digest_chunks: one CTA per 64 KiB chunk of every tensor computes the chunk's
//                  XXH3 digest into a workspace laid out, per tensor, as
//                  u64le(len) || digest_0 || digest_1 || ...
//   combine:       one CTA per tensor hashes its workspace region, which is the
//                  fingerprint's final XXH3, and writes the fingerprint.
// The combine runs on the device, not the host, so that a call moves 8 bytes
// per tensor back instead of 8 per chunk, and a batch of ten thousand small
// tensors costs one small copy rather than ten thousand host hashes.
//
// Inside a CTA (cta_hash): 4 warps; each warp reads one 1 KiB block per step as
// 4 stripes x 8 lanes = 256 contiguous bytes (coalesced), each thread owning one
// accumulator lane of one stripe quarter. Every block's delta is independent of
// the accumulators (see the header), so all blocks of a chunk are read at once
// with many loads in flight; the warps reduce their partials with shuffles into
// shared memory, and then 8 threads of warp 0 run the short sequential
// scramble chain and the merge.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/fingerprint.cuh"
#include "dtrace/xxh3_lane.cuh"

namespace dtrace::gpu {

namespace {

namespace x = dtrace::xxh3;
using x::u64;
using x::u8;

constexpr std::uint64_t kChunkBytes = 65536;  // dtrace-fp(5): C
constexpr unsigned kThreads = 128;
constexpr unsigned kWarps = kThreads / 32;
constexpr unsigned kGroupsPerRound = 64;  // a 64 KiB chunk is exactly 64 groups
constexpr unsigned kBatch = 4;            // groups a warp loads before it reduces any
constexpr unsigned kFullMask = 0xffffffffu;

__constant__ __align__(16) unsigned char kSecret[x::kSecretBytes] = {DTRACE_XXH3_SECRET_BYTES};

// u64le(0): the whole combine input of an empty tensor, which has no chunk and
// so no workspace region written by digest_chunks.
__device__ __align__(8) unsigned long long kZeroLength = 0;

struct TensorDesc {
  const u8* data;
  std::uint64_t bytes;
  std::uint64_t chunk_begin;   // index of its first chunk among all chunks of the call
  std::uint64_t region_begin;  // index of its u64le(len) word in the workspace
};

// A single tensor travels in the kernel parameters; a batch in device memory.
struct TensorTable {
  const TensorDesc* descs;
  TensorDesc single;
  std::uint64_t count;

  __device__ TensorDesc at(std::uint64_t i) const { return descs != nullptr ? descs[i] : single; }
};

struct CtaScratch {
  u64 delta[kGroupsPerRound][x::kLanes];
};

__host__ __device__ std::uint64_t chunk_count(std::uint64_t bytes) {
  return (bytes + kChunkBytes - 1) / kChunkBytes;
}

__device__ u64 shfl_xor(u64 value, int mask) { return __shfl_xor_sync(kFullMask, value, mask); }

// XXH3_64bits of [p, p+len) computed by the whole CTA; the result is valid in
// thread 0. Every thread must call it (it synchronizes the CTA).
__device__ u64 cta_hash(const u8* p, std::size_t len, CtaScratch& scratch) {
  const unsigned tid = threadIdx.x;
  if (len <= x::kShortMax) return tid == 0 ? x::hash_short(p, len, kSecret) : 0;

  const unsigned warp = tid / 32;
  const unsigned lane32 = tid % 32;
  const unsigned lane = x::thread_lane(lane32);
  const x::LongLayout layout = x::long_layout(len);
  const x::ThreadKeys keys = x::thread_keys(kSecret, lane32);
  u64 acc = x::initial_accumulator(lane);

  for (std::size_t round = 0; round < layout.groups; round += kGroupsPerRound) {
    const std::size_t round_groups =
        layout.groups - round < kGroupsPerRound ? layout.groups - round : kGroupsPerRound;
    for (std::size_t first = warp; first < round_groups; first += kWarps * kBatch) {
      // All loads of kBatch groups first, so they are in flight together.
      x::ThreadWords words[kBatch];
#pragma unroll
      for (unsigned b = 0; b < kBatch; ++b) {
        const std::size_t j = first + b * kWarps;
        if (j < round_groups) {
          words[b] = x::thread_load(p, layout, len, round + j, lane32);
        }
      }
#pragma unroll
      for (unsigned b = 0; b < kBatch; ++b) {
        const std::size_t j = first + b * kWarps;
        if (j >= round_groups) break;  // the same for the whole warp
        const x::LanePartial own = x::thread_partial(words[b], keys);
        x::LanePartial partner;
        partner.words = shfl_xor(own.words, 1);
        u64 delta = x::group_delta(own, partner);
        delta += shfl_xor(delta, 8);  // add the four stripe quarters
        delta += shfl_xor(delta, 16);
        if (lane32 < x::kLanes) scratch.delta[j][lane] = delta;
      }
    }
    __syncthreads();
    if (warp == 0) {
      for (std::size_t j = 0; j < round_groups; ++j) {
        acc = x::chain_step(acc, scratch.delta[j][lane], round + j < layout.full_blocks,
                            keys.scramble);
      }
    }
    __syncthreads();  // the next round overwrites scratch
  }

  u64 result = 0;
  if (warp == 0) {
    const u64 odd = shfl_xor(acc, 1);
    u64 merged = lane % 2 == 0 ? x::merge_pair(acc, odd, lane / 2, kSecret) : 0;
    merged += shfl_xor(merged, 2);
    merged += shfl_xor(merged, 4);
    result = x::merge_finish(len, merged);
  }
  return result;
}

// The tensor owning global chunk `chunk`: the last one whose chunk_begin is not
// after it (empty tensors share their successor's chunk_begin and come first).
__device__ std::uint64_t tensor_of_chunk(const TensorTable& table, std::uint64_t chunk) {
  std::uint64_t lo = 0, hi = table.count;  // first index with chunk_begin > chunk
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (table.at(mid).chunk_begin <= chunk) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo - 1;
}

// 5 CTAs per SM (88 registers, no spills with nvcc 13): 80 KiB of loads in
// flight per SM, more than HBM needs to stay busy.
__global__ void __launch_bounds__(kThreads, 5) digest_chunks(TensorTable table, u64* workspace) {
  __shared__ CtaScratch scratch;
  __shared__ std::uint64_t tensor;
  const std::uint64_t chunk = blockIdx.x;
  if (threadIdx.x == 0) tensor = tensor_of_chunk(table, chunk);
  __syncthreads();
  const TensorDesc desc = table.at(tensor);
  const std::uint64_t local = chunk - desc.chunk_begin;
  const std::uint64_t offset = local * kChunkBytes;
  const std::uint64_t len = desc.bytes - offset < kChunkBytes ? desc.bytes - offset : kChunkBytes;
  const u64 digest = cta_hash(desc.data + offset, len, scratch);
  if (threadIdx.x == 0) {
    workspace[desc.region_begin + 1 + local] = digest;
    if (local == 0) workspace[desc.region_begin] = desc.bytes;
  }
}

__global__ void __launch_bounds__(kThreads)
    combine(TensorTable table, const u64* workspace, u64* out) {
  __shared__ CtaScratch scratch;
  const TensorDesc desc = table.at(blockIdx.x);
  const std::uint64_t chunks = chunk_count(desc.bytes);
  const u8* region = chunks == 0 ? reinterpret_cast<const u8*>(&kZeroLength)
                                 : reinterpret_cast<const u8*>(workspace + desc.region_begin);
  const u64 fingerprint = cta_hash(region, 8 * (chunks + 1), scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = fingerprint;
}

// Device memory freed in stream order when it goes out of scope, also on the
// error paths; the success path calls release() to see the free's own error.
class StreamBuffer {
 public:
  explicit StreamBuffer(cudaStream_t stream) : stream_(stream) {}
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  ~StreamBuffer() {
    if (ptr_ != nullptr) (void)release();  // an earlier error is already being returned
  }

  Status allocate(std::size_t bytes) {
    DTRACE_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream_));
    return {};
  }
  Status release() {
    void* ptr = ptr_;
    ptr_ = nullptr;
    DTRACE_CUDA_CHECK(cudaFreeAsync(ptr, stream_));
    return {};
  }
  unsigned char* bytes() const { return static_cast<unsigned char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

// The largest grid.x: it bounds the chunks of one call (2^31-1 chunks of
// 64 KiB, 128 TiB) and its tensors.
constexpr std::uint64_t kMaxGrid = 0x7fffffffu;

}  // namespace

Status cuda_failure(cudaError_t error, const char* call, const char* file, int line) {
  Code code = Code::cuda_error;
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) code = Code::no_device;
  if (error == cudaErrorMemoryAllocation) code = Code::out_of_memory;
  char where[64];
  std::snprintf(where, sizeof where, ":%d: ", line);
  return Status{code, std::string(file) + where + call + " failed: " + cudaGetErrorString(error) +
                          " (" + cudaGetErrorName(error) + ")"};
}

Status fingerprint_device_batch(const void* const* data, const std::size_t* bytes,
                                std::size_t count, void* stream_handle, std::uint64_t* out) {
  if (count == 0) return {};
  if (data == nullptr || bytes == nullptr || out == nullptr) {
    return Status{Code::invalid_argument, "null data, bytes or out array"};
  }
  if (count > kMaxGrid) return Status{Code::invalid_argument, "too many tensors for one call"};

  std::vector<TensorDesc> descs(count);
  std::uint64_t chunks = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (data[i] == nullptr && bytes[i] > 0) {
      return Status{Code::invalid_argument,
                    "tensor " + std::to_string(i) + " is null but not empty"};
    }
    descs[i] = TensorDesc{static_cast<const u8*>(data[i]), bytes[i], chunks, chunks + i};
    chunks += chunk_count(bytes[i]);
  }
  if (chunks > kMaxGrid)
    return Status{Code::invalid_argument, "too many 64 KiB chunks for one call"};

  // One workspace: [count+chunks region words][count fingerprints][descs of a batch].
  const std::size_t region_bytes = (chunks + count) * sizeof(u64);
  const std::size_t out_bytes = count * sizeof(u64);
  const std::size_t desc_bytes = count > 1 ? count * sizeof(TensorDesc) : 0;
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  StreamBuffer workspace(stream);
  if (Status s = workspace.allocate(region_bytes + out_bytes + desc_bytes); !s.ok()) return s;
  auto* regions = reinterpret_cast<u64*>(workspace.bytes());
  auto* fingerprints = reinterpret_cast<u64*>(workspace.bytes() + region_bytes);

  TensorTable table{nullptr, descs[0], count};
  if (count > 1) {
    auto* device_descs =
        reinterpret_cast<TensorDesc*>(workspace.bytes() + region_bytes + out_bytes);
    DTRACE_CUDA_CHECK(
        cudaMemcpyAsync(device_descs, descs.data(), desc_bytes, cudaMemcpyHostToDevice, stream));
    table.descs = device_descs;
  }
  if (chunks > 0) {
    digest_chunks<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(table, regions);
    DTRACE_CUDA_CHECK(cudaGetLastError());
  }
  combine<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(table, regions, fingerprints);
  DTRACE_CUDA_CHECK(cudaGetLastError());
  DTRACE_CUDA_CHECK(cudaMemcpyAsync(out, fingerprints, out_bytes, cudaMemcpyDeviceToHost, stream));
  if (Status s = workspace.release(); !s.ok()) return s;
  DTRACE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {};
}

Status fingerprint_host_bytes_on_device(const void* data, std::size_t bytes, std::uint64_t* out) {
  if (data == nullptr && bytes > 0) return Status{Code::invalid_argument, "null data"};
  if (out == nullptr) return Status{Code::invalid_argument, "null out"};
  cudaStream_t stream = nullptr;
  StreamBuffer copy(stream);
  if (Status s = copy.allocate(bytes > 0 ? bytes : 1); !s.ok()) return s;
  if (bytes > 0) {
    DTRACE_CUDA_CHECK(cudaMemcpyAsync(copy.bytes(), data, bytes, cudaMemcpyHostToDevice, stream));
  }
  const void* device_data = copy.bytes();
  if (Status s = fingerprint_device_batch(&device_data, &bytes, 1, stream, out); !s.ok()) return s;
  return copy.release();
}

}  // namespace dtrace::gpu
