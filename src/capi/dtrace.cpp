// The C ABI of include/dtrace/dtrace.h (the recorder's, recorder.h, is in
// recorder.cpp) over the C++ library: argument checks,
// and a catch-all so no exception crosses into C, ctypes or another runtime.
#include "dtrace/dtrace.h"

#include <new>

#include "fingerprint/fingerprint.hpp"

#if DTRACE_HAVE_CUDA
#include "cuda/fingerprint.cuh"
#endif

namespace {

#if DTRACE_HAVE_CUDA
int to_error_code(const dtrace::gpu::Status& status) {
  switch (status.code) {
    case dtrace::gpu::Code::ok:
      return DTRACE_OK;
    case dtrace::gpu::Code::invalid_argument:
      return DTRACE_ERROR_INVALID_ARGUMENT;
    case dtrace::gpu::Code::no_device:
      return DTRACE_ERROR_NO_DEVICE;
    case dtrace::gpu::Code::out_of_memory:
      return DTRACE_ERROR_OUT_OF_MEMORY;
    case dtrace::gpu::Code::cuda_error:
      return DTRACE_ERROR_CUDA;
  }
  return DTRACE_ERROR_INTERNAL;
}
#endif

// Runs `body`, turning any exception into an error code.
template <typename Body>
int guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return DTRACE_ERROR_OUT_OF_MEMORY;
  } catch (...) {
    return DTRACE_ERROR_INTERNAL;
  }
}

}  // namespace

extern "C" {

int dtrace_fingerprint_host(const void* data, size_t bytes, uint64_t* out) {
  if (out == nullptr || (data == nullptr && bytes > 0)) return DTRACE_ERROR_INVALID_ARGUMENT;
  return guarded([&] {
    *out = dtrace::fingerprint(data, bytes, 1);
    return DTRACE_OK;
  });
}

int dtrace_fingerprint_device_batch(const void* const* data, const size_t* bytes, size_t count,
                                    void* cuda_stream, uint64_t* out) {
  if (count > 0 && (data == nullptr || bytes == nullptr || out == nullptr)) {
    return DTRACE_ERROR_INVALID_ARGUMENT;
  }
#if DTRACE_HAVE_CUDA
  return guarded([&] {
    return to_error_code(
        dtrace::gpu::fingerprint_device_batch(data, bytes, count, cuda_stream, out));
  });
#else
  (void)cuda_stream;
  return DTRACE_ERROR_CUDA_UNAVAILABLE;
#endif
}

int dtrace_fingerprint_device(const void* data, size_t bytes, void* cuda_stream, uint64_t* out) {
  if (out == nullptr || (data == nullptr && bytes > 0)) return DTRACE_ERROR_INVALID_ARGUMENT;
  return dtrace_fingerprint_device_batch(&data, &bytes, 1, cuda_stream, out);
}

const char* dtrace_version(void) {
#if DTRACE_HAVE_CUDA
  return DTRACE_VERSION " cuda";
#else
  return DTRACE_VERSION;
#endif
}

const char* dtrace_error_string(int code) {
  switch (code) {
    case DTRACE_OK:
      return "success";
    case DTRACE_ERROR_INVALID_ARGUMENT:
      return "invalid argument (a null pointer, a bad option or record, or a batch too large)";
    case DTRACE_ERROR_CUDA_UNAVAILABLE:
      return "this libdtrace was built without CUDA";
    case DTRACE_ERROR_NO_DEVICE:
      return "no CUDA device is available (or the driver is too old)";
    case DTRACE_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    case DTRACE_ERROR_CUDA:
      return "a CUDA call failed (invalid pointer or stream, or a kernel fault)";
    case DTRACE_ERROR_INTERNAL:
      return "internal error in libdtrace";
    case DTRACE_ERROR_ENVIRONMENT:
      return "a DTRACE_* variable has a bad value, or variables that cannot go together are set";
    case DTRACE_ERROR_IO:
      return "a file or directory cannot be created, read or written (or a capture is damaged)";
    case DTRACE_ERROR_ORDER:
      return "a call out of order (a record outside a step, a step begun twice, a failed open)";
    case DTRACE_ERROR_NOT_FOUND:
      return "the capture holds no such record";
    default:
      return "unknown dtrace error code";
  }
}

}  // extern "C"
