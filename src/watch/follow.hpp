// Follows a run while its job writes it (dtrace(1), watch): rank files that
// appear late, lines written in pieces. Only lines ended by a newline are
// parsed, so a line still being written is never read as truncated or
// malformed; only when the run has ended is a cut-short last line one that a
// crash left (noted, as the reader notes it).
//
// Like log::RunReader it assembles each (rank, step) until its end record has
// counted the records, and hands complete steps out in seq order. It reads
// each file from where it stopped, a bounded chunk per visit, and a caller may
// leave files unread for a while (`Gate`) to keep one side of a comparison
// from running ahead: memory holds a chunk per file plus the steps not yet
// complete or not yet taken, however long the run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "log/intern.hpp"
#include "log/parse.hpp"
#include "log/record.hpp"
#include "util/result.hpp"

namespace dtrace::watch {

class RunFollower {
 public:
  // `path`: a run directory (it may not exist yet, nor hold files yet) or one
  // .jsonl file. `intern`: shared with the other run's follower.
  RunFollower(std::string path, std::shared_ptr<log::Intern> intern);
  ~RunFollower();

  // Whether a file's next chunk may be read now: false leaves the file as it
  // is until a later poll. Called with the rank of the last step the file
  // completed (-1 before its first).
  using Gate = std::function<bool(std::int32_t last_rank)>;

  // Takes each step as it completes: the caller's pairing then closes the
  // gate before more of the file is read.
  using Sink = std::function<void(log::Step)>;

  // Reads what was appended since the last poll (new files included) and
  // hands the steps that completed to `sink`. Returns whether any file grew
  // (was found longer than at the last poll), read or not. Errors (a malformed
  // complete line, headers that disagree) name the file and line.
  Result<bool> poll(const Sink& sink, const Gate& gate = {});

  // Every file is read to its end. A partial last line or a step begun and
  // not ended may remain: a job still writing them, or what a crash left.
  bool at_rest() const;
  // Ranks with at least one complete step, and whether every rank of the
  // world has one.
  const std::set<std::int32_t>& ranks_seen() const { return ranks_seen_; }
  bool all_ranks_seen() const;
  // Every rank of the world wrote an end marker: `rank<r>.status` beside the
  // logs says "exit CODE" (dtrace-fp(5), the end of a run).
  bool end_markers() const;

  // The run has ended: what is still begun is incomplete (returned, status
  // incomplete or count_mismatch) and a cut-short last line is noted.
  std::vector<log::Step> finish();

  bool has_header() const { return !headers_.empty(); }
  const log::Header& header() const { return headers_.front(); }
  std::int64_t world_size() const { return headers_.empty() ? 0 : headers_.front().world_size; }
  const std::vector<log::Header>& headers() const { return headers_; }
  const std::string& path() const { return path_; }
  std::string location(const log::Record& record) const;
  const std::vector<std::string>& notes() const { return notes_; }
  std::uint64_t records_read() const { return records_read_; }
  std::uint64_t bytes_read() const { return bytes_read_; }
  // Directories to watch for changes (inotify): the run's directory, or the
  // file's.
  std::string directory() const;

  RunFollower(const RunFollower&) = delete;
  RunFollower& operator=(const RunFollower&) = delete;

 private:
  struct File;
  struct PendingStep {
    log::Step step;
    bool end_seen = false;
  };
  Result<void> discover();
  Result<void> open_file(File& file);
  Result<bool> read_file(File& file, const Sink& sink, const Gate& gate);
  Result<bool> consume(File& file, const Sink& sink, const Gate& gate);
  Result<void> take_line(File& file, std::string_view text, std::uint64_t number, std::vector<log::Step>& out);

  std::string path_;
  bool single_file_ = false;
  std::shared_ptr<log::Intern> intern_;
  log::LineParser parser_;
  log::ParsedLine parsed_;
  std::vector<std::unique_ptr<File>> files_;
  std::set<std::string> known_;
  std::vector<log::Header> headers_;
  std::vector<std::string> notes_;
  std::vector<log::Step> completed_;  // take_line's output, handed to the sink at once
  std::map<std::pair<std::int32_t, std::int64_t>, PendingStep> pending_;
  std::map<std::int32_t, std::int64_t> last_complete_;  // per rank: the late-record check
  std::set<std::int32_t> ranks_seen_;
  std::uint64_t records_read_ = 0, bytes_read_ = 0;
  std::size_t descriptors_;  // files kept open between polls; the rest are parked
  bool parking_noted_ = false;
  std::chrono::steady_clock::time_point last_listing_{};
};

}  // namespace dtrace::watch
