#include "log/writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace dtrace::log {

namespace {

void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

void append_double(std::string& out, double v) {
  // JSON has no NaN or Inf: `value` is for people, so those become null.
  if (v != v || v == 1.0 / 0.0 || v == -1.0 / 0.0) {
    out += "null";
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  // Runs of characters that need no escape (all of most names) go in one append.
  std::size_t run = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) continue;
    out.append(text.substr(run, i - run));
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      }
    }
  }
  out.append(text.substr(run));
  out += '"';
}

nlohmann::json header_to_json(const Header& h) {
  nlohmann::json j = h.raw.is_object() ? h.raw : nlohmann::json::object();
  j["dtrace"] = h.format.empty() ? std::string(kFormatMajor) : h.format;
  j["run"] = h.run;
  j["world_size"] = h.world_size;
  j["hash"] = h.hash;
  j["level"] = h.level;
  if (!h.env.empty()) j["env"] = h.env;
  if (!h.config.empty()) j["config"] = h.config;
  if (!h.replay.is_null()) j["replay"] = h.replay;
  if (h.rank) j["rank"] = *h.rank;
  return j;
}

Result<Writer> Writer::create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Error{path + ": cannot create: " + std::strerror(errno)};
  std::FILE* file = ::fdopen(fd, "w");
  if (file == nullptr) {
    ::close(fd);
    return Error{path + ": cannot open: " + std::strerror(errno)};
  }
  return Writer(file, path);
}

Writer::Writer(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}

Writer::Writer(Writer&& other) noexcept
    : file_(other.file_), path_(std::move(other.path_)), buffer_(std::move(other.buffer_)) {
  other.file_ = nullptr;
}

Writer& Writer::operator=(Writer&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) std::fclose(file_);
    file_ = other.file_;
    path_ = std::move(other.path_);
    buffer_ = std::move(other.buffer_);
    other.file_ = nullptr;
  }
  return *this;
}

Writer::~Writer() {
  if (file_ != nullptr) {
    (void)flush();
    std::fclose(file_);
  }
}

void Writer::header(const Header& header) {
  buffer_ += header_to_json(header).dump();
  buffer_ += '\n';
}

void Writer::record(const Record& record) { append_record_line(buffer_, record); }

void Writer::end_step(std::int32_t rank, std::int64_t step, std::int64_t count) {
  append_end_line(buffer_, rank, step, count);
}

void append_record_line(std::string& o, const Record& r) {
  o += "{\"step\":";
  append_int(o, r.step);
  o += ",\"rank\":";
  append_int(o, r.rank);
  o += ",\"seq\":";
  append_int(o, r.seq);
  o += ",\"scope\":";
  append_json_string(o, r.scope);
  o += ",\"op\":";
  append_json_string(o, r.op);
  o += ",\"io\":";
  append_json_string(o, r.io == Io::other ? r.io_text : io_name(r.io));
  o += ",\"name\":";
  append_json_string(o, r.name);
  if (!r.dtype.empty()) {
    o += ",\"dtype\":";
    append_json_string(o, r.dtype);
  }
  if (r.has_shape) {
    o += ",\"shape\":[";
    for (std::size_t i = 0; i < r.shape.size(); ++i) {
      if (i != 0) o += ',';
      append_int(o, r.shape[i]);
    }
    o += ']';
  }
  if (!r.digest.empty()) {
    o += r.scalar ? ",\"bits\":\"" : ",\"hash\":\"";
    std::array<char, 32> digits;
    o += r.digest.hex_to(digits);
    o += '"';
  }
  if (r.has_value) {
    o += ",\"value\":";
    append_double(o, r.value);
  }
  o += "}\n";
}

void append_end_line(std::string& out, std::int32_t rank, std::int64_t step, std::int64_t count,
                     std::optional<std::uint64_t> chain, std::optional<std::int64_t> line) {
  out += "{\"step\":";
  append_int(out, step);
  out += ",\"rank\":";
  append_int(out, rank);
  out += ",\"end\":true,\"count\":";
  append_int(out, count);
  if (chain) {
    out += ",\"chain\":\"";
    std::array<char, 32> digits;
    out += Digest::from_u64(*chain).hex_to(digits);
    out += '"';
  }
  if (line) {
    out += ",\"line\":";
    append_int(out, *line);
  }
  out += "}\n";
}

void append_capture_line(std::string& out, const Record& record, std::string_view file) {
  append_record_line(out, record);
  // The line ends in "}\n": reopen the object to add the file it was saved to.
  out.resize(out.size() - 2);
  out += ",\"file\":";
  append_json_string(out, file);
  out += "}\n";
}

void Writer::raw_line(std::string_view json_object) {
  buffer_ += json_object;
  buffer_ += '\n';
}

Result<void> Writer::flush() {
  if (file_ == nullptr) return {};
  if (!buffer_.empty()) {
    const std::size_t size = buffer_.size();
    const std::size_t wrote = std::fwrite(buffer_.data(), 1, size, file_);
    buffer_.clear();
    if (wrote != size) {
      return Error{path_ + ": write failed: " + std::strerror(errno)};
    }
  }
  if (std::fflush(file_) != 0) return Error{path_ + ": write failed: " + std::strerror(errno)};
  return {};
}

}  // namespace dtrace::log
