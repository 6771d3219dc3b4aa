// The GPU fingerprint's host interface: xxh3-64k/1 (dtrace-fp(5), FINGERPRINT) of tensors
// that live in device memory, bit-identical to dtrace::fingerprint on the CPU.
//
// This header names no CUDA type, so host-only code (the C API, the CLI, tests)
// includes it without the CUDA headers; cuda/fingerprint.cu implements it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dtrace::gpu {

enum class Code {
  ok,
  invalid_argument,  // a null pointer where data is needed, a batch too large for one launch
  no_device,         // no CUDA device, or a driver too old for this runtime
  out_of_memory,     // a device allocation failed
  cuda_error,        // any other failed CUDA call; the message names it
};

// What the library returns instead of printing: a code for programs, and a
// message for people that names the file, line and CUDA call that failed.
struct Status {
  Code code = Code::ok;
  std::string message;

  bool ok() const { return code == Code::ok; }
};

// Fingerprints of `count` device-resident tensors in one pass (two kernel
// launches, whatever `count` is), written to the host array `out`.
// Runs on `stream` (a cudaStream_t; nullptr is the default stream) after the
// work already queued there, and returns when the digests are in `out`.
// data[i] may have any alignment; bytes[i] may be 0 (data[i] may then be null).
Status fingerprint_device_batch(const void* const* data, const std::size_t* bytes,
                                std::size_t count, void* stream, std::uint64_t* out);

// Copies `bytes` host bytes to the current device and fingerprints them there:
// `dtrace hash --gpu`, which shows the device computing the CPU's digests.
Status fingerprint_host_bytes_on_device(const void* data, std::size_t bytes, std::uint64_t* out);

}  // namespace dtrace::gpu
