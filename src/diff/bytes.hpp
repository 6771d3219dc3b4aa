// diff's byte stage: the steps two runs wrote byte for byte alike, found the
// way cmp finds equal files, so that the streaming diff need not parse and
// compare them record by record (issue 12).
//
// Both runs of a deterministic job write mostly identical lines. For each pair
// of files of the same name, the stage compares the bytes after the two
// header lines (headers differ in run name, env or config, and diff compares
// them as it always did) and keeps the longest prefix that is
//   - the same bytes in both files,
//   - complete steps of one rank, each its records in a row and then its end
//     record counting them, steps in increasing order, and
//   - lines the reader would read without a note or an error: one side's
//     lines are checked, as their bytes are the other side's; a record line
//     whose identity bytes equal those of an earlier line at its seq, already
//     read by the full parser (LineParser::identity_only), is checked by its
//     canonical layout alone, as the reader's fast path reads it
//     (log::CanonicalLines::read_after, from the step's known first bytes),
//     every other line by LineParser.
// Such steps are equal in both runs by construction, so the streaming diff
// counts them as compared (their records of a compared io) and reads each
// file from the end of its prefix (RunReader::skip_prefix). The prefix ends
// at the last step boundary before the first differing byte, or before the
// first line it cannot vouch for; everything after is read as before. One
// difference does not end it: two records of one identity whose io the diff
// never compares (timing: a step's wall-clock seconds differ in every run)
// may differ in value and digest, and so in length; both lines are then read
// by the parser, and each file's scan goes on from its own offset.
#pragma once

#include <cstdint>
#include <vector>

#include "diff/diff.hpp"
#include "log/reader.hpp"
#include "util/intervals.hpp"

namespace dtrace::diff {

// One file pair's shared prefix: the same bytes (this stage), or steps both
// runs' chained step digests vouch for (diff/search.hpp, when the search
// cannot answer alone).
struct SharedPrefix {
  std::size_t file_a = 0, file_b = 0;  // indices into each reader's files()
  std::int32_t rank = 0;
  log::RunReader::Position end_a, end_b;  // where each file's reading resumes
  IntervalSet steps;                      // every step of the prefix
  IntervalSet in_window;                  // those inside the diff's step window
  // Compared records of the steps in the window; 0 for a prefix vouched for
  // by chains, whose records are not read (the report then counts records read).
  std::uint64_t records = 0;
  bool by_chains = false;
};

// The shared prefixes of two opened runs (before their first next()); pairs
// without one are left out, and so is every prefix whose rank another
// prefix has too. Unreadable bytes end a prefix: the streaming diff then
// reads them and says what is wrong. `vouched`: prefixes the chains already
// vouch for; their files are not scanned, and they are returned as given.
std::vector<SharedPrefix> shared_prefixes(const log::RunReader& a, const log::RunReader& b,
                                          const StepWindow& window,
                                          const std::vector<SharedPrefix>& vouched = {});

}  // namespace dtrace::diff
