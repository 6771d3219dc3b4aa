// The C API (include/dtrace/dtrace.h) as a C caller sees it: codes, not
// exceptions; the host fingerprint equal to the library's; device functions
// that say why they cannot run where they cannot.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dtrace/dtrace.h"
#include "fingerprint/fingerprint.hpp"
#include "gpu_probe.hpp"

TEST_CASE("dtrace_fingerprint_host equals dtrace::fingerprint") {
  std::vector<unsigned char> data(3 * 65536 + 11);
  std::mt19937 rng(1);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  for (std::size_t len : {0ul, 1ul, 240ul, 65536ul, data.size() - 1}) {
    std::uint64_t out = 0;
    REQUIRE(dtrace_fingerprint_host(data.data() + 1, len, &out) == DTRACE_OK);
    CHECK(out == dtrace::fingerprint(data.data() + 1, len));
  }
  std::uint64_t empty = 0;
  REQUIRE(dtrace_fingerprint_host(nullptr, 0, &empty) == DTRACE_OK);
  CHECK(dtrace::to_hex16(empty) == "c77b3abb6f87acd9");
}

TEST_CASE("C API rejects null pointers with DTRACE_ERROR_INVALID_ARGUMENT") {
  std::uint64_t out = 0;
  const char byte = 'x';
  CHECK(dtrace_fingerprint_host(&byte, 1, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
  CHECK(dtrace_fingerprint_host(nullptr, 1, &out) == DTRACE_ERROR_INVALID_ARGUMENT);
  CHECK(dtrace_fingerprint_device(nullptr, 1, nullptr, &out) == DTRACE_ERROR_INVALID_ARGUMENT);
  CHECK(dtrace_fingerprint_device_batch(nullptr, nullptr, 2, nullptr, &out) ==
        DTRACE_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("an empty batch is no work, except that a build without CUDA says it has none") {
  const bool cuda_build = std::string(dtrace_version()).find("cuda") != std::string::npos;
  CHECK(dtrace_fingerprint_device_batch(nullptr, nullptr, 0, nullptr, nullptr) ==
        (cuda_build ? DTRACE_OK : DTRACE_ERROR_CUDA_UNAVAILABLE));
}

TEST_CASE("C API device functions say why they cannot run") {
  std::uint64_t out = 0;
  const int code = dtrace_fingerprint_device(nullptr, 0, nullptr, &out);
  const std::string version = dtrace_version();
  if (version.find("cuda") == std::string::npos) {
    CHECK(code == DTRACE_ERROR_CUDA_UNAVAILABLE);
  } else {
    // A CUDA build: it works where the system shows a GPU (a device CUDA
    // cannot use there is a failure, gpu_probe.hpp), and says there is none
    // only where none is.
    if (dtrace::test::gpu_device_present()) {
      REQUIRE(code == DTRACE_OK);
      CHECK(dtrace::to_hex16(out) == "c77b3abb6f87acd9");
    } else {
      CHECK(code == DTRACE_ERROR_NO_DEVICE);
    }
  }
}

TEST_CASE("dtrace_error_string explains every code and tolerates unknown ones") {
  for (int code = DTRACE_OK; code <= DTRACE_ERROR_INTERNAL; ++code) {
    CHECK(std::strlen(dtrace_error_string(code)) > 0);
  }
  CHECK(std::string(dtrace_error_string(12345)) == "unknown dtrace error code");
  CHECK(std::string(dtrace_version()).rfind("0.1.0", 0) == 0);
}
