#include "recorder/capture.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "dtrace/recorder.hpp"
#include "fingerprint/fingerprint.hpp"
#include "log/reader.hpp"
#include "log/writer.hpp"

namespace dtrace::recording {

namespace {

namespace fs = std::filesystem;

std::string join(const std::string& dir, std::string_view name) {
  return (fs::path(dir) / fs::path(name)).string();
}

}  // namespace

void write_capture_file(const std::string& dir, const std::string& name, const void* data,
                        std::size_t bytes) {
  const std::string path = join(dir, name);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw RecorderError(path + ": cannot create capture file: " + std::strerror(errno));
  const auto* cursor = static_cast<const char*>(data);
  std::size_t left = bytes;
  while (left > 0) {
    const ssize_t wrote = ::write(fd, cursor, left);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw RecorderError(path + ": write failed: " + why);
    }
    cursor += wrote;
    left -= static_cast<std::size_t>(wrote);
  }
  if (::close(fd) != 0) throw RecorderError(path + ": write failed: " + std::strerror(errno));
}

CaptureIndex CaptureIndex::load(const std::string& dir, std::int32_t rank,
                                std::optional<std::int64_t> step, std::string_view variable) {
  // The index is capture.jsonl, or one capture.rank<r>.jsonl per process of a
  // job of several (dtrace-replay/1.1), read together as one log.
  // The directory holds nothing else named *.jsonl, so it is read as a run.
  bool indexed = false;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    indexed = indexed || (name.starts_with("capture") && name.ends_with(".jsonl"));
  }
  if (!indexed) {
    throw RecorderError(std::string(variable) + "=" + dir + ": no " + std::string(kCaptureIndex) +
                        " (or capture.rank<r>.jsonl) there (not a capture directory)");
  }
  auto reader = log::RunReader::open(dir);
  if (!reader) throw RecorderError(reader.error().message);

  CaptureIndex index;
  index.dir_ = dir;
  std::optional<std::int64_t> chosen;
  while (true) {
    auto next = (*reader)->next();
    if (!next) throw RecorderError(next.error().message);
    if (!*next) break;
    const log::Step& s = **next;
    if (s.rank != rank || s.status != log::StepStatus::complete) continue;
    if (step ? s.step != *step : chosen && s.step >= *chosen) continue;
    chosen = s.step;
    index.records_.clear();
    index.digests_.clear();
    index.by_identity_.clear();
    // Occurrence counts earlier records of the step with the same identity,
    // in seq order (dtrace-fp(5)), which is the order the reader hands out.
    std::map<std::tuple<std::string_view, std::string_view, std::string_view, std::string_view>,
             int>
        seen;
    for (const log::Record& r : s.records) {
      const std::string_view io = r.io == log::Io::other ? r.io_text : log::io_name(r.io);
      const int occurrence = seen[{r.scope, r.op, io, r.name}]++;
      Key key{std::string(r.scope), std::string(r.op), std::string(io), std::string(r.name),
              occurrence};
      index.by_identity_[std::move(key)] = index.records_.size();
      CapturedRecord c;
      c.scope = r.scope;
      c.op = r.op;
      c.io = io;
      c.name = r.name;
      c.occurrence = occurrence;
      c.dtype = r.dtype;
      c.shape.assign(r.shape.begin(), r.shape.end());
      c.digest = r.digest.low;
      c.step = r.step;
      c.seq = r.seq;
      c.file = join(dir, capture_file_name(rank, r.step, r.seq));
      index.records_.push_back(std::move(c));
      index.digests_.push_back(r.digest);
    }
  }
  for (CapturedRecord& c : index.records_) {
    std::error_code ec;
    const auto size = fs::file_size(c.file, ec);
    c.bytes = ec ? 0 : static_cast<std::uint64_t>(size);
  }
  return index;
}

std::optional<std::vector<std::byte>> CaptureIndex::bytes(std::string_view scope,
                                                          std::string_view op, std::string_view io,
                                                          std::string_view name,
                                                          int occurrence) const {
  auto it = by_identity_.find(std::tuple{scope, op, io, name, occurrence});
  if (it == by_identity_.end()) return std::nullopt;
  return read(it->second);
}

std::vector<std::byte> CaptureIndex::read(std::size_t index) const {
  const std::string& path = records_.at(index).file;
  const log::Digest& expected = digests_[index];
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RecorderError(path + ": captured tensor missing (the capture is damaged)");
  std::vector<std::byte> data;
  in.seekg(0, std::ios::end);
  data.resize(static_cast<std::size_t>(in.tellg()));
  in.seekg(0, std::ios::beg);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!in) throw RecorderError(path + ": cannot read captured tensor");
  // The index's fingerprint vouches for the bytes: a replay from altered inputs
  // would send the bisection after the wrong kernel.
  const auto actual = log::Digest::from_u64(fingerprint(data.data(), data.size(), 0));
  if (actual != expected) {
    throw RecorderError(path + ": bytes fingerprint to " + actual.hex() + " but " +
                        std::string(kCaptureIndex) + " recorded " + expected.hex() +
                        " (the capture is damaged)");
  }
  return data;
}

}  // namespace dtrace::recording
