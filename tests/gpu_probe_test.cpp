// The rules by which the GPU tests skip (gpu_probe.hpp), checked on the CPU:
// only "no CUDA device" is a skip; any CUDA failure with a device present,
// and any other CUDA failure at all, is a failure.
#include "gpu_probe.hpp"

#include <catch2/catch.hpp>

using dtrace::test::classify_gpu_probe;
using dtrace::test::GpuProbe;

TEST_CASE("the GPU tests run where CUDA counts a device") {
  CHECK(classify_gpu_probe(true, false, 1, true, "").probe == GpuProbe::run);
  CHECK(classify_gpu_probe(true, false, 2, false, "").probe == GpuProbe::run);
}

TEST_CASE("the GPU tests skip only where there is no CUDA device") {
  const auto none = classify_gpu_probe(false, true, 0, false, "cudaErrorNoDevice");
  CHECK(none.probe == GpuProbe::skip);
  CHECK(none.message ==
        "SKIP: no CUDA device (cudaErrorNoDevice); the GPU fingerprint tests did not run");
  CHECK(classify_gpu_probe(true, false, 0, false, "").probe == GpuProbe::skip);
  // No driver installed: the runtime says "insufficient driver".
  CHECK(classify_gpu_probe(false, true, 0, false, "cudaErrorInsufficientDriver").probe ==
        GpuProbe::skip);
}

TEST_CASE("a CUDA failure with a device present fails the GPU tests") {
  const auto broken = classify_gpu_probe(false, true, 0, true, "cudaErrorInsufficientDriver");
  CHECK(broken.probe == GpuProbe::fail);
  CHECK(broken.message ==
        "FAIL: the system shows a GPU but CUDA cannot use it (cudaErrorInsufficientDriver)");
  CHECK(classify_gpu_probe(true, false, 0, true, "").probe == GpuProbe::fail);
  CHECK(classify_gpu_probe(false, false, 0, true, "cudaErrorInitializationError").probe ==
        GpuProbe::fail);
}

TEST_CASE("a CUDA failure other than no device fails even where no device shows") {
  const auto other = classify_gpu_probe(false, false, 0, false, "cudaErrorInitializationError");
  CHECK(other.probe == GpuProbe::fail);
  CHECK(other.message == "FAIL: CUDA failed to count devices (cudaErrorInitializationError)");
}
