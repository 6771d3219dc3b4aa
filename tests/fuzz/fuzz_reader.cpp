// libFuzzer target for log::RunReader (src/log/reader.cpp) on real files.
//
// The input becomes a run directory: its bytes are split at form feeds ('\f')
// into up to four files rank0.jsonl, rank1.jsonl, ... (without a form feed it
// is one file). The reader opens the run and reads every step to the end; it
// may return an Error (bad input), but must not crash, leak or loop forever,
// and every Error and note must name a file.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "log/reader.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path& run_directory() {
  static const fs::path dir = [] {
    std::string pattern = (fs::temp_directory_path() / "dtrace-fuzz.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(run_directory(), ec);
    });
    return fs::path(pattern);
  }();
  return dir;
}

void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "reader contract broken: %s\n", what);
    std::abort();
  }
}

bool names_a_file(const std::string& message) { return message.find(".jsonl") != std::string::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path& dir = run_directory();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) fs::remove(entry.path(), ec);

  std::string_view input(reinterpret_cast<const char*>(data), size);
  for (int file = 0; file < 4 && (file == 0 || !input.empty()); ++file) {
    std::size_t cut = file == 3 ? std::string_view::npos : input.find('\f');
    const std::string_view part = input.substr(0, cut);
    input.remove_prefix(cut == std::string_view::npos ? input.size() : cut + 1);
    std::ofstream out(dir / ("rank" + std::to_string(file) + ".jsonl"), std::ios::binary);
    out.write(part.data(), static_cast<std::streamsize>(part.size()));
  }

  auto reader = dtrace::log::RunReader::open(dir.string());
  if (!reader) {
    require(names_a_file(reader.error().message) || reader.error().message.find(dir.string()) == 0,
            "an open error names the file or run");
    return 0;
  }
  std::uint64_t records = 0;
  for (int steps = 0;; ++steps) {
    require(steps < 1'000'000, "the reader ends");
    auto step = (*reader)->next();
    if (!step) {
      require(names_a_file(step.error().message), "a read error names the file");
      break;
    }
    if (!*step) break;
    for (const auto& record : (*step)->records) {
      require(record.file < (*reader)->files().size(), "a record's file is one of the run's");
      (void)(*reader)->location(record);
      ++records;
    }
  }
  require(records <= (*reader)->records_read(), "records handed out were read");
  for (const std::string& note : (*reader)->notes()) require(names_a_file(note), "a note names a file");
  return 0;
}
