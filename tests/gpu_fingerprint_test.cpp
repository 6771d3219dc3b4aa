// Device fingerprints against the CPU's, through the public C API: random
// buffers of many sizes at every alignment, a mixed batch, a user stream.
// Built only with CUDA; where there is no CUDA device the whole program says
// so and exits 77, which meson reports as a skipped test; a device the system
// shows that CUDA cannot use fails it (gpu_probe.hpp).
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "dtrace/dtrace.h"
#include "fingerprint/fingerprint.hpp"
#include "gpu_probe.hpp"

namespace {

// Test scaffolding, not library code: a failed CUDA call fails the test.
#define TEST_CUDA(call) REQUIRE((call) == cudaSuccess)

struct DeviceBytes {
  unsigned char* ptr = nullptr;
  explicit DeviceBytes(std::size_t bytes) {
    TEST_CUDA(cudaMalloc(reinterpret_cast<void**>(&ptr), bytes));
  }
  ~DeviceBytes() { cudaFree(ptr); }
};

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

}  // namespace

TEST_CASE("device fingerprint equals the CPU's for many sizes at every alignment") {
  std::vector<std::size_t> sizes{0,
                                 1,
                                 3,
                                 4,
                                 8,
                                 9,
                                 16,
                                 17,
                                 128,
                                 129,
                                 240,
                                 241,
                                 255,
                                 256,
                                 1023,
                                 1024,
                                 1025,
                                 4096,
                                 65535,
                                 65536,
                                 65537,
                                 131072 + 5,
                                 (1u << 20) + 3,
                                 (24u << 20) + 7};
  std::mt19937_64 rng(1);
  for (int i = 0; i < 20; ++i) sizes.push_back(rng() % (3u << 20));
  const std::size_t largest = 24u << 20;
  const auto host = random_bytes(largest + 64, 2);
  DeviceBytes device(largest + 64);
  TEST_CUDA(cudaMemcpy(device.ptr, host.data(), host.size(), cudaMemcpyHostToDevice));
  for (const std::size_t size : sizes) {
    for (unsigned misalign = 0; misalign < 8; ++misalign) {
      INFO("size " << size << ", misalignment " << misalign);
      std::uint64_t got = 0;
      REQUIRE(dtrace_fingerprint_device(device.ptr + misalign, size, nullptr, &got) == DTRACE_OK);
      REQUIRE(got == dtrace::fingerprint(host.data() + misalign, size));
    }
  }
}

TEST_CASE("a mixed batch gives each tensor its own fingerprint, on a user stream") {
  std::mt19937_64 rng(3);
  const std::size_t count = 777;
  std::vector<std::size_t> offsets, sizes;
  std::size_t total = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const unsigned kind = static_cast<unsigned>(rng() % 4);
    const std::size_t size = kind == 0   ? rng() % 241
                             : kind == 1 ? rng() % 4096
                                         : rng() % (300u << 10);
    total += rng() % 8;  // any alignment
    offsets.push_back(total);
    sizes.push_back(size);
    total += size;
  }
  const auto host = random_bytes(total, 4);
  DeviceBytes device(total);
  TEST_CUDA(cudaMemcpy(device.ptr, host.data(), total, cudaMemcpyHostToDevice));
  std::vector<const void*> pointers;
  for (std::size_t i = 0; i < count; ++i) pointers.push_back(device.ptr + offsets[i]);
  pointers[5] = nullptr;  // an empty tensor may have no storage
  sizes[5] = 0;

  cudaStream_t stream = nullptr;
  TEST_CUDA(cudaStreamCreate(&stream));
  std::vector<std::uint64_t> got(count);
  REQUIRE(dtrace_fingerprint_device_batch(pointers.data(), sizes.data(), count, stream,
                                          got.data()) == DTRACE_OK);
  TEST_CUDA(cudaStreamDestroy(stream));
  for (std::size_t i = 0; i < count; ++i) {
    INFO("tensor " << i << ", size " << sizes[i]);
    REQUIRE(got[i] == dtrace::fingerprint(host.data() + offsets[i], sizes[i]));
  }
}

TEST_CASE("a batch of one and a batch of many agree with single calls") {
  const auto host = random_bytes(200000, 5);
  DeviceBytes device(host.size());
  TEST_CUDA(cudaMemcpy(device.ptr, host.data(), host.size(), cudaMemcpyHostToDevice));
  const void* pointers[3] = {device.ptr, device.ptr + 1, device.ptr + 70000};
  const std::size_t sizes[3] = {200000, 65536, 0};
  std::uint64_t batch[3] = {};
  REQUIRE(dtrace_fingerprint_device_batch(pointers, sizes, 3, nullptr, batch) == DTRACE_OK);
  for (int i = 0; i < 3; ++i) {
    std::uint64_t single = 0;
    REQUIRE(dtrace_fingerprint_device(pointers[i], sizes[i], nullptr, &single) == DTRACE_OK);
    CHECK(single == batch[i]);
  }
}

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  const std::string error_text =
      std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
  const auto verdict = dtrace::test::classify_gpu_probe(
      error == cudaSuccess, error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver,
      devices, dtrace::test::gpu_device_present(), error_text);
  if (verdict.probe == dtrace::test::GpuProbe::skip) {
    std::printf("%s\n", verdict.message.c_str());
    return 77;
  }
  if (verdict.probe == dtrace::test::GpuProbe::fail) {
    std::printf("%s\n", verdict.message.c_str());
    return 1;
  }
  return Catch::Session().run(argc, argv);
}
