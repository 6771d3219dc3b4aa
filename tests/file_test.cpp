// Fingerprints of files: mapped or streamed, on any number of threads, or
// handed whole to another hasher (the GPU's, for `dtrace hash --gpu`).
#include "fingerprint/file.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "fingerprint/fingerprint.hpp"

namespace {

struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::vector<char>& bytes) {
    path = std::filesystem::temp_directory_path() /
           ("dtrace-file-test-" + std::to_string(std::random_device{}()));
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::filesystem::remove(path); }
};

std::vector<char> random_bytes(std::size_t n) {
  std::mt19937 rng(9);
  std::vector<char> v(n);
  for (auto& b : v) b = static_cast<char>(rng());
  return v;
}

}  // namespace

TEST_CASE("a file's fingerprint does not depend on the number of threads") {
  const auto bytes = random_bytes((9u << 20) + 5);  // above the threading threshold
  const TempFile file(bytes);
  const std::uint64_t expected = dtrace::fingerprint(bytes.data(), bytes.size());
  for (unsigned threads : {0u, 1u, 2u, 3u}) {
    auto got = dtrace::fingerprint_file(file.path.string(), threads);
    REQUIRE(got.ok());
    CHECK(*got == expected);
  }
}

TEST_CASE("fingerprint_file_with hands the whole file to the given hasher") {
  const auto bytes = random_bytes(200001);
  const TempFile file(bytes);
  std::size_t seen = 0;
  auto got = dtrace::fingerprint_file_with(
      file.path.string(), [&](const void* data, std::size_t size) -> dtrace::Result<std::uint64_t> {
        seen = size;
        return dtrace::fingerprint(data, size);
      });
  REQUIRE(got.ok());
  CHECK(seen == bytes.size());
  CHECK(*got == dtrace::fingerprint(bytes.data(), bytes.size()));

  const TempFile empty(std::vector<char>{});
  auto nothing = dtrace::fingerprint_file_with(
      empty.path.string(), [](const void*, std::size_t size) -> dtrace::Result<std::uint64_t> {
        return dtrace::fingerprint(nullptr, size);
      });
  REQUIRE(nothing.ok());
  CHECK(dtrace::to_hex16(*nothing) == "c77b3abb6f87acd9");
}

TEST_CASE("file errors name the file") {
  auto missing = dtrace::fingerprint_file("/nonexistent/dtrace-test");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("/nonexistent/dtrace-test: cannot open") == 0);
  auto directory = dtrace::fingerprint_file_with(
      "/", [](const void*, std::size_t) -> dtrace::Result<std::uint64_t> { return 0ull; });
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.error().message == "/: is a directory");
}
