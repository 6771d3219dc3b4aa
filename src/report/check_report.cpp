#include "report/check_report.hpp"

#include <sstream>

#include "report/schema.hpp"

namespace dtrace::report {

namespace {

std::string steps_text(const dtrace::IntervalSet& steps) {
  if (steps.empty()) return "no steps";
  const std::int64_t n = steps.size();
  return "steps " + steps.to_string() + " (" + std::to_string(n) + (n == 1 ? " step)" : " steps)");
}

}  // namespace

nlohmann::json check_to_json(const log::Certification& c) {
  nlohmann::json j;
  j["verdict"] = c.certified() ? "certified" : "violations";
  j["run"] = c.path;
  j["files"] = c.files;
  j["world_size"] = c.world_size;
  j["hash"] = c.hash;
  j["ranks"] = c.ranks_present;
  j["steps"] = c.steps.to_string();
  j["step_range"] =
      c.steps.empty() ? nlohmann::json() : nlohmann::json::array({c.steps.min(), c.steps.max()});
  j["step_count"] = c.steps.size();
  j["records"] = c.records;
  nlohmann::json violations = nlohmann::json::array();
  for (const log::Violation& v : c.violations) {
    violations.push_back(
        {{"kind", log::violation_name(v.kind)},
         {"rank", v.rank ? nlohmann::json(*v.rank) : nlohmann::json()},
         {"step", v.step ? nlohmann::json(*v.step) : nlohmann::json()},
         {"location", v.location.empty() ? nlohmann::json() : nlohmann::json(v.location)},
         {"message", v.message}});
  }
  j["violations"] = violations;
  nlohmann::json counts = nlohmann::json::object();
  for (std::size_t k = 0; k < log::kViolationKinds; ++k) {
    if (c.counts[k] != 0)
      counts[std::string(log::violation_name(static_cast<log::ViolationKind>(k)))] = c.counts[k];
  }
  j["violation_counts"] = counts;
  j["violation_total"] = c.total_violations();
  j["unlisted"] = c.unlisted_violations();
  j["notes"] = c.notes;
  stamp(j, check_schema);
  return j;
}

std::string check_to_text(const log::Certification& c) {
  std::ostringstream o;
  if (c.certified()) {
    o << "certified: " << c.path << ": " << c.ranks_present
      << (c.ranks_present == 1 ? " rank, " : " ranks, ") << steps_text(c.steps) << ", " << c.records
      << (c.records == 1 ? " record" : " records") << "\n";
  } else {
    for (const log::Violation& v : c.violations) {
      o << log::violation_name(v.kind) << ": ";
      if (!v.location.empty()) o << v.location << ": ";
      o << v.message << "\n";
    }
    if (c.unlisted_violations() != 0) {
      o << "... and " << c.unlisted_violations() << " more (at most "
        << log::Certification::kMaxListed << " of each kind are listed)\n";
    }
    const std::uint64_t total = c.total_violations();
    o << "not certified: " << c.path << ": " << total << (total == 1 ? " violation" : " violations")
      << " (";
    bool first = true;
    for (std::size_t k = 0; k < log::kViolationKinds; ++k) {
      if (c.counts[k] == 0) continue;
      o << (first ? "" : ", ") << log::violation_name(static_cast<log::ViolationKind>(k)) << " "
        << c.counts[k];
      first = false;
    }
    o << ")\n";
  }
  if (!c.notes.empty()) {
    o << "notes:\n";
    for (const auto& n : c.notes) o << "  - " << n << "\n";
  }
  return o.str();
}

}  // namespace dtrace::report
