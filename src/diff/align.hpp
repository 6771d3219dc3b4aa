// Aligning one rank's records at one step between two runs, by identity
// (rank, step, scope, op, io, name, occurrence), and finding the first mismatch.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "diff/diff.hpp"
#include "log/record.hpp"

namespace dtrace::diff {

// Where one mismatch sits: an index on each side (-1 when that side lacks it).
struct MismatchAt {
  std::ptrdiff_t a = -1, b = -1;
  Kind kind = Kind::value;
  std::string detail;
};

struct StepComparison {
  std::optional<MismatchAt> first;  // earliest in seq order
  // Collective inputs (scope under comm/) that differ at this step, as
  // "scope\nop\noccurrence": a collective's output depends on every rank's
  // input, so a rank whose own input matched is still a receiver of these.
  std::set<std::string> collective_inputs_differing;
  std::uint64_t records = 0;  // records compared
};

StepComparison compare_step(const log::Step& a, const log::Step& b);

// Every compared record of one rank's step paired by identity, in A's seq
// order, a record only B has right after the A record paired with the one
// before it in B: what the HTML report's strip of the
// first divergent step shows. Computed only for a rank's first mismatch, so it
// favours plainness over compare_step's speed.
struct RecordPair {
  std::ptrdiff_t a = -1, b = -1;  // indices, -1 when that side lacks the record
  bool differs = false;           // value or structure (always true for one side only)
};
std::vector<RecordPair> pair_records(const log::Step& a, const log::Step& b);

// pair_records as the report shows them (Report::first_step); `where(record,
// side)` names a record's place, side 'A' or 'B' ("FILE:LINE").
std::vector<StepRecord> step_strip(const log::Step& a, const log::Step& b,
                                   const std::function<std::string(const log::Record&, char side)>& where);

// Runs recorded at different levels (man/dtrace.1, diff): the finer run's step
// without the in and out records that the coarser run's step lacks, which only
// the finer level writes. State and metric records (written at every level)
// are kept, so one missing from the coarser run is still a structure mismatch,
// and so is every record the coarser run has and the finer one lacks.
// `left_out` counts the records dropped.
log::Step common_records(const log::Step& finer, const log::Step& coarser, std::uint64_t& left_out);

// How many earlier records of the step share record i's (scope, op, io, name).
int occurrence_of(const log::Step& step, std::size_t index);

// How many records of the step share record i's (scope, op, io, name): the
// calls of its op that the step holds, which the text names beside its
// occurrence ("call 2 of 3", call_text in util/words.hpp).
int calls_of(const log::Step& step, std::size_t index);

// The key of a collective op invocation, as used in collective_inputs_differing.
std::string collective_key(std::string_view scope, std::string_view op, int occurrence);
bool is_collective(std::string_view scope);

}  // namespace dtrace::diff
