#include "report/verify_report.hpp"

#include <sstream>

#include "report/diff_report.hpp"
#include "report/schema.hpp"
#include "util/words.hpp"

namespace dtrace::report {

using workflow::Certificate;
using workflow::Comparison;
using workflow::Trial;

namespace {

nlohmann::json compared_json(const diff::Compared& c) {
  return {{"steps", {c.first_step, c.last_step}},
          {"step_count", c.steps},
          {"ranks", c.ranks},
          {"records", c.records}};
}

nlohmann::json trial_json(const Trial& trial) {
  nlohmann::json j;
  j["verdict"] = trial.identical() ? "identical" : "diverged";
  j["command"] = trial.argv;
  j["compared"] = compared_json(trial.compared);
  nlohmann::json comparisons = nlohmann::json::array();
  for (const Comparison& c : trial.comparisons) {
    const nlohmann::json d = diff_to_json(c.report);
    comparisons.push_back({{"a", c.a},
                           {"b", c.b},
                           {"what", c.what},
                           {"verdict", d["verdict"]},
                           {"compared", d["compared"]},
                           {"first", d["first"]},
                           {"notes", d["notes"]}});
  }
  j["comparisons"] = comparisons;
  nlohmann::json arms = nlohmann::json::array();
  for (const workflow::Arm& arm : trial.arms) {
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [name, value] : arm.plan.env) env[name] = value;
    arms.push_back({{"label", arm.plan.label},
                    {"run", arm.plan.run_dir},
                    {"env", env},
                    {"seconds", arm.seconds}});
  }
  j["arms"] = arms;
  const Comparison* first = trial.first_divergence();
  if (first == nullptr) {
    j["first"] = nullptr;
  } else {
    nlohmann::json f = diff_to_json(first->report)["first"];
    f["arms"] = {first->a, first->b};
    f["what"] = first->what;
    j["first"] = f;
  }
  return j;
}

std::string mismatch_line(const diff::Mismatch& m) {
  const std::string s = "step " + std::to_string(m.step) + ", rank " + std::to_string(m.rank) + ": " +
                        with_call(m.scope + " " + m.op + " " + m.io + " " + m.name, m.occurrence, m.calls);
  return s + " (" + std::string(diff::kind_name(m.kind)) + ", " +
         std::string(diff::role_name(m.role)) + ")";
}

// "3 steps (0-2) x 2 ranks, 726 records": the size of what was compared.
std::string steps_text(const diff::Compared& c) {
  std::string s = std::to_string(c.steps) + (c.steps == 1 ? " step (" : " steps (") +
                  std::to_string(c.first_step);
  if (c.last_step != c.first_step) s += "-" + std::to_string(c.last_step);
  return s + ") x " + std::to_string(c.ranks) + (c.ranks == 1 ? " rank, " : " ranks, ") +
         std::to_string(c.records) + " records";
}

std::string guarantee_text(const Certificate& c) {
  if (c.guarantee == workflow::Guarantee::run_to_run) {
    return "run-to-run reproducibility (" + std::to_string(c.workload.arms.size()) +
           " independent arms)";
  }
  return "bitwise checkpoint resume (stopped after step " + std::to_string(*c.resume_at - 1) +
         ", resumed at " + std::to_string(*c.resume_at) + ")";
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& word : argv) s += (s.empty() ? "" : " ") + word;
  return s;
}

}  // namespace

nlohmann::json verify_to_json(const Certificate& c) {
  nlohmann::json j;
  j["certified"] = c.certified();
  j["guarantee"] = workflow::guarantee_name(c.guarantee);
  j["resume_at"] = c.resume_at ? nlohmann::json(*c.resume_at) : nlohmann::json();
  j["level"] = c.level;
  j["world_size"] = c.world_size;
  const nlohmann::json workload = trial_json(c.workload);
  j["verdict"] = workload["verdict"];
  j["compared"] = workload["compared"];
  j["first"] = workload["first"];
  j["workload"] = workload;
  j["control"] = c.control ? trial_json(*c.control) : nlohmann::json();
  j["kept"] = c.kept.empty() ? nlohmann::json() : nlohmann::json(c.kept);
  j["notes"] = c.notes;
  stamp(j, verify_schema);
  return j;
}

std::string verify_to_text(const Certificate& c) {
  std::ostringstream o;
  o << (c.certified() ? "certified: " : "NOT certified: ") << guarantee_text(c);
  if (c.certified()) {
    o << ", bit-identical\n";
  } else if (!c.workload.identical()) {
    o << ": the arms diverged\n";
  } else {
    o << ": the control's arms agreed, so this check could not have seen a difference\n";
  }
  o << "  workload: " << command_text(c.workload.argv) << "\n";
  o << "  level:    " << c.level << ", world size " << c.world_size << "\n";
  o << "  compared: " << steps_text(c.workload.compared) << "\n";
  for (const Comparison& comparison : c.workload.comparisons) {
    o << "    " << comparison.a << " vs " << comparison.b << " (" << comparison.what
      << "): " << (comparison.report.diverged() ? "diverged" : "identical") << ", "
      << steps_text(comparison.report.compared) << "\n";
  }
  if (const Comparison* first = c.workload.first_divergence()) {
    o << "  first divergence: " << first->a << " vs " << first->b << " at "
      << mismatch_line(*first->report.first) << "\n";
  }
  if (c.control) {
    o << "  control:  " << command_text(c.control->argv) << "\n";
    if (const Comparison* first = c.control->first_divergence()) {
      o << "    diverged as it must: " << first->a << " vs " << first->b << " at "
        << mismatch_line(*first->report.first) << "\n";
    } else {
      o << "    identical over " << steps_text(c.control->compared)
        << ": it must diverge (is its nondeterminism switched on?)\n";
    }
  }
  for (const auto& note : c.notes) o << "  note: " << note << "\n";
  if (!c.workload.identical()) {
    if (const Comparison* first = c.workload.first_divergence(); first && !c.kept.empty()) {
      o << "trace it: dtrace diff " << c.kept << "/" << first->a << " " << c.kept << "/" << first->b
        << ", then dtrace bisect --trust\n";
    } else {
      o << "trace it: run again with --keep DIR, then dtrace diff and dtrace bisect on two arms\n";
    }
  } else if (!c.kept.empty()) {
    o << "arms kept in " << c.kept << "\n";
  }
  return o.str();
}

}  // namespace dtrace::report
