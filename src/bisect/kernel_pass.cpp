// Stage 3: the suspect layer alone. Both sides replay step N with per-kernel
// records inside the layer and capture every tensor there; then the layer is
// re-run alone from A's captured inputs, K times per side. The first op whose
// inputs match and whose outputs differ between repetitions is the suspect.
#include "bisect/session.hpp"
#include "diff/align.hpp"
#include "diff/classify.hpp"
#include "diff/diff.hpp"

namespace dtrace::bisect {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

// The earliest origin among repetition pairs: every repetition against A's first.
std::optional<Suspect> first_origin(const std::vector<const log::Step*>& reps) {
  if (reps.size() < 2) return std::nullopt;
  const log::Step& reference = *reps.front();
  std::optional<Suspect> best;
  std::int64_t best_seq = INT64_MAX;
  for (std::size_t i = 1; i < reps.size(); ++i) {
    const diff::StepComparison cmp = diff::compare_step(reference, *reps[i]);
    if (!cmp.first || cmp.first->a < 0) continue;
    const log::Record& r = reference.records[static_cast<std::size_t>(cmp.first->a)];
    if (r.seq >= best_seq) continue;
    const diff::Classification c = diff::classify(reference, *reps[i], *cmp.first);
    if (c.role != diff::Role::origin) continue;
    best_seq = r.seq;
    best = Suspect{std::string(r.scope), std::string(r.op), std::string(r.name), std::string(r.io_text),
                   diff::occurrence_of(reference, static_cast<std::size_t>(cmp.first->a))};
  }
  return best;
}

}  // namespace

Result<std::optional<Suspect>> kernel_pass(Session& s, const Suspect& layer) {
  Report& rep = s.report;
  const std::string step = n(rep.step);
  const int k = std::max(2, s.options.repeat);
  // The layer's own records, whose inputs the capture must hold and the
  // isolated repetitions must run from.
  const Target target{layer.scope, layer.op, layer.occurrence};
  // Per-kernel replays of the step inside the layer, capturing its tensors.
  // Files are named by slot: after an earlier divergence (Session::repeat_a)
  // the second slot replays A again.
  // In a later round of the culprit search, with the ops named before pinned.
  for (auto [side, slot] : {std::pair{&std::as_const(s.a), 'A'}, std::pair{&s.second(), 'B'}}) {
    const std::string x(1, slot);
    Variables variables{{"DTRACE_REPLAY_STEP", step},
                        {"DTRACE_LEVEL", "kernel"},
                        {"DTRACE_SCOPE", layer.scope},
                        {"DTRACE_CAPTURE", s.round_path("capture-" + x)},
                        {"DTRACE_OUT_DIR", s.round_path("kernel-" + x)}};
    if (s.step_pins) variables.emplace_back("DTRACE_PIN", *s.step_pins);
    if (auto r = s.replay("capture", *side, variables, target); !r) return r.error();
  }
  // The layer alone from A's captured inputs, K times per side; the pinned
  // calls inside it pinned in each repetition.
  std::optional<std::string> isolation_pins;
  if (!s.pins.empty()) {
    auto written = write_isolation_pins(s.pins, s.round_path("capture-A"), rep.step, target,
                                        s.round_path("pins-isolate"));
    if (!written) return written.error();
    if (*written > 0) isolation_pins = s.round_path("pins-isolate");
  }
  for (auto [side, slot] : {std::pair{&std::as_const(s.a), 'A'}, std::pair{&s.second(), 'B'}}) {
    const std::string x(1, slot);
    Variables variables = isolation_variables(step, layer.scope, layer.scope, layer.occurrence,
                                              s.round_path("capture-A"), k, s.round_path("isolate-" + x));
    if (isolation_pins) variables.emplace_back("DTRACE_PIN", *isolation_pins);
    if (auto r = s.replay("kernel", *side, variables, target); !r) return r.error();
  }
  auto reps_a = load_steps(s.round_path("isolate-A"), rep.rank);
  if (!reps_a) return reps_a.error();
  auto reps_b = load_steps(s.round_path("isolate-B"), rep.rank);
  if (!reps_b) return reps_b.error();
  std::vector<const log::Step*> reps;
  for (const auto& st : reps_a->steps) reps.push_back(&st);
  for (const auto& st : reps_b->steps) reps.push_back(&st);
  if (reps_a->steps.empty()) {
    return Error{"isolating " + layer.scope + " wrote no repetition for rank " + n(rep.rank) + " to " +
                 s.round_path("isolate-A")};
  }
  if (auto suspect = first_origin(reps)) {
    rep.basis = Basis::layer_repetitions;
    return std::optional<Suspect>{suspect};
  }

  // Alone, from identical inputs, the layer repeated itself. The per-kernel
  // replays of the whole step may still show which op differs.
  auto d = s.diff_replays(s.round_path("kernel-A"), s.round_path("kernel-B"));
  if (!d) return Error{"reading the kernel-level replays: " + d.error().message};
  for (const auto& m : d->ranks) {
    if (m.rank == rep.rank && m.role == diff::Role::origin && inside_scope(m.scope, layer.scope)) {
      rep.notes.push_back("re-run alone " + n(k) + " times per side, " + layer.scope +
                          " gave identical outputs; the kernel is named from the per-kernel replays of step " +
                          step);
      rep.basis = Basis::step_replays;
      return std::optional<Suspect>{Suspect{m.scope, m.op, m.name, m.io, m.occurrence}};
    }
  }
  rep.verdict = Verdict::not_localized;
  rep.reached = "kernel pass: inside " + layer.scope + " no op's outputs differ while its inputs match (" +
                n(k) + " isolated repetitions per side, and the per-kernel replays of step " + step + ")";
  return std::optional<Suspect>{};
}

}  // namespace dtrace::bisect
