#include "cli/state.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace dtrace::cli {

namespace fs = std::filesystem;

namespace {
const fs::path kStateDir = ".dtrace";
const fs::path kLastDiff = kStateDir / "last-diff.json";
// Far more than the few paths it holds: anything larger is not ours.
constexpr off_t kMaxStateBytes = 1 << 20;

// A run as this directory names it. The diff stores its runs absolute, so the
// state means the same runs whatever they were called; one inside the current
// directory (where ./.dtrace/ is, so where the diff ran) reads relative again,
// as the user typed it, and bisect's report shows no path of this machine's.
std::string named_here(const std::string& path) {
  std::error_code ec;
  const fs::path here = fs::current_path(ec);
  if (ec) return path;
  const fs::path relative = fs::path(path).lexically_relative(here);
  if (relative.empty() || *relative.begin() == "..") return path;
  return relative.string();
}
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
  // Written beside and renamed, so a reader never sees half a file. The
  // temporary is made afresh and never followed: a link or FIFO left under
  // its name (a shared directory) must not make dtrace write through it into
  // someone's file, or block.
  const fs::path tmp = kStateDir / "last-diff.json.tmp";
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    spdlog::debug("cannot write {}: bisect will need the runs named", tmp.string());
    return;
  }
  const std::string text = j.dump(2) + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (written) fs::rename(tmp, kLastDiff, ec);
  if (!written || ec) ::unlink(tmp.c_str());
}

void forget_last_diff() {
  std::error_code ec;
  fs::remove(kLastDiff, ec);
}

std::optional<LastDiff> load_last_diff() {
  // Only a small regular file: a FIFO would block the open, a device never end.
  struct stat st {};
  if (::stat(kLastDiff.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxStateBytes) {
    return std::nullopt;
  }
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
  last.run_a = named_here(j["run_a"].get<std::string>());
  last.run_b = named_here(j["run_b"].get<std::string>());
  if (j.contains("step")) last.step = j["step"].get<std::int64_t>();
  if (j.contains("rank")) last.rank = static_cast<std::int32_t>(j["rank"].get<std::int64_t>());
  return last;
}

}  // namespace dtrace::cli
