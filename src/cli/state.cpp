#include "cli/state.hpp"

#include <spdlog/spdlog.h>

#include <cstdint>
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

void forget_last_diff() {
  std::error_code ec;
  fs::remove(kLastDiff, ec);
}

std::optional<LastDiff> load_last_diff() {
  std::ifstream in(kLastDiff);
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  // A file someone edited or that is not ours counts as no state at all.
  auto is_text = [&](const char* key) { return j.contains(key) && j[key].is_string(); };
  auto is_whole = [&](const char* key, std::int64_t lo, std::int64_t hi) {
    if (!j.contains(key)) return true;
    const auto& v = j[key];
    return v.is_number_integer() && v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi &&
           !(v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi));
  };
  if (j.is_discarded() || !j.is_object() || !is_text("run_a") || !is_text("run_b") ||
      !is_whole("step", INT64_MIN, INT64_MAX) || !is_whole("rank", 0, INT32_MAX)) {
    return std::nullopt;
  }
  LastDiff last;
  last.run_a = j["run_a"].get<std::string>();
  last.run_b = j["run_b"].get<std::string>();
  if (j.contains("step")) last.step = j["step"].get<std::int64_t>();
  if (j.contains("rank")) last.rank = static_cast<std::int32_t>(j["rank"].get<std::int64_t>());
  return last;
}

}  // namespace dtrace::cli
