// Validators for the numbers commands take: the whole argument must be a number
// in range, and the message says which range in words. CLI11's own range checks
// print their bound as a 300-digit double, and an integer too large for its
// option was silently clamped (`--step 99999999999999999999` became 2^63-1).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace dtrace::cli {

// A step: an integer from 0 to 2^63-1.
CLI::Validator step_number();
// A rank: an integer from 0 to 2^31-1.
CLI::Validator rank_number();
// A count of threads: an integer from 0 (all cores) to 4096.
CLI::Validator thread_count();
// A window of steps, `A-B` (both ends included), `A-` (from A on) or `A` (that step only).
CLI::Validator step_range();
// The window `text` names (checked by step_range()): first and last step.
std::pair<std::int64_t, std::int64_t> parse_step_range(const std::string& text);
// Seconds: a finite number above 0.
CLI::Validator positive_seconds();

}  // namespace dtrace::cli
