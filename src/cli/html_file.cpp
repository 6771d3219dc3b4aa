#include "cli/html_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli/commands.hpp"

namespace dtrace::cli {

namespace fs = std::filesystem;

namespace {

// True when `inner` is `outer` or lies under it (both made absolute, with
// symbolic links resolved as far as they exist).
bool within(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  const fs::path i = fs::weakly_canonical(inner, ec);
  if (ec) return false;
  const fs::path o = fs::weakly_canonical(outer, ec);
  if (ec) return false;
  auto it = i.begin();
  for (auto part = o.begin(); part != o.end(); ++part, ++it) {
    if (part->empty()) continue;
    if (it == i.end() || *it != *part) return false;
  }
  return true;
}

bool is_html_page(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[15] = {};
  in.read(head, sizeof head);
  return in.gcount() == sizeof head && std::memcmp(head, "<!DOCTYPE html>", sizeof head) == 0;
}

}  // namespace

void check_html_target(const std::string& path, const std::string& run_a,
                       const std::string& run_b) {
  if (path.empty()) throw Failure("--html: no file named");
  for (const std::string& run : {run_a, run_b}) {
    if (!run.empty() && within(path, run)) {
      throw Failure("--html " + path + ": inside the run " + run +
                    ", whose files are the user's: choose another path");
    }
  }
  std::error_code ec;
  const fs::path parent =
      fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec))
    throw Failure("--html " + path + ": no directory " + parent.string());
  const fs::file_status status = fs::symlink_status(path, ec);
  if (fs::exists(status)) {
    if (!fs::is_regular_file(status) || !is_html_page(path)) {
      throw Failure("--html " + path +
                    ": exists and is not an HTML report; refusing to replace it");
    }
  }
}

void write_html_report(const std::string& path, const std::string& text, const std::string& run_a,
                       const std::string& run_b) {
  check_html_target(path, run_a, run_b);
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string temporary = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = mkstemp(temporary.data());
  if (fd < 0)
    throw Failure("--html " + path + ": cannot create a file in " + dir.string() + ": " +
                  std::strerror(errno));
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(temporary.c_str());
      throw Failure("--html " + path + ": write failed: " + why);
    }
    written += static_cast<std::size_t>(n);
  }
  // mkstemp makes the file 0600; a report is as readable as any file the user makes.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(temporary.c_str());
    throw Failure("--html " + path + ": cannot write: " + std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    throw Failure("--html " + path + ": cannot rename the finished page into place: " + why);
  }
}

}  // namespace dtrace::cli
