// Helpers for the recorder tests: a temporary directory that cleans up after
// itself, and a run read back whole with the ordinary RunReader.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dtrace/recorder.hpp"
#include "log/reader.hpp"
#include "support.hpp"

namespace test_support {

using TempDir = dtrace::test::TempDir;

// A run's steps in the order the reader hands them out; the reader stays
// alive because records point into its strings.
struct ReadRun {
  std::unique_ptr<dtrace::log::RunReader> reader;
  std::vector<dtrace::log::Step> steps;

  const dtrace::log::Step& step(std::int32_t rank, std::int64_t number) const {
    for (const auto& s : steps) {
      if (s.rank == rank && s.step == number) return s;
    }
    FAIL("no step " << number << " of rank " << rank);
    return steps.front();
  }
};

inline ReadRun read_run(const std::string& path) {
  ReadRun run;
  auto reader = dtrace::log::RunReader::open(path);
  INFO((reader ? std::string() : reader.error().message));
  REQUIRE(reader.ok());
  run.reader = std::move(*reader);
  while (true) {
    auto next = run.reader->next();
    INFO((next ? std::string() : next.error().message));
    REQUIRE(next.ok());
    if (!*next) break;
    run.steps.push_back(std::move(**next));
  }
  return run;
}

inline std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline dtrace::RunOptions options_for(const std::string& run_dir, int rank = 0,
                                      int world_size = 1) {
  dtrace::RunOptions options;
  options.run_dir = run_dir;
  options.run_name = "a";
  options.rank = rank;
  options.world_size = world_size;
  options.level = dtrace::Level::layer;
  return options;
}

inline dtrace::TensorView view(const std::vector<float>& values, std::vector<std::int64_t> shape) {
  return dtrace::TensorView{values.data(), values.size() * sizeof(float), "f32", std::move(shape),
                            std::nullopt};
}

}  // namespace test_support
