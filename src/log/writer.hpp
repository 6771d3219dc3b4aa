// Writes dtrace-fp/1 (dtrace-fp(5)): one header, then records and end-of-step
// markers, each one whole line. Lines are assembled in memory and reach the file
// only at flush(), which the recorder calls at every step end: a crash therefore
// leaves complete lines plus at most one partial line, as readers expect.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "log/record.hpp"
#include "util/result.hpp"

namespace dtrace::log {

class Writer {
 public:
  // Creates `path` (failing if it exists: nothing a user recorded is overwritten).
  static Result<Writer> create(const std::string& path);

  Writer(Writer&&) noexcept;
  Writer& operator=(Writer&&) noexcept;
  ~Writer();

  void header(const Header& header);
  void record(const Record& record);
  void end_step(std::int32_t rank, std::int64_t step, std::int64_t count);
  // Appends an already-serialised JSON object as one line (extensions, tests).
  void raw_line(std::string_view json_object);

  Result<void> flush();
  const std::string& path() const { return path_; }

 private:
  Writer(std::FILE* file, std::string path);

  std::FILE* file_ = nullptr;
  std::string path_;
  std::string buffer_;
};

// Appends `text` as a JSON string literal, quotes included.
void append_json_string(std::string& out, std::string_view text);

// Appends one record, or one end-of-step marker, as a whole line (newline
// included), exactly as Writer writes them: for callers that assemble lines
// away from a file (the recorder buffers a rank's step before a shared file).
void append_record_line(std::string& out, const Record& record);
// A capture index's line (dtrace-fp(5), DTRACE_CAPTURE): the record's log
// line with "file", the file its bytes were saved to. The recorder's
// captures and bisect's pin captures both write it.
void append_capture_line(std::string& out, const Record& record, std::string_view file);
// `chain`: the step's chained digest (dtrace-fp(5)), written as field "chain" when given;
// `line`: the end record's own line number in its file, field "line" when given.
void append_end_line(std::string& out, std::int32_t rank, std::int64_t step, std::int64_t count,
                     std::optional<std::uint64_t> chain = std::nullopt,
                     std::optional<std::int64_t> line = std::nullopt);

// The header as the JSON object written on a log's first line.
nlohmann::json header_to_json(const Header& header);

}  // namespace dtrace::log
