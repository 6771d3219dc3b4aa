// Reads a run (dtrace-fp(5)): a directory of *.jsonl files or one .jsonl file.
//
// Records may sit in any file and any line order, so the reader assembles
// steps: it collects each (rank, step)'s records until the step's end record has
// counted them all, then hands the step out in seq order. Files are read round
// robin, a step at a time, so per-rank files written in step order are consumed
// in lockstep and memory holds about one step per rank, however long the run.
// Input in another order still reads correctly, holding the disorder in memory.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "log/record.hpp"
#include "util/intervals.hpp"
#include "util/result.hpp"

namespace dtrace::log {

class Intern;

// The bounds of a file's reads and of all files' read buffers together, the
// streaming reader's and watch's follower's alike (watch/follow.cpp).
inline constexpr std::size_t kMinReadSize = 4096, kMaxReadSize = 1u << 20;
inline constexpr std::size_t kReadBudget = 32u << 20;

// What one reader may hold at once. The defaults suit any run; tests shrink
// them to reach the paths a run of thousands of ranks takes.
struct ReadLimits {
  // Read buffers, all files together. Each file's reads are its share (4 KiB
  // to 1 MiB); files beyond what the budget holds give theirs up between visits.
  std::size_t buffer_bytes = kReadBudget;
  // Descriptors; 0: a quarter of the process's limit. A run with more files
  // than this closes a file between visits and reopens it at the same place.
  std::size_t descriptors = 0;
};

class RunReader {
 public:
  // Opens every file of the run read-only and reads and checks their headers.
  // `intern`: a table to share with other readers (diff's two runs), so equal
  // strings in their records are equal pointers; null for one of its own.
  static Result<std::unique_ptr<RunReader>> open(const std::string& path, const ReadLimits& limits = {},
                                                 std::shared_ptr<Intern> intern = nullptr);
  ~RunReader();

  // The next assembled step: complete steps as they finish; once every file is
  // read, the unfinished ones (incomplete, count-mismatch, late) in (rank, step)
  // order; nullopt at the end. An Error names the file and line.
  Result<std::optional<Step>> next();

  const std::string& path() const { return path_; }
  // The run's files; Record::file indexes this list.
  const std::vector<std::string>& files() const { return files_; }
  // One header per file that has one (empty files have none), in file order.
  const std::vector<Header>& headers() const { return headers_; }
  const Header& header() const { return headers_.front(); }
  std::int64_t world_size() const { return headers_.front().world_size; }
  const std::string& hash_algorithm() const { return headers_.front().hash; }
  // What the reader noticed that is not an error: truncated last lines, empty
  // files, header fields that differ between files. Grows as reading goes on.
  const std::vector<std::string>& notes() const { return notes_; }

  // Gives back the record storage of a step the caller is done with, for the
  // next steps to reuse: allocating and freeing a vector per step was a
  // measurable share of reading a run of many small steps. Kept up to a small
  // number; the rest is freed.
  void recycle(std::vector<Record>&& records);

  // Where file `file`'s records begin: the byte after its header line, and
  // the number of the header's line. Valid before the first next().
  struct Position {
    std::uint64_t offset = 0;
    std::uint64_t line = 0;
  };
  Position records_start(std::size_t file) const;

  // diff's byte stage (diff/bytes.hpp) vouched for file `file`'s first steps:
  // complete steps of `rank` only, `steps`, each its lines in a row, ending
  // at `resume`. The reader then does not read them: it reads the file from
  // `resume`, and each of those steps still takes its turn in the round robin
  // (a visit that yields nothing), so every step, note and error it yields
  // comes in the order reading the whole file gives, and `steps` count as
  // handed out. Call before the first next(), at most once per file, each
  // rank for one file only. The caller gets none of those steps.
  void skip_prefix(std::size_t file, Position resume, std::int32_t rank, const IntervalSet& steps);
  // Records of a skipped prefix's rank found in another file: the skipped
  // steps may then not be what reading them would have given. next() returns
  // an Error, and this says why it is no input error: read again without
  // skipping.
  bool prefix_contradicted() const { return prefix_contradicted_; }

  // File `file`'s descriptor while the reader keeps it open between visits
  // (runs within ReadLimits::descriptors), for reads beside the reader's own
  // (pread only: the reader never seeks); -1 when it is closed. Valid until
  // the first next(). diff's byte stage reads through it, so a diff opens
  // each file once (issue 41).
  int descriptor(std::size_t file) const;

  // "FILE:LINE" of a record, for messages.
  std::string location(const Record& record) const;

  // Records and lines read so far (for reports and benchmarks).
  std::uint64_t records_read() const { return records_read_; }

  RunReader(const RunReader&) = delete;
  RunReader& operator=(const RunReader&) = delete;

 private:
  struct Impl;
  explicit RunReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string path_;
  std::vector<std::string> files_;
  std::vector<Header> headers_;
  std::vector<std::string> notes_;
  std::uint64_t records_read_ = 0;
  bool prefix_contradicted_ = false;
};

// The files that make up a run at `path`, sorted; an Error if there are none.
// Entries named *.jsonl that are not regular files (directories, FIFOs,
// sockets, dangling links, symlink loops) are skipped, and when `skipped` is
// given each gets a line there saying why: opening a FIFO would block forever.
Result<std::vector<std::string>> list_run_files(const std::string& path,
                                                std::vector<std::string>* skipped = nullptr);

}  // namespace dtrace::log
