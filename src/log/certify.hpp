// `dtrace check` (certification): whether a run is fit to be trusted by a diff.
//
// A diff compares what two runs have in common and names what one of them
// lacks, so a damaged run can still "diff identical" over a subset of itself.
// Certification says, before anyone relies on that, whether the run is whole:
// every rank present with the same steps, every step complete with the right
// count, seq strictly increasing, no record or step written twice, headers
// that agree, a hash algorithm this dtrace knows, and chains and line numbers
// that are what the records give. It streams the run, keeping per-rank step
// sets, the chain checks' state (log::ChainVerifier: per rank a few words per
// interval of its steps, plus the steps read before the steps they are
// chained to) and a bounded list of violations, so memory does not grow with
// the length of a run written in step order.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/intervals.hpp"
#include "util/result.hpp"

namespace dtrace::log {

enum class ViolationKind : std::uint8_t {
  rank_absent,         // a rank in 0..world_size-1 has no record and no end record
  steps_differ,        // a rank lacks steps that other ranks have
  seq_not_increasing,  // two different records of one (rank, step) share a seq
  duplicate_record,    // the same record (seq, scope, op, io, name) written twice
  incomplete_step,     // a step without its end record (a crash mid-step)
  count_mismatch,      // an end record whose count disagrees with the records
  late_records,        // records that arrived after their step had completed
  header_mismatch,     // run, level, env or config differ between files
  unknown_hash,        // a hash algorithm this dtrace cannot recompute
  chain_mismatch,      // an end record's chain that its records do not give (dtrace-fp(5))
  line_mismatch,       // an end record's `line` that is not the line it is on (dtrace-fp(5))
  chain_gap,           // the chains start anew at 0 within a rank's file, or after a chainless step
  duplicate_step,      // a second end record for a step already complete: the step written twice
};
inline constexpr std::size_t kViolationKinds = 13;

// Stable, hyphenated names used in reports and JSON ("rank-absent", ...).
std::string_view violation_name(ViolationKind kind);

struct Violation {
  ViolationKind kind = ViolationKind::rank_absent;
  std::optional<std::int32_t> rank;
  std::optional<std::int64_t> step;
  std::string location;  // "FILE:LINE" where one applies, else empty
  std::string message;   // complete sentence fragment for people
};

struct Certification {
  std::string path;
  std::int64_t world_size = 0;
  std::string hash;
  std::vector<std::string> files;
  std::int64_t ranks_present = 0;
  IntervalSet steps;          // every step seen on any rank
  std::uint64_t records = 0;  // records read (end records excluded)
  // Listed violations: at most kMaxListed of each kind, so a badly broken long
  // run still gives a short report; `counts` has the full numbers.
  std::vector<Violation> violations;
  std::array<std::uint64_t, kViolationKinds> counts{};
  std::vector<std::string> notes;  // the reader's notes: not violations

  static constexpr std::size_t kMaxListed = 50;

  std::uint64_t total_violations() const;
  std::uint64_t unlisted_violations() const { return total_violations() - violations.size(); }
  bool certified() const { return total_violations() == 0; }
};

// The hash algorithms whose digests this dtrace can recompute (dtrace-fp(5), FINGERPRINT).
bool is_known_hash_algorithm(std::string_view name);

// Reads the run at `path` and certifies it. An Error means the run could not be
// read at all (no such path, malformed line, world_size or hash disagreeing
// between files): that is trouble, not a violation, and names the file and line.
Result<Certification> certify_run(const std::string& path);

}  // namespace dtrace::log
