#include "report/diff_report.hpp"

#include <sstream>

#include "diff/consumed.hpp"
#include "report/schema.hpp"
#include "util/words.hpp"

namespace dtrace::report {

using diff::Mismatch;

namespace {

nlohmann::json mismatch_json(const Mismatch& m) {
  nlohmann::json j = {{"step", m.step},
                      {"rank", m.rank},
                      {"seq", m.seq},
                      {"scope", m.scope},
                      {"op", m.op},
                      {"io", m.io},
                      {"name", m.name},
                      {"occurrence", m.occurrence},
                      {"kind", diff::kind_name(m.kind)},
                      {"role", diff::role_name(m.role)},
                      {"detail", m.detail},
                      {"a", m.a},
                      {"b", m.b},
                      {"a_location", m.a_location.empty() ? nlohmann::json() : nlohmann::json(m.a_location)},
                      {"b_location", m.b_location.empty() ? nlohmann::json() : nlohmann::json(m.b_location)}};
  if (m.ulp) j["ulp"] = *m.ulp;
  else if (!m.a.is_null() && m.a.contains("bits")) j["ulp"] = nullptr;
  // Since 1.1.
  if (m.generator) {
    j["generator"] = {{"scope", m.generator->scope}, {"op", m.generator->op}, {"io", m.generator->io},
                      {"name", m.generator->name}};
  } else {
    j["generator"] = nullptr;
  }
  return j;
}

std::string where(const Mismatch& m) {
  return with_call(m.scope + " " + m.op + " " + m.io + " " + m.name, m.occurrence, m.calls);
}

// A mismatch a generator's state explains (diff::classify), in words.
std::string generator_text(const Mismatch& m) {
  const diff::GeneratorRecord& g = *m.generator;
  const bool itself = g.scope == m.scope && g.op == m.op && g.io == m.io && g.name == m.name;
  std::string s = itself ? "a generator's state differs while every record before it matches: not an op of the step"
                         : "the step drew from a generator whose state differs (" + g.text() +
                               "), and no record before this one differs";
  return s + "; the generator was not seeded alike (not seeded, or seeded from the time or the process id), or "
             "not saved and restored; seed it and put it in the program's state";
}

std::string json_text(const nlohmann::json& v) {
  if (v.is_null()) return "(unset)";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

nlohmann::json diff_to_json(const diff::Report& r) {
  nlohmann::json j;
  j["verdict"] = r.diverged() ? "diverged" : "identical";
  j["runs"] = {{"a", r.run_a}, {"b", r.run_b}};
  j["first"] = r.first ? mismatch_json(*r.first) : nlohmann::json();
  j["ranks"] = nlohmann::json::array();
  for (const Mismatch& m : r.ranks) j["ranks"].push_back(mismatch_json(m));
  j["compared"] = {{"steps", {r.compared.first_step, r.compared.last_step}},
                   {"step_count", r.compared.steps},
                   {"ranks", r.compared.ranks},
                   {"records", r.compared.records}};
  j["notes"] = r.notes;
  nlohmann::json header = nlohmann::json::array();
  for (const auto& d : r.header_differences) {
    header.push_back({{"section", d.section}, {"key", d.key}, {"a", d.a}, {"b", d.b}});
  }
  j["header_differences"] = header;
  nlohmann::json flags = nlohmann::json::array();
  for (const auto& f : r.env_flags) {
    flags.push_back({{"run", std::string(1, f.run)}, {"key", f.key}, {"value", f.value}, {"reason", f.reason}});
  }
  j["env_flags"] = flags;
  stamp(j, diff_schema);
  return j;
}

std::string diff_to_text(const diff::Report& r) {
  std::ostringstream o;
  o << "A: " << r.run_a << "\nB: " << r.run_b << "\n";
  if (!r.first) {
    o << "identical: no divergence";
    o << " over ";
  } else {
    const Mismatch& f = *r.first;
    o << "diverged at step " << f.step << ", rank " << f.rank << "\n";
    o << "  first:   " << where(f) << " (seq " << f.seq << ")\n";
    o << "  kind:    " << diff::kind_name(f.kind) << ": " << f.detail;
    if (f.ulp) o << ", " << *f.ulp << " ulp";
    o << "\n  role:    " << diff::role_name(f.role);
    if (f.role == diff::Role::origin) o << " (its inputs match: this op introduced the divergence)";
    if (diff::consumed_by_step(f.scope, f.io)) {
      o << " (what the step consumed, its data, differs: not a kernel; dtrace bisect names it)";
    } else if (f.generator && f.role == diff::Role::unknown) {
      o << " (" << generator_text(f) << ")";
    } else if (f.role == diff::Role::receiver) {
      o << " (an input already differed" << (f.generator ? "; " + generator_text(f) : std::string()) << ")";
    }
    o << "\n";
    if (!f.a_location.empty()) o << "  A:       " << f.a_location << "\n";
    if (!f.b_location.empty()) o << "  B:       " << f.b_location << "\n";
    o << "diverged ranks (" << r.ranks.size() << "):\n";
    for (const Mismatch& m : r.ranks) {
      o << "  rank " << m.rank << "  step " << m.step << "  seq " << m.seq << "  " << where(m) << "  "
        << diff::kind_name(m.kind) << "  " << diff::role_name(m.role) << "\n";
    }
  }
 if (r.diverged()) o << "compared: ";
  o << "steps " << r.compared.first_step << "-" << r.compared.last_step << " (" << r.compared.steps
    << (r.compared.steps == 1 ? " step" : " steps") << ") on " << r.compared.ranks << (r.compared.ranks == 1 ? " rank, " : " ranks, ")
    << r.compared.records
    << (!r.searched ? " records\n"
        : r.diverged() ? " records read (the steps before each rank's first difference known equal by their chains)\n"
                       : " records read (the other steps known equal by their chains)\n");
  if (!r.header_differences.empty()) {
    o << "header differences:\n";
    for (const auto& d : r.header_differences) {
      o << "  " << d.section << (d.key.empty() ? "" : " " + d.key) << ": A " << json_text(d.a) << ", B "
        << json_text(d.b) << "\n";
    }
  }
  // The rules' reasons read on from the assignment ("NCCL_ALGO=Tree, whose
  // reduction order is not fixed"), so the warning is the reason itself.
  for (const auto& f : r.env_flags) {
    o << "warning: run " << f.run << " used ";
    if (f.reason.starts_with(f.key + "=" + f.value)) {
      o << f.reason << "\n";
    } else {
      o << f.key << "=" << f.value << ": " << f.reason << "\n";
    }
  }
  if (!r.notes.empty()) {
    o << "notes:\n";
    for (const auto& n : r.notes) o << "  - " << n << "\n";
  }
  return o.str();
}

}  // namespace dtrace::report
