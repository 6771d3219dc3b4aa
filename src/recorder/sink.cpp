#include "recorder/sink.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

#include "dtrace/recorder.hpp"

namespace dtrace::recording {

namespace {

namespace fs = std::filesystem;

std::shared_ptr<LogSink> create_with_header(const std::string& path, std::string_view header_line) {
  auto writer = log::Writer::create(path);
  if (!writer) throw RecorderError(writer.error().message);
  auto sink = std::make_shared<LogSink>(std::move(*writer));
  sink->append(std::string(header_line) + '\n');
  return sink;
}

// Sinks by normalised path, so ranks naming one file by different spellings
// still share it. Held for the life of the process, not of its recorders: a
// rank that finishes before another rank opens must not close the file under
// it (the late rank would find a file with content and refuse it), and every
// line is already flushed at its step end, so keeping it open loses nothing.
struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<LogSink>> sinks;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

std::string registry_key(const std::string& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

}  // namespace

std::shared_ptr<LogSink> LogSink::create(const std::string& path, std::string_view header_line) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path, ec))) {
    throw RecorderError(path +
                        ": exists already; a recorded run is never overwritten "
                        "(choose another run directory or remove it)");
  }
  return create_with_header(path, header_line);
}

std::shared_ptr<LogSink> LogSink::open_shared(const std::string& path, std::string_view header_line,
                                              std::string_view variable) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::string key = registry_key(path);
  if (auto it = r.sinks.find(key); it != r.sinks.end()) return it->second;
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  if (fs::exists(status)) {
    if (!fs::is_regular_file(status) || fs::file_size(path, ec) != 0 || ec) {
      throw RecorderError(std::string(variable) + "=" + path +
                          ": exists already and is not empty; it is never overwritten");
    }
    fs::remove(path, ec);  // an empty placeholder: nothing is lost by replacing it
  }
  auto sink = create_with_header(path, header_line);
  r.sinks[key] = sink;
  return sink;
}

void LogSink::append(std::string_view lines) {
  if (lines.empty()) return;
  std::lock_guard lock(mutex_);
  write_locked(lines);
}

void LogSink::append_step(std::string& records, std::int32_t rank, std::int64_t step, std::int64_t count,
                          std::optional<std::uint64_t> chain) {
  std::lock_guard lock(mutex_);
  const auto record_lines = static_cast<std::int64_t>(std::count(records.begin(), records.end(), '\n'));
  log::append_end_line(records, rank, step, count, chain, lines_ + record_lines + 1);
  write_locked(records);
}

void LogSink::write_locked(std::string_view lines) {
  lines_ += static_cast<std::int64_t>(std::count(lines.begin(), lines.end(), '\n'));
  // raw_line adds the newline that ends the block's last line.
  if (lines.back() == '\n') lines.remove_suffix(1);
  writer_.raw_line(lines);
  if (auto flushed = writer_.flush(); !flushed) throw RecorderError(flushed.error().message);
}

}  // namespace dtrace::recording
