#include "cli/numbers.hpp"

#include <charconv>
#include <cmath>
#include <string>

namespace dtrace::cli {

namespace {

// Empty when TEXT is a decimal integer in [LO, HI]; else why not.
std::string integer_in(const std::string& text, std::int64_t lo, std::int64_t hi,
                       const std::string& what) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < lo || value > hi) {
    return "'" + text + "' is not " + what;
  }
  return {};
}

}  // namespace

CLI::Validator step_number() {
  return CLI::Validator(
      [](std::string& text) {
        return integer_in(text, 0, INT64_MAX, "a step (an integer from 0 to 9223372036854775807)");
      },
      "STEP", "step");
}

CLI::Validator rank_number() {
  return CLI::Validator(
      [](std::string& text) {
        return integer_in(text, 0, INT32_MAX, "a rank (an integer from 0 to 2147483647)");
      },
      "RANK", "rank");
}

CLI::Validator thread_count() {
  return CLI::Validator(
      [](std::string& text) {
        return integer_in(text, 0, 4096, "a thread count (an integer from 0, all cores, to 4096)");
      },
      "N", "threads");
}

CLI::Validator step_range() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string what = "a window of steps (A-B, A- or A, steps from 0 to 9223372036854775807)";
        const auto dash = text.find('-');
        const std::string first = text.substr(0, dash);
        if (!integer_in(first, 0, INT64_MAX, what).empty()) return "'" + text + "' is not " + what;
        if (dash == std::string::npos || dash + 1 == text.size()) return {};
        if (!integer_in(text.substr(dash + 1), 0, INT64_MAX, what).empty()) return "'" + text + "' is not " + what;
        const auto [lo, hi] = parse_step_range(text);
        if (lo > hi) return "'" + text + "' is an empty window (its first step is after its last)";
        return {};
      },
      "A-B", "steps");
}

std::pair<std::int64_t, std::int64_t> parse_step_range(const std::string& text) {
  const auto dash = text.find('-');
  const std::int64_t first = std::stoll(text.substr(0, dash));
  if (dash == std::string::npos) return {first, first};
  if (dash + 1 == text.size()) return {first, INT64_MAX};
  return {first, std::stoll(text.substr(dash + 1))};
}

CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec != std::errc() || ptr != end || !std::isfinite(value) || value <= 0) {
          return "'" + text + "' is not a number of seconds above 0";
        }
        return {};
      },
      "SECONDS", "seconds");
}

}  // namespace dtrace::cli
