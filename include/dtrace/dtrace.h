/* dtrace C API: tensor fingerprints (xxh3-64k/1) for recorders in any language.
 *
 * The fingerprint is a pure function of a tensor's bytes in logical order:
 *   digest_i    = XXH3_64bits(bytes[i*65536 : min((i+1)*65536, len)])
 *   fingerprint = XXH3_64bits(u64le(len) || u64le(digest_0) || u64le(digest_1) || ...)
 * (seed 0, default secret; no chunk for an empty tensor, whose fingerprint is
 * 0xc77b3abb6f87acd9). The host and device functions give the same value for
 * the same bytes, and so does `dtrace hash FILE`. Logs print it as 16 lowercase
 * hex digits ("%016" PRIx64).
 *
 * Every function returns 0 on success and one of the DTRACE_ERROR_* codes
 * below otherwise; no C++ exception crosses this interface, and the library
 * never prints. Outputs are written only on success. The functions keep no
 * state between calls and may be called from several threads at once.
 *
 * The recorder, which writes logs and answers replays, is <dtrace/recorder.h>,
 * in the same library. Link with `pkg-config --cflags --libs dtrace`.
 */
#ifndef DTRACE_DTRACE_H
#define DTRACE_DTRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. Their values are part of the ABI and never change. */
#define DTRACE_OK 0
/* A null pointer where one is required (out, or data of a non-empty tensor),
 * or a batch with more than 2^31-1 tensors or 64 KiB chunks. */
#define DTRACE_ERROR_INVALID_ARGUMENT 1
/* This libdtrace was built without CUDA: the device functions cannot run. */
#define DTRACE_ERROR_CUDA_UNAVAILABLE 2
/* Built with CUDA, but no CUDA device is visible, or the driver is too old. */
#define DTRACE_ERROR_NO_DEVICE 3
/* A device (or host) allocation failed. */
#define DTRACE_ERROR_OUT_OF_MEMORY 4
/* Another CUDA call failed: an invalid pointer or stream, a kernel fault. A
 * fault during the kernel leaves the CUDA context unusable, as in any CUDA
 * program: pass only pointers to device-accessible memory. */
#define DTRACE_ERROR_CUDA 5
/* An unexpected failure inside the library (a bug: please report it). */
#define DTRACE_ERROR_INTERNAL 6
/* The recorder (<dtrace/recorder.h>) adds these. The handle's
 * dtrace_recorder_last_error() names the variable, file or record. */
/* A DTRACE_* variable has a bad value, or variables that cannot go together
 * are set (dtrace-fp(5) lists them). */
#define DTRACE_ERROR_ENVIRONMENT 7
/* A file or directory cannot be created, read or written; a run's file exists
 * already (never overwritten); a capture is damaged. */
#define DTRACE_ERROR_IO 8
/* A call out of order: a record outside a step, a step begun twice or not
 * after the last one, a pop without a push, a handle whose open failed. */
#define DTRACE_ERROR_ORDER 9
/* The capture (DTRACE_INPUTS) holds no such record. */
#define DTRACE_ERROR_NOT_FOUND 10

/* Fingerprint of `bytes` bytes of host memory at `data` (any alignment; data
 * may be NULL when bytes is 0). Uses the calling thread only. */
int dtrace_fingerprint_host(const void* data, size_t bytes, uint64_t* out);

/* Fingerprint of `bytes` bytes of device-accessible memory at `data` (device,
 * managed or mapped host memory of the current device; any alignment), computed
 * on the GPU. `cuda_stream` is a cudaStream_t, NULL for the default stream: the
 * work runs after what is already queued on that stream (so it sees the tensor
 * as the preceding kernels left it), and the call returns when *out is written.
 * It allocates a small workspace (8 bytes per 64 KiB, stream-ordered). */
int dtrace_fingerprint_device(const void* data, size_t bytes, void* cuda_stream, uint64_t* out);

/* Fingerprints of `count` device tensors in one launch, out[i] for data[i] of
 * bytes[i] bytes: hash a step's tensors with one call, since small tensors are
 * launch-bound. Same rules as dtrace_fingerprint_device. count 0 is allowed. */
int dtrace_fingerprint_device_batch(const void* const* data, const size_t* bytes, size_t count,
                                    void* cuda_stream, uint64_t* out);

/* The library version, e.g. "0.1.0", followed by " cuda" when it was built
 * with the device functions: "0.1.0 cuda". A static string. */
const char* dtrace_version(void);

/* A static English sentence explaining an error code; unknown codes get one too. */
const char* dtrace_error_string(int code);

#ifdef __cplusplus
}
#endif

#endif /* DTRACE_DTRACE_H */
