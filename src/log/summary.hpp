// `dtrace show`: what a run holds, gathered in one streaming pass.
//
// A run can be hundreds of millions of records, so the summary keeps per-rank
// counters and step sets (IntervalSets: a few words for a contiguous run) and a
// bounded list of unfinished steps; it keeps records only for the steps and
// ranks a caller selected.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "log/reader.hpp"
#include "log/record.hpp"
#include "util/intervals.hpp"
#include "util/result.hpp"

namespace dtrace::log {

// Which records to keep: those of `step` (if set), or of the window `steps`,
// on `rank` (if set). None set selects nothing: a summary alone.
struct Selection {
  std::optional<std::int64_t> step;
  std::optional<std::int32_t> rank;
  std::optional<std::pair<std::int64_t, std::int64_t>> steps;  // --steps: first and last, included

  bool any() const { return step.has_value() || rank.has_value() || steps.has_value(); }
  bool matches(std::int32_t r, std::int64_t s) const {
    return any() && (!step || *step == s) && (!rank || *rank == r) &&
           (!steps || (s >= steps->first && s <= steps->second));
  }
};

// A step the reader could not certify complete (incomplete, count-mismatch, late).
struct UnfinishedStep {
  std::int64_t step = 0;
  StepStatus status = StepStatus::incomplete;
  std::int64_t declared_count = -1;  // -1 without an end record
  std::uint64_t records = 0;
  std::string location;  // FILE:LINE of its first record, empty without one
};

struct RankSummary {
  std::int32_t rank = 0;
  IntervalSet steps;           // every step with a line on this rank
  IntervalSet complete_steps;  // of those, the complete ones
  std::uint64_t records = 0;
  // At most kMaxListed, in the order the reader finished them; the full number
  // is `unfinished_count`.
  std::vector<UnfinishedStep> unfinished;
  std::uint64_t unfinished_count = 0;

  static constexpr std::size_t kMaxListed = 50;
};

// The selected records of one (rank, step), in seq order.
struct SelectedStep {
  std::int32_t rank = 0;
  std::int64_t step = 0;
  StepStatus status = StepStatus::complete;
  std::vector<Record> records;
};

struct RunSummary {
  std::string path;
  std::vector<std::string> files;
  std::vector<Header> headers;     // one per file with a header, in file order
  std::vector<RankSummary> ranks;  // ranks present, ascending
  IntervalSet steps;               // union over ranks
  std::uint64_t records = 0;
  std::vector<std::string> notes;  // the reader's
  Selection selection;
  std::vector<SelectedStep> selected;  // by (rank, step)
  // Selected records' strings are views into the reader's intern table, so the
  // reader lives as long as the summary.
  std::unique_ptr<RunReader> reader;

  const Header& header() const { return headers.front(); }
  std::int64_t world_size() const { return header().world_size; }
  // "FILE:LINE" of a selected record.
  std::string location(const Record& record) const;
  // Ranks 0..world_size-1 without a line, as interval text ("2-3,7"); empty if none.
  std::string absent_ranks() const;
  bool complete() const;
};

// Reads the run at `path` once. An Error names the file and line (or the run).
Result<RunSummary> summarize_run(const std::string& path, const Selection& selection);

}  // namespace dtrace::log
