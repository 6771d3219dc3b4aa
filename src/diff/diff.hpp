// `dtrace diff` (dtrace(1), diff): the first divergence between two runs, every
// diverged rank's own first mismatch and role, what was compared, and the
// header differences that are the first suspects.
#pragma once

#include <cstdint>
#include <climits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "log/record.hpp"
#include "util/result.hpp"

namespace dtrace::diff {

enum class Kind { value, structure };
// origin: inputs matched, output differs. receiver: an input already differed.
// unknown: nothing recorded says which (state, a metric, an op without recorded
// inputs, a generator's state: Mismatch::generator).
enum class Role { origin, receiver, unknown };

// A record that holds a generator's state (classify's holds_generator), named
// where it explains a mismatch.
struct GeneratorRecord {
  std::string scope, op, io, name;
  std::string text() const { return scope + " " + op + " " + io + " " + name; }
};

std::string_view kind_name(Kind kind);
std::string_view role_name(Role role);

// One rank's first mismatch.
struct Mismatch {
  std::int32_t rank = 0;
  std::int64_t step = 0;
  std::int64_t seq = 0;
  std::string scope, op, io, name;
  int occurrence = 0;
  int calls = 1;  // records of its (scope, op, io, name) in its side's step: the op's calls
  Kind kind = Kind::value;
  Role role = Role::unknown;
  nlohmann::json a;  // the record as read from run A, null when A lacks it
  nlohmann::json b;
  std::string a_location, b_location;  // FILE:LINE, empty when absent
  std::optional<std::uint64_t> ulp;    // scalars of one dtype, neither NaN
  std::string detail;                  // what differs, in words
  // The generator whose state differs where this mismatch is (it, or one the
  // step drew from): its role is then unknown, never origin, and receiver only
  // for an output whose op's input differs (classify, dtrace(1) "Roles").
  std::optional<GeneratorRecord> generator;
};

// One record of the first divergent step, as the HTML report's strip shows it.
enum class Match { matched, differs, a_only, b_only };
std::string_view match_name(Match match);

struct StepRecord {
  std::int64_t seq = 0;
  std::string scope, op, io, name;
  Match match = Match::matched;
  std::string location;  // A's FILE:LINE (B's for a record only B has)
};

struct HeaderDifference {
  std::string section;  // "env", "config", or a top-level header field
  std::string key;      // dotted path inside the section
  nlohmann::json a, b;  // null when absent on that side
};

// A header env value that dtrace env rejects (dtrace(1)), in either run.
struct EnvFlag {
  char run = 'A';
  std::string key, value, reason;
};

struct Compared {
  std::int64_t first_step = 0, last_step = -1;
  std::int64_t steps = 0;  // distinct steps compared on at least one rank
  std::int64_t ranks = 0;
  std::uint64_t records = 0;
};

struct Report {
  std::string run_a, run_b;
  std::optional<Mismatch> first;
  std::vector<Mismatch> ranks;  // every diverged rank, by rank
  Compared compared;
  std::vector<std::string> notes;
  std::vector<HeaderDifference> header_differences;
  std::vector<EnvFlag> env_flags;
  // The first divergent rank's compared records at the first divergent step,
  // in seq order (empty when identical).
  std::vector<StepRecord> first_step;
  bool searched = false;  // found by chained digests (a note says so), not by reading everything
  bool diverged() const { return first.has_value(); }
};

// `--steps A-B`: the steps a diff (or show) looks at, both ends included.
struct StepWindow {
  std::int64_t first = INT64_MIN, last = INT64_MAX;
  bool contains(std::int64_t step) const { return step >= first && step <= last; }
  bool whole() const { return first == INT64_MIN && last == INT64_MAX; }
};

struct DiffOptions {
  bool stream = false;  // --stream: read every record even when both runs carry chains
  // Parse and compare every record of the streaming diff, even the steps both
  // runs wrote byte for byte alike (diff/bytes.hpp), which are otherwise
  // counted as equal without parsing. Same report either way; for tests.
  bool read_shared = false;
  StepWindow steps;
};

// Compares two runs: by searching their chained step digests when both carry
// them (diff/search.hpp), else by reading both in full. Trouble (unreadable or
// malformed input, runs that cannot be compared) is an Error naming the file
// and line or run.
Result<Report> diff_runs(const std::string& run_a, const std::string& run_b, const DiffOptions& options = {});

// One rank's first mismatch at one step, described for the report; the
// locations are "FILE:LINE" (the search takes line numbers from end records).
struct MismatchAt;
struct Classification;
Mismatch describe_mismatch(const log::Step& a, const log::Step& b, const MismatchAt& at,
                           const Classification& c, std::string a_location, std::string b_location);

// ULP distance between two scalars' bit patterns of the same width; nullopt for
// NaN or differing widths. 16-bit patterns are bf16 unless `dtype` says f16
// (the two place NaNs differently). Exposed for tests.
std::optional<std::uint64_t> ulp_distance(const log::Digest& a, const log::Digest& b,
                                          std::string_view dtype = {});

}  // namespace dtrace::diff
