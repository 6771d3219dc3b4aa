// Whether the GPU tests may be skipped: only when there is no CUDA device.
// A device the operating system shows (a driver's /proc/driver/nvidia/gpus
// entry or a /dev/nvidiaN node) that CUDA then fails to use is a failure, not
// a skip: a broken driver or runtime on a GPU machine must not read as green.
// Kept free of CUDA headers so the CPU unit tests check these rules
// (gpu_probe_test.cpp); tools/gpu-present.sh holds the same rules for scripts.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace dtrace::test {

enum class GpuProbe { run, skip, fail };

struct GpuProbeVerdict {
  GpuProbe probe;
  std::string message;  // for skip and fail: the line to print
};

// The operating system shows an NVIDIA GPU, whatever CUDA says.
// DTRACE_GPU_PRESENT=0 or 1 overrides (tests of these rules).
inline bool gpu_device_present() {
  if (const char* forced = std::getenv("DTRACE_GPU_PRESENT")) return std::string_view(forced) == "1";
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory("/proc/driver/nvidia/gpus", ec) &&
      !fs::is_empty("/proc/driver/nvidia/gpus", ec)) {
    return true;
  }
  for (int i = 0; i < 16; ++i) {
    if (fs::exists("/dev/nvidia" + std::to_string(i), ec)) return true;
  }
  return false;
}

// call_ok: cudaGetDeviceCount returned cudaSuccess; says_no_device: it returned
// cudaErrorNoDevice or cudaErrorInsufficientDriver (what the runtime says
// where no driver is installed); error_text: its cudaGetErrorName/String.
inline GpuProbeVerdict classify_gpu_probe(bool call_ok, bool says_no_device, int devices,
                                          bool device_present, std::string_view error_text) {
  if (call_ok && devices > 0) return {GpuProbe::run, {}};
  const std::string why = call_ok ? std::string("device count 0") : std::string(error_text);
  if (device_present) {
    return {GpuProbe::fail, "FAIL: the system shows a GPU but CUDA cannot use it (" + why + ")"};
  }
  if (call_ok || says_no_device) {
    return {GpuProbe::skip, "SKIP: no CUDA device (" + why + "); the GPU fingerprint tests did not run"};
  }
  return {GpuProbe::fail, "FAIL: CUDA failed to count devices (" + why + ")"};
}

}  // namespace dtrace::test
