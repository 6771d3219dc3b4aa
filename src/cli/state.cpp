#include "cli/state.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace dtrace::cli {

namespace fs = std::filesystem;

namespace {
const fs::path kStateDir = ".dtrace";
const fs::path kLastDiff = kStateDir / "last-diff.json";
}  // namespace

void save_last_diff(const diff::Report& report) {
  std::error_code ec;
  nlohmann::json j = {{"run_a", fs::absolute(report.run_a, ec).string()},
                      {"run_b", fs::absolute(report.run_b, ec).string()}};
  if (report.first) {
    j["step"] = report.first->step;
    j["rank"] = report.first->rank;
  }
  fs::create_directories(kStateDir, ec);
  // Written beside and renamed, so a reader never sees half a file.
  const fs::path tmp = kStateDir / "last-diff.json.tmp";
  {
    std::ofstream out(tmp);
    if (!out) {
      spdlog::debug("cannot write {}: bisect will need the runs named", tmp.string());
      return;
    }
    out << j.dump(2) << "\n";
  }
  fs::rename(tmp, kLastDiff, ec);
}

std::optional<LastDiff> load_last_diff() {
  std::ifstream in(kLastDiff);
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("run_a") || !j.contains("run_b")) {
    return std::nullopt;
  }
  LastDiff last;
  last.run_a = j["run_a"].get<std::string>();
  last.run_b = j["run_b"].get<std::string>();
  if (j.contains("step")) last.step = j["step"].get<std::int64_t>();
  if (j.contains("rank")) last.rank = j["rank"].get<std::int32_t>();
  return last;
}

}  // namespace dtrace::cli
