// The search diff (dtrace(1), diff; dtrace-fp(5), "Chained step digest"):
// when both runs carry chained step digests, each rank's first differing step
// is found by binary search over its file's bytes, and only that step is read
// and compared record by record, with the streaming diff's semantics.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "diff/bytes.hpp"
#include "diff/diff.hpp"

namespace dtrace::diff {

struct SearchOutcome {
  // The report, when the search could answer exactly as the streaming diff would.
  std::optional<Report> report;
  // Otherwise why the runs must be read in full; empty when neither run
  // carries chains (nothing to say: that is an old log, diffed as always).
  std::string fallback;
  // With a fallback: each rank's first steps that both runs' chains vouch
  // for (by_chains), which the full read need not read: what keeps a crashed
  // or cut-short run, or one rank without chains, from costing a read of
  // everything. Empty when nothing can be vouched for (a chain that does not
  // match its records: the recorder's chains are not trusted at all).
  std::vector<SharedPrefix> prefixes;
  std::uint64_t bytes_read = 0;  // by the search's own reads, both runs
};

// Never an Error: input the search cannot vouch for (a malformed line, an
// incomplete step, one run starting later) is a fallback, and the streaming
// diff then reads what the prefixes leave and reports it as it always did.
SearchOutcome search_diff(const std::string& run_a, const std::string& run_b, const StepWindow& window);

}  // namespace dtrace::diff
