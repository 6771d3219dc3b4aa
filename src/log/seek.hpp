// Random access to one rank's file of a run (dtrace-fp(5), "Finding a step"):
// a writer emits a rank's steps in increasing order, each step's records
// followed by its end record, so the lines of such a file are sorted by step
// and a step is found by binary search over byte offsets: read a little at an
// offset, skip to the next line start, look at that line's step. A search diff
// reads a few kilobytes per probe instead of the whole file.
//
// Nothing here assumes more than it checks: a line of another rank, a step
// found out of order or a line that does not parse is reported as a Problem,
// and the caller reads the run in full instead.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "log/intern.hpp"
#include "log/parse.hpp"
#include "log/record.hpp"
#include "util/result.hpp"

namespace dtrace::log {

// One line found at a byte offset, parsed.
struct SeekLine {
  std::uint64_t offset = 0;  // where the line starts
  std::uint64_t next = 0;    // where the line after it starts (or the file's size)
  ParsedLine parsed;
  bool end_record() const { return parsed.kind == LineKind::end; }
  std::int64_t step() const { return end_record() ? parsed.step : parsed.record.step; }
  std::int64_t rank() const { return end_record() ? parsed.rank : parsed.record.rank; }
};

// A step read at the offset where it starts, with where its lines begin and end.
struct SeekStep {
  Step step;
  std::uint64_t begin = 0, end = 0;  // byte range of its lines
  // Whether its records' `line` are their line numbers: counted from the line
  // number before the step that read_step was given, with no blank line in
  // the step, and the count agreeing with the end record's own `line`
  // (dtrace-fp(5)). Otherwise `line` is 0.
  bool numbered = false;
};

class RankFile {
 public:
  // Opens `path` (a file of a run, its header already checked by RunReader) read-only.
  static Result<std::unique_ptr<RankFile>> open(const std::string& path, std::uint32_t file_index,
                                                std::shared_ptr<Intern> intern);
  ~RankFile();
  RankFile(const RankFile&) = delete;
  RankFile& operator=(const RankFile&) = delete;

  // The first line after the header; nullopt when the file holds no record.
  // An Error when it does not parse (names the file and byte offset).
  Result<std::optional<SeekLine>> first_line();
  // The last line; nullopt when the file holds no record, or when it is cut
  // short (no final newline): `truncated()` then says so.
  Result<std::optional<SeekLine>> last_line();
  bool truncated() const { return truncated_; }
  // The last line that ends with a newline: last_line(), or the line before
  // a last line cut short; nullopt when there is none.
  Result<std::optional<SeekLine>> last_whole_line();

  // The first line starting at or after byte `offset` (at the data start when
  // `offset` is before it); nullopt at the end of the file.
  Result<std::optional<SeekLine>> line_at(std::uint64_t offset);
  // The line that ends just before byte `offset` (a line start); nullopt when
  // `offset` is the first line after the header.
  Result<std::optional<SeekLine>> line_before(std::uint64_t offset);
  // The offset of the first line whose step is >= `step`, by binary search
  // (the file's size when there is none). Assumes lines sorted by step; the
  // caller checks what it finds there.
  Result<std::uint64_t> lower_bound(std::int64_t step);
  // The lines of `step` starting at `offset` (from lower_bound), assembled
  // into a Step as the streaming reader would: seq order, its end record's
  // count, chain and line, status complete or incomplete/count_mismatch.
  // `line_before`: the line number of the line that ends at `offset` (the
  // previous step's end record's `line`, 1 for the header), when known.
  Result<SeekStep> read_step(std::uint64_t offset, std::int64_t step,
                             std::optional<std::int64_t> line_before = std::nullopt);

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }
  std::uint64_t data_begin() const { return data_begin_; }
  // Bytes this file's reads asked for (benchmarks report it).
  std::uint64_t bytes_read() const { return bytes_read_; }

 private:
  RankFile() = default;
  Result<std::string_view> read(std::uint64_t offset, std::size_t length);
  Result<SeekLine> parse_at(std::uint64_t offset, std::string_view text, std::uint64_t next);
  Result<std::uint64_t> search_between(std::int64_t step, std::uint64_t lo, std::uint64_t hi);

  std::string path_;
  std::uint32_t file_index_ = 0;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t data_begin_ = 0;
  bool truncated_ = false;
  std::uint64_t bytes_read_ = 0;
  std::optional<std::optional<SeekLine>> first_;  // first_line(), once read
  std::map<std::int64_t, std::uint64_t> known_;     // lower_bound's answers so far
  std::shared_ptr<Intern> intern_;
  LineParser parser_;
  std::string buffer_;               // the cached chunk, padded
  std::uint64_t cache_offset_ = 0;
  std::uint64_t cache_length_ = 0;
};

}  // namespace dtrace::log
