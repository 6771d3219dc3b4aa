#include "report/bisect_report.hpp"

#include <cstdio>
#include <sstream>

#include "report/schema.hpp"
#include "util/intervals.hpp"
#include "util/words.hpp"

namespace dtrace::report {

namespace {

nlohmann::json evidence_json(const bisect::Evidence& e) {
  nlohmann::json j = {{"output", e.output},
                      {"dtype", e.dtype},
                      {"repetitions_per_side", e.repetitions},
                      {"distinct_outputs", e.distinct_outputs},
                      {"elements", e.elements},
                      {"elements_differing", e.elements_differing},
                      {"max_abs_difference", e.max_abs_difference},
                      {"max_ulp", e.max_ulp ? nlohmann::json(*e.max_ulp) : nlohmann::json()},
                      {"nan", {e.nan_a, e.nan_b}},
                      {"inf", {e.inf_a, e.inf_b}},
                      {"reading", e.reading},
                      {"magnitude", e.magnitude.empty() ? nlohmann::json() : nlohmann::json(e.magnitude)},
                      {"output_magnitude", e.output_magnitude ? nlohmann::json(*e.output_magnitude) : nlohmann::json()},
                      {"input_magnitude", e.input_magnitude ? nlohmann::json(*e.input_magnitude) : nlohmann::json()},
                      {"kernels", e.kernels},
                      {"kernels_device", e.kernels_device.empty() ? nlohmann::json() : nlohmann::json(e.kernels_device)},
                      {"kernels_source", e.kernels_source.empty() ? nlohmann::json() : nlohmann::json(e.kernels_source)}};
  nlohmann::json histogram = nlohmann::json::array();
  for (std::size_t k = 0; k < e.ulp_histogram.size(); ++k) {
    if (e.ulp_histogram[k] == 0) continue;
    const std::uint64_t lo = std::uint64_t{1} << k;
    const std::uint64_t hi = k >= 63 ? UINT64_MAX : (std::uint64_t{1} << (k + 1)) - 1;
    histogram.push_back({{"ulp_min", lo}, {"ulp_max", hi}, {"elements", e.ulp_histogram[k]}});
  }
  j["ulp_histogram"] = histogram;
  j["ulp_undefined"] = e.ulp_undefined;
  nlohmann::json outputs = nlohmann::json::array();
  for (const auto& o : e.outputs) {
    outputs.push_back({{"side", std::string(1, o.side)}, {"repetition", o.repetition}, {"fingerprint", o.fingerprint}});
  }
  j["outputs"] = outputs;
  return j;
}

// What a named kernel rests on, in words (man/dtrace.1, bisect).
std::string basis_text(bisect::Basis basis, const std::string& layer, std::int64_t step, bool confirmed_run) {
  const std::string alone = confirmed_run ? " (alone, from one input, it gave one output)" : " (not confirmed alone)";
  switch (basis) {
    case bisect::Basis::confirmed: return "confirmed alone: its repetitions from one input gave different outputs";
    case bisect::Basis::layer_repetitions:
      return "the layer's repetitions: re-run alone from one input, " + layer +
             " gave this op's output differing while its inputs matched" + alone;
    case bisect::Basis::step_replays:
      return "the per-kernel replays of step " + std::to_string(step) +
             ": the layer re-run alone repeated itself" + alone;
  }
  return "";
}

std::string basis_text(const bisect::Report& r) { return basis_text(r.basis, r.layer, r.step, r.evidence.has_value()); }

// Since 1.7: the compiled region the op lies in (dtrace-fp(5), "Compiled regions").
nlohmann::json region_json(const std::optional<bisect::Region>& region) {
  if (!region) return nullptr;
  const auto text = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  return {{"scope", region->scope}, {"kind", region->kind}, {"part", text(region->part)},
          {"part_means", text(region->part_means)}};
}

// The region line under a named op: where in the compiled code it ran.
void region_text(std::ostringstream& o, const std::optional<bisect::Region>& region) {
  if (!region) return;
  o << "  region:   " << region->scope << " (" << region->kind << ")";
  if (!region->part.empty()) {
    o << ", in its part " << region->part << (region->part_means.empty() ? "" : ": " + region->part_means);
  }
  o << "\n";
}

// Since 1.6: every culprit (man/dtrace.1, EVERY CULPRIT).
nlohmann::json culprit_json(const bisect::Report& r, const bisect::Culprit& c) {
  return {{"op", c.op},
          {"scope", c.scope},
          {"occurrence", c.occurrence},
          {"calls", c.calls},
          {"step", r.step},
          {"rank", c.rank},
          {"role", c.role},
          {"basis", bisect::basis_name(c.basis)},
          {"layer", c.layer.empty() ? nlohmann::json() : nlohmann::json(c.layer)},
          {"region", region_json(c.region)},
          {"evidence", c.evidence ? evidence_json(*c.evidence) : nlohmann::json()},
          {"reached", c.reached},
          {"replays", {c.first_replay, c.end_replay}},
          {"pinned", c.pinned},
          {"notes", c.notes}};
}

// The evidence's two summary lines, as the first culprit's and every later one's.
void evidence_text(std::ostringstream& o, const bisect::Evidence& e) {
  o << "  evidence: output " << e.output << " (" << e.dtype << "): " << e.distinct_outputs
    << " distinct output" << (e.distinct_outputs == 1 ? "" : "s") << " in " << e.repetitions
    << " repetitions per side\n            " << e.reading << "\n";
  if (e.distinct_outputs > 1) {
    char numbers[200];
    std::snprintf(numbers, sizeof numbers, "%llu of %llu elements differ, max |difference| %.3g, ",
                  static_cast<unsigned long long>(e.elements_differing),
                  static_cast<unsigned long long>(e.elements), e.max_abs_difference);
    o << "  numbers:  " << numbers << "max " << (e.max_ulp ? std::to_string(*e.max_ulp) : "-")
      << " ulp, NaN " << e.nan_a << " / " << e.nan_b << ", Inf " << e.inf_a << " / " << e.inf_b
      << " (the two outputs compared)\n";
  }
  if (!e.kernels.empty()) {
    o << "  kernels:  ";
    for (std::size_t i = 0; i < e.kernels.size(); ++i) o << (i ? ", " : "") << e.kernels[i];
    o << " (" << (e.kernels_device.empty() ? "" : e.kernels_device + ", ")
      << (e.kernels_source.empty() ? "the workload's list" : e.kernels_source) << ")\n";
  }
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

}  // namespace

std::string replay_command_line(const bisect::Replay& replay) {
  std::string s;
  for (const auto& [key, value] : replay.env) s += key + "=" + value + " ";
  for (std::size_t i = 0; i < replay.argv.size(); ++i) s += (i ? " " : "") + replay.argv[i];
  return s;
}

nlohmann::json bisect_to_json(const bisect::Report& r) {
  nlohmann::json j;
  j["verdict"] = bisect::verdict_name(r.verdict);
  j["runs"] = {{"a", r.run_a}, {"b", r.run_b}};
  j["step"] = r.step;
  j["rank"] = r.rank;
  j["ranks_replayed"] = r.ranks_replayed;
  j["shared_configuration"] = r.shared_configuration;
  j["layer"] = r.layer.empty() ? nlohmann::json() : nlohmann::json(r.layer);
  if (r.verdict == bisect::Verdict::named) {
    j["culprit"] = {{"op", r.op},
                    {"scope", r.scope},
                    {"occurrence", r.occurrence},
                    {"calls", r.calls},
                    {"step", r.step},
                    {"rank", r.rank},
                    {"role", r.role},
                    {"basis", bisect::basis_name(r.basis)},
                    {"region", region_json(r.region)}};
  } else {
    j["culprit"] = nullptr;
  }
  nlohmann::json culprits = nlohmann::json::array();
  for (const auto& c : r.culprits) culprits.push_back(culprit_json(r, c));
  j["culprits"] = culprits;
  j["search"] = r.search_stop.empty() ? nlohmann::json()
                                      : nlohmann::json{{"stop", r.search_stop}, {"end", r.search_end}};
  j["state"] = r.state.empty() ? nlohmann::json() : nlohmann::json(r.state);
  j["state_scope"] = r.state_scope.empty() ? nlohmann::json() : nlohmann::json(r.state_scope);
  if (r.input) {
    j["input"] = {{"scope", r.input->scope}, {"op", r.input->op}, {"name", r.input->name},
                  {"occurrence", r.input->occurrence}};
  } else {
    j["input"] = nullptr;
  }
  j["state_op"] = r.state.empty() ? nlohmann::json() : nlohmann::json(r.state_op);
  // Since 1.4 (verdict generator).
  if (r.generator) {
    j["generator"] = {{"scope", r.generator->scope}, {"op", r.generator->op},        {"io", r.generator->io},
                      {"name", r.generator->name},   {"first_step", r.generator->first_step}};
  } else {
    j["generator"] = nullptr;
  }
  j["evidence"] = r.evidence ? evidence_json(*r.evidence) : nlohmann::json();
  if (r.earlier) {
    j["earlier"] = {{"step", r.earlier->step},
                    {"rank", r.earlier->rank},
                    {"record", r.earlier->record},
                    {"command", r.earlier->command}};
  } else {
    j["earlier"] = nullptr;
  }
  // Since 1.2 (verdict fast-forward).
  if (r.departed) {
    j["departed"] = {{"step", r.departed->step},
                     {"rank", r.departed->rank},
                     {"side", std::string(1, r.departed_side)},
                     {"record", r.departed->record},
                     {"command", r.departed->command}};
  } else {
    j["departed"] = nullptr;
  }
  if (r.outcomes) {
    const auto& o = *r.outcomes;
    j["outcomes"] = {{"replays", o.replays}, {"like_a", o.like_a},     {"like_b", o.like_b},
                     {"neither", o.neither}, {"attempts", o.attempts}, {"budget", o.budget}};
  } else {
    j["outcomes"] = nullptr;
  }
  j["reached"] = r.reached;
  nlohmann::json replays = nlohmann::json::array();
  double total = 0;
  for (const auto& p : r.replays) {
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [key, value] : p.env) env[key] = value;
    replays.push_back({{"stage", p.stage},
                       {"side", std::string(1, p.side)},
                       {"argv", p.argv},
                       {"env", env},
                       {"seconds", p.seconds},
                       {"exit", p.exit},
                       {"outcome", p.outcome},
                       {"via", p.request ? "request" : "launch"},
                       {"launch", p.launch}});
    total += p.seconds;
  }
  j["replays"] = replays;
  j["replay_seconds"] = total;
  nlohmann::json launches = nlohmann::json::array();
  for (const auto& l : r.launches) {
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [key, value] : l.env) env[key] = value;
    launches.push_back({{"side", std::string(1, l.side)},
                        {"stage", l.stage},
                        {"session", l.session},
                        {"argv", l.argv},
                        {"env", env},
                        {"requests", l.requests},
                        {"seconds", l.seconds},
                        {"outcome", l.outcome},
                        {"why", l.why}});
    // Since 1.5: a launch of a request its session declined.
    launches.back()["declined"] = l.declined ? nlohmann::json{{"session", l.declined->session},
                                                               {"request", l.declined->request},
                                                               {"reason", l.declined->reason}}
                                             : nlohmann::json();
  }
  j["launches"] = launches;
  j["replay_mode"] = r.replay_mode;
  j["replay_mode_why"] = r.replay_mode_why;
  j["notes"] = r.notes;
  stamp(j, bisect_schema);
  return j;
}

std::string bisect_to_text(const bisect::Report& r) {
  std::ostringstream o;
  o << "A: " << r.run_a << "\nB: " << r.run_b << "\n";
  if (r.nothing_to_bisect) {
    // No step was chosen and nothing replayed: the runs do not diverge.
    o << "nothing to bisect: the runs are identical\n  reached:  " << r.reached << "\n";
    return o.str();
  }
  IntervalSet ranks;
  for (auto x : r.ranks_replayed) ranks.insert(x);
  o << "step " << r.step << ", rank " << r.rank;
  if (!ranks.empty()) {
    o << " (replays ran " << noun(ranks.size(), "rank ", "ranks ") << ranks.to_string() << ")";
  }
  o << "\n";
  switch (r.verdict) {
    case bisect::Verdict::named:
      // A verdict that did not show alone says so on its own line, not only below.
      o << (r.basis == bisect::Basis::confirmed          ? "named: "
            : r.basis == bisect::Basis::layer_repetitions ? "named on the layer's repetitions: "
                                                          : "named on the step's per-kernel replays: ")
        << with_call(r.scope + " " + r.op, r.occurrence, r.calls) << " (" << r.role << ")\n";
      if (!r.layer.empty()) o << "  layer:    " << r.layer << "\n";
      region_text(o, r.region);
      o << "  basis:    " << basis_text(r) << "\n";
      break;
    case bisect::Verdict::restore:
      o << "restore: the step-start state differs before step " << r.step << " runs: " << bisect::state_record(r)
        << "\n  an incomplete restore (state not saved or not loaded) is the divergence\n";
      break;
    case bisect::Verdict::data:
      o << "data: the inputs of step " << r.step << " differ: " << r.input->text() << "\n  what the step consumed differs (the data pipeline's state), not a kernel in the step\n";
      break;
    case bisect::Verdict::generator: {
      const auto& g = *r.generator;
      o << "generator: the state of a generator step " << r.step << " draws from differs: " << g.scope << " " << g.op << " " << g.io << " " << g.name << "\n  "
        << (g.first_step ? "step " + std::to_string(r.step) +
                               " is where both runs begin: nothing was restored; the generator was not seeded alike "
                               "(not seeded, or seeded from the time or the process id)"
                         : std::string("the generator was not seeded alike (not seeded, or seeded from the time or "
                                       "the process id), or is not in the state a checkpoint saves and a restore "
                                       "loads"))
        << "\n  advice:   seed it from the configuration, and put it in the program's state (checkpointed, "
           "restored, recorded with the step's state)\n";
      break;
    }
    case bisect::Verdict::not_reproduced: o << "not reproduced\n"; break;
    case bisect::Verdict::not_localized: o << "not localized\n"; break;
    case bisect::Verdict::diverged_earlier:
      o << "diverged-earlier: the runs' records already differ at step " << r.earlier->step << ", before step "
        << r.step << "\n";
      break;
    case bisect::Verdict::fast_forward:
      o << "fast-forward: replaying run " << r.departed_side << " from its checkpoint, step " << r.departed->step
        << " came out otherwise than the run recorded it (" << r.departed->record << ")\n"
        << "  not a restore: a step between the checkpoint and step " << r.step
        << " is not deterministic; bisect there: " << r.departed->command << "\n";
      break;
  }
  if (r.earlier) {
    o << "  earlier:  the runs diverged before step " << r.step << ": their records first differ at step "
      << r.earlier->step << " (rank " << r.earlier->rank << ", " << r.earlier->record << "); bisect there: "
      << r.earlier->command << "\n";
  }
  o << "  reached:  " << r.reached << "\n";
  if (r.outcomes) {
    const auto& x = *r.outcomes;
    o << "  outcomes: of " << x.replays << " layer-level replays (" << x.attempts << " of at most " << x.budget
      << " attempts), " << x.like_a << " reproduced run A's records of the step, " << x.like_b << " run B's, "
      << x.neither << " neither\n";
  }
  if (r.evidence) evidence_text(o, *r.evidence);
  // Every culprit after the first, each found with the ones before it pinned.
  if (r.culprits.size() > 1) {
    o << "culprits (" << r.culprits.size() << ", in the order found; each with the ones before it pinned):\n";
    for (std::size_t i = 0; i < r.culprits.size(); ++i) {
      const auto& c = r.culprits[i];
      o << "  " << i + 1 << ". " << with_call(c.scope + " " + c.op, c.occurrence, c.calls) << " (" << c.role
        << ", rank " << c.rank << ")" << (i == 0 ? ": above\n" : "\n");
      if (i == 0) continue;
      if (!c.layer.empty()) o << "  layer:    " << c.layer << "\n";
      region_text(o, c.region);
      o << "  basis:    " << basis_text(c.basis, c.layer, r.step, c.evidence.has_value()) << "\n";
      o << "  pinned:   ";
      for (std::size_t k = 0; k < c.pinned.size(); ++k) o << (k ? ", " : "") << c.pinned[k];
      o << "\n";
      if (c.evidence) evidence_text(o, *c.evidence);
      for (const auto& note : c.notes) o << "  note:     " << note << "\n";
    }
  }
  if (!r.search_end.empty()) o << "  search:   " << r.search_end << "\n";
  if (!r.replays.empty()) {
    double total = 0;
    for (const auto& p : r.replays) total += p.seconds;
    const std::size_t sessions = static_cast<std::size_t>(
        std::count_if(r.launches.begin(), r.launches.end(), [](const bisect::Launch& l) { return l.session; }));
    o << "replays (" << r.replays.size() << ", " << seconds(total) << "; "
      << plural(static_cast<std::int64_t>(r.launches.size()), "launch", "launches");
    if (sessions > 0) o << ", " << sessions << (sessions == 1 ? " of them a session" : " of them sessions");
    o << ": " << r.replay_mode_why << "):\n";
    for (const auto& p : r.replays) {
      o << "  " << p.stage << " " << p.side << "  " << seconds(p.seconds) << "  " << p.outcome << "  ";
      if (p.request) {
        o << "request to session " << p.launch + 1 << ": ";
        for (const auto& [key, value] : p.env) o << key << "=" << value << " ";
        o << "\n";
      } else {
        // A replay its session declined says so, and why, before its command.
        const auto* launched = p.launch >= 0 && static_cast<std::size_t>(p.launch) < r.launches.size()
                                   ? &r.launches[static_cast<std::size_t>(p.launch)]
                                   : nullptr;
        if (launched && launched->declined) {
          o << "launched, session " << launched->declined->session + 1 << " declined request "
            << launched->declined->request << " (" << launched->declined->reason << "): ";
        }
        o << replay_command_line(p) << "\n";
      }
    }
    for (std::size_t i = 0; i < r.launches.size(); ++i) {
      const auto& l = r.launches[i];
      if (!l.session) continue;
      const auto declined = std::count_if(r.launches.begin(), r.launches.end(), [&](const bisect::Launch& other) {
        return other.declined && other.declined->session == static_cast<int>(i);
      });
      o << "  session " << i + 1 << " (" << l.side << "): " << plural(l.requests, "request", "requests")
        << (declined > 0 ? " (" + std::to_string(declined) + " declined, launched)" : "") << " in "
        << seconds(l.seconds) << (l.why.empty() ? "" : " (fresh: " + l.why + ")") << "  ";
      for (const auto& [key, value] : l.env) o << key << "=" << value << " ";
      for (std::size_t k = 0; k < l.argv.size(); ++k) o << (k ? " " : "") << l.argv[k];
      o << "\n";
    }
  }
  if (!r.notes.empty()) {
    o << "notes:\n";
    for (const auto& n : r.notes) o << "  - " << n << "\n";
  }
  return o.str();
}

}  // namespace dtrace::report
