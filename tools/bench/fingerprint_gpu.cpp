// GPU fingerprint benchmark (issue 5), through the public C API as a recorder
// would call it. Prints `key value` lines that tools/bench/fingerprint.sh turns
// into a table:
//   - one device buffer (default 1 GiB): dtrace_fingerprint_device throughput,
//     each call timed end to end (launches, workspace, copy back, sync), against
//     a device-to-device cudaMemcpy of the same buffer in the same run;
//   - a batch (default 10,000 tensors of 4 KiB .. 1 MiB) in one
//     dtrace_fingerprint_device_batch call: effective bytes per second.
// Every timed result is checked against the CPU fingerprint first.
// Exits 77 with a message where no GPU is visible.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dtrace/dtrace.h"
#include "fingerprint/fingerprint.hpp"

namespace {

// A benchmark is a program, not the library: it may print and exit.
void check_cuda(cudaError_t error, const char* call, int line) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "fingerprint_gpu:%d: %s failed: %s\n", line, call,
               cudaGetErrorString(error));
  std::exit(2);
}
#define BENCH_CUDA(call) check_cuda((call), #call, __LINE__)

void check_dtrace(int code, const char* call) {
  if (code == DTRACE_OK) return;
  std::fprintf(stderr, "fingerprint_gpu: %s failed: %s\n", call, dtrace_error_string(code));
  std::exit(2);
}

// splitmix64: fast enough to fill a GiB of distinct bytes in about a second.
void fill(std::vector<unsigned char>& bytes, std::uint64_t seed) {
  std::uint64_t state = seed;
  for (std::size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    std::memcpy(bytes.data() + i, &z, 8);
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::size_t arg(int argc, char** argv, const char* name, std::size_t fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::strtoull(argv[i + 1], nullptr, 10);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t bytes = arg(argc, argv, "--bytes", 1ull << 30);
  const std::size_t tensors = arg(argc, argv, "--tensors", 10000);
  const int repeats = static_cast<int>(arg(argc, argv, "--repeats", 20));

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device; GPU figures not measured\n");
    return 77;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s\n", prop.name);
  std::printf("library %s\n", dtrace_version());

  // --- one large buffer
  std::vector<unsigned char> host(bytes);
  fill(host, 1);
  unsigned char* buffer = nullptr;
  unsigned char* copy = nullptr;
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&buffer), bytes));
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&copy), bytes));
  BENCH_CUDA(cudaMemcpy(buffer, host.data(), bytes, cudaMemcpyHostToDevice));

  std::uint64_t digest = 0;
  check_dtrace(dtrace_fingerprint_device(buffer, bytes, nullptr, &digest),
               "dtrace_fingerprint_device");
  const bool large_ok = digest == dtrace::fingerprint(host.data(), bytes, 0);
  std::printf("large_matches_cpu %s\n", large_ok ? "yes" : "NO");

  std::vector<double> hash_times, copy_times;
  for (int i = 0; i < repeats; ++i) {
    BENCH_CUDA(cudaDeviceSynchronize());
    auto start = std::chrono::steady_clock::now();
    BENCH_CUDA(cudaMemcpy(copy, buffer, bytes, cudaMemcpyDeviceToDevice));
    BENCH_CUDA(cudaDeviceSynchronize());
    copy_times.push_back(seconds_since(start));
    start = std::chrono::steady_clock::now();
    check_dtrace(dtrace_fingerprint_device(buffer, bytes, nullptr, &digest),
                 "dtrace_fingerprint_device");
    hash_times.push_back(seconds_since(start));
  }
  const double hash_s = median(hash_times), copy_s = median(copy_times);
  std::printf("large_bytes %zu\n", bytes);
  std::printf("large_fingerprint_seconds %.6f\n", hash_s);
  std::printf("large_fingerprint_TBps %.3f\n", bytes / hash_s / 1e12);
  std::printf("large_copy_seconds %.6f\n", copy_s);
  std::printf("large_copy_TBps_read_plus_write %.3f\n", 2.0 * bytes / copy_s / 1e12);
  std::printf("large_fingerprint_over_copy_time %.3f\n", hash_s / copy_s);
  BENCH_CUDA(cudaFree(copy));
  BENCH_CUDA(cudaFree(buffer));

  // --- a batch of many tensors, 4 KiB .. 1 MiB, at 256-byte aligned offsets
  std::vector<std::size_t> sizes(tensors), offsets(tensors);
  std::uint64_t rng = 12345;
  std::size_t total = 0;
  for (std::size_t i = 0; i < tensors; ++i) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    sizes[i] = 4096 + (rng >> 33) % ((1u << 20) - 4096 + 1);
    offsets[i] = total;
    total += (sizes[i] + 255) & ~std::size_t{255};
  }
  std::vector<unsigned char> batch_host(total);
  fill(batch_host, 2);
  unsigned char* batch = nullptr;
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&batch), total));
  BENCH_CUDA(cudaMemcpy(batch, batch_host.data(), total, cudaMemcpyHostToDevice));
  std::vector<const void*> pointers(tensors);
  for (std::size_t i = 0; i < tensors; ++i) pointers[i] = batch + offsets[i];
  std::vector<std::uint64_t> digests(tensors);
  check_dtrace(dtrace_fingerprint_device_batch(pointers.data(), sizes.data(), tensors, nullptr,
                                               digests.data()),
               "dtrace_fingerprint_device_batch");
  bool batch_ok = true;
  for (std::size_t i = 0; i < tensors; i += std::max<std::size_t>(1, tensors / 200)) {
    batch_ok =
        batch_ok && digests[i] == dtrace::fingerprint(batch_host.data() + offsets[i], sizes[i]);
  }
  std::printf("batch_matches_cpu %s\n", batch_ok ? "yes" : "NO");
  std::size_t batch_bytes = 0;
  for (std::size_t s : sizes) batch_bytes += s;
  std::vector<double> batch_times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    check_dtrace(dtrace_fingerprint_device_batch(pointers.data(), sizes.data(), tensors, nullptr,
                                                 digests.data()),
                 "dtrace_fingerprint_device_batch");
    batch_times.push_back(seconds_since(start));
  }
  const double batch_s = median(batch_times);
  std::printf("batch_tensors %zu\n", tensors);
  std::printf("batch_bytes %zu\n", batch_bytes);
  std::printf("batch_seconds %.6f\n", batch_s);
  std::printf("batch_TBps %.3f\n", batch_bytes / batch_s / 1e12);
  BENCH_CUDA(cudaFree(batch));
  return large_ok && batch_ok ? 0 : 1;
}
