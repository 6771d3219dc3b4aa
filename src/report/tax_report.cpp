#include "report/tax_report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "report/schema.hpp"

namespace dtrace::report {

using workflow::ModeTiming;

namespace {

nlohmann::json mode_json(const ModeTiming& m) {
  return {{"median_s", m.median},
          {"p25_s", m.p25},
          {"p75_s", m.p75},
          {"spread_percent", m.median > 0 ? (m.p75 - m.p25) / m.median * 100.0 : 0.0},
          {"arm_medians_s", m.arm_medians},
          {"steps", m.step_seconds.size()}};
}

nlohmann::json optional_json(const std::optional<bool>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

// Milliseconds with three significant-looking decimals: step times span
// microseconds (tests) to seconds (real jobs).
std::string ms(double seconds) { return format("%.3f ms", seconds * 1000.0); }

std::string mode_line(const ModeTiming& m) {
  std::string line = "  " + m.mode +
                     std::string(15 - std::min<std::size_t>(m.mode.size(), 14), ' ') + "median " +
                     ms(m.median) + "  IQR " + ms(m.p25) + " - " + ms(m.p75);
  if (m.median > 0) line += " (" + format("%.1f", (m.p75 - m.p25) / m.median * 100.0) + "%)";
  line += "  arm medians";
  for (double arm : m.arm_medians) line += " " + ms(arm);
  line += "  (" + std::to_string(m.step_seconds.size()) + " steps)";
  return line + "\n";
}

std::string identical_text(const std::optional<bool>& identical) {
  if (!identical) return "one arm, not compared";
  return *identical ? "bit-identical" : "diverged";
}

}  // namespace

nlohmann::json tax_to_json(const workflow::TaxReport& r) {
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& arm : r.arms) {
    arms.push_back(
        {{"label", arm.plan.label}, {"run", arm.plan.run_dir}, {"seconds", arm.seconds}});
  }
  nlohmann::json j = {{"deterministic", mode_json(r.deterministic)},
                      {"fast", mode_json(r.fast)},
                      {"overhead_percent", r.overhead_percent},
                      {"within_noise", r.within_noise},
                      {"deterministic_identical", optional_json(r.deterministic_identical)},
                      {"fast_identical", optional_json(r.fast_identical)},
                      {"arms", arms},
                      {"kept", r.kept.empty() ? nlohmann::json() : nlohmann::json(r.kept)},
                      {"notes", r.notes}};
  stamp(j, tax_schema);
  return j;
}

std::string tax_to_text(const workflow::TaxReport& r) {
  std::ostringstream o;
  o << "determinism tax: " << format("%+.1f%%", r.overhead_percent)
    << " (deterministic median step time over fast"
    << (r.within_noise ? "; within the noise: the interquartile ranges overlap)"
                       : "; outside the noise: the interquartile ranges do not overlap)")
    << "\n";
  o << mode_line(r.deterministic) << mode_line(r.fast);
  o << "  arms: " << r.deterministic.arm_medians.size()
    << " per mode, interleaved (ABBA); each arm's first step left out when it has more "
       "(start-up)\n";
  o << "  deterministic arms " << identical_text(r.deterministic_identical) << ", fast arms "
    << identical_text(r.fast_identical) << "\n";
  for (const auto& note : r.notes) o << "  note: " << note << "\n";
  if (!r.kept.empty()) o << "arms kept in " << r.kept << "\n";
  return o.str();
}

}  // namespace dtrace::report
