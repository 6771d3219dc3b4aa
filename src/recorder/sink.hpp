// A log file that the recorders of one process append whole steps to.
//
// A replay's DTRACE_OUT, and a capture's index, are one file for every rank a
// process runs (ranks on threads): each rank hands over a finished step as a
// block of whole lines, and the sink writes the block under a mutex, so lines of
// two ranks never interleave mid-line. A normal run's rank file uses the same
// class unshared. The header is written and flushed at creation, so a file
// exists as a valid (empty) log from the moment the program starts.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "log/writer.hpp"

namespace dtrace::recording {

class LogSink {
 public:
  // Creates `path` for this recorder alone; a file already there is an error
  // (a recorded run is never overwritten).
  static std::shared_ptr<LogSink> create(const std::string& path, std::string_view header_line);
  // The sink this process already has open for `path`, or a new one, kept open
  // until the process exits (ranks open and finish at different times). A new one
  // may replace an existing empty file (a launcher's mkstemp placeholder), never
  // one with content. `variable` names the setting the path came from, for errors.
  static std::shared_ptr<LogSink> open_shared(const std::string& path, std::string_view header_line,
                                              std::string_view variable);

  explicit LogSink(log::Writer writer) : writer_(std::move(writer)) {}

  // Writes whole lines (each ending in a newline) and flushes them to the file.
  void append(std::string_view lines);
  // Writes a step: its record lines (`records`, whole lines) and then its end
  // record, which carries its own line number in this file (dtrace-fp(5),
  // field `line`), known only here where ranks sharing the file are ordered.
  void append_step(std::string& records, std::int32_t rank, std::int64_t step, std::int64_t count,
                   std::optional<std::uint64_t> chain);
  const std::string& path() const { return writer_.path(); }

 private:
  void write_locked(std::string_view lines);

  std::mutex mutex_;
  log::Writer writer_;
  std::int64_t lines_ = 0;  // lines written so far, the header's included
};

}  // namespace dtrace::recording
