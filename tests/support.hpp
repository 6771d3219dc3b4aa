// Helpers shared by the unit tests: a fresh temporary directory per test (tests
// never write into the source tree) and small file writers.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace dtrace::test {

// A directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dtrace-test.XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    root_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& root() const { return root_; }
  std::filesystem::path path() const { return root_; }
  // A path inside the directory (nothing created).
  std::string operator/(const std::string& name) const { return (std::filesystem::path(root_) / name).string(); }
  // A path inside the directory, creating the directories above it.
  std::string path(const std::string& relative) const {
    const std::filesystem::path p = std::filesystem::path(root_) / relative;
    std::filesystem::create_directories(p.parent_path());
    return p.string();
  }

 private:
  std::string root_;
};

// Writes `text` byte for byte (no newline added).
inline void write_text(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REQUIRE(out);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  REQUIRE(out);
}

}  // namespace dtrace::test
