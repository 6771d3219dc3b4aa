/* A C program built against the installed dtrace.h and libdtrace, as a user's
 * recorder would be: prints the fingerprint of FILE like `dtrace hash`, from
 * the host function, and checks that the device function either works (on a
 * GPU) or returns a documented code. Exit 0 on success, 1 otherwise. */
#include <dtrace/dtrace.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 1;
  }
  FILE* file = fopen(argv[1], "rb");
  if (file == NULL) return 1;
  size_t capacity = 1 << 16, size = 0, got;
  unsigned char* data = malloc(capacity);
  while (data != NULL && (got = fread(data + size, 1, capacity - size, file)) > 0) {
    size += got;
    if (size == capacity) data = realloc(data, capacity *= 2);
  }
  fclose(file);
  if (data == NULL) return 1;

  uint64_t host = 0;
  int code = dtrace_fingerprint_host(data, size, &host);
  if (code != DTRACE_OK) {
    fprintf(stderr, "dtrace_fingerprint_host: %s\n", dtrace_error_string(code));
    return 1;
  }
  /* An empty tensor needs no device memory: on a GPU this gives the known
   * answer; without one (or without CUDA) a documented code, never a crash. */
  uint64_t device = 0;
  code = dtrace_fingerprint_device(NULL, 0, NULL, &device);
  if (code == DTRACE_OK && device != UINT64_C(0xc77b3abb6f87acd9)) {
    fprintf(stderr, "dtrace_fingerprint_device: wrong empty fingerprint %016" PRIx64 "\n", device);
    return 1;
  }
  if (code != DTRACE_OK && code != DTRACE_ERROR_CUDA_UNAVAILABLE &&
      code != DTRACE_ERROR_NO_DEVICE) {
    fprintf(stderr, "dtrace_fingerprint_device: unexpected code %d: %s\n", code,
            dtrace_error_string(code));
    return 1;
  }
  fprintf(stderr, "libdtrace %s; device function: %s\n", dtrace_version(),
          dtrace_error_string(code));
  printf("%016" PRIx64 "  %s\n", host, argv[1]);
  free(data);
  return 0;
}
