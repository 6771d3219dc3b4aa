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
