// The bisect driver: which step and rank, then the stages in order, each
// narrowing the search or settling the verdict.
#include "bisect/bisect.hpp"

#include <algorithm>

#include "bisect/session.hpp"
#include "diff/diff.hpp"
#include "util/words.hpp"

namespace dtrace::bisect {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

// The step and rank to replay: as given, or the first divergence diff finds.
// False when there is nothing to bisect.
Result<bool> choose_step(const Options& options, Report& rep) {
  if (options.step && options.rank) {
    rep.step = *options.step;
    rep.rank = *options.rank;
    return true;
  }
  auto d = diff::diff_runs(options.run_a, options.run_b);
  if (!d) return d.error();
  // Identical runs hold no divergence to bisect at any step they share, asked
  // for or not: no replay is started.
  const bool shared_step = !options.step || (*options.step >= d->compared.first_step &&
                                             *options.step <= d->compared.last_step);
  if (!d->first && shared_step) {
    rep.verdict = Verdict::not_reproduced;
    rep.nothing_to_bisect = true;
    rep.reached = "nothing to bisect: the runs are identical over the steps they share (steps " +
                  n(d->compared.first_step) + "-" + n(d->compared.last_step) +
                  "), so no bisect is needed";
    if (options.step) rep.step = *options.step;
    return false;
  }
  if (!options.step) {
    rep.step = d->first->step;
    rep.rank = options.rank.value_or(d->first->rank);
    return true;
  }
  rep.step = *options.step;
  rep.rank = 0;
  // The rank diff names at that step: of the ranks that first diverge there,
  // the origin, else the lowest; when none does, a rank already diverged
  // before it (the earliest, then the lowest): its records differ at the step
  // too, so the restore check there says the runs diverged earlier. Rank 0,
  // which may not differ at all, would only show the replays' difference on
  // another rank after the restore check had passed on it.
  const diff::Mismatch* best = nullptr;
  for (const auto& m : d->ranks) {
    if (m.step != rep.step) continue;
    if (best == nullptr || (m.role == diff::Role::origin && best->role != diff::Role::origin)) best = &m;
  }
  for (const auto& m : d->ranks) {
    if (best != nullptr && best->step == rep.step) break;
    if (m.step < rep.step && (best == nullptr || m.step < best->step)) best = &m;
  }
  if (best != nullptr) rep.rank = best->rank;
  return true;
}

}  // namespace

Result<bool> name_kernel(Session& session, const Suspect& layer) {
  Report& rep = session.report;
  auto kernel = kernel_pass(session, layer);
  if (!kernel) {
    // What was localized before the failure is not lost with it: the layer
    // stands (its replays ran and were read), only the kernel is not named.
    return Error{"the layer pass localized step " + n(rep.step) + ", rank " + n(rep.rank) + " to layer " +
                 layer.scope + " (its inputs match, its outputs differ); then " + kernel.error().message};
  }
  if (!*kernel) return false;
  rep.verdict = Verdict::named;
  rep.op = (*kernel)->op;
  rep.scope = (*kernel)->scope;
  rep.role = "origin";
  rep.occurrence = (*kernel)->occurrence;
  // A region the workload declared in the kernel pass's capture of A.
  rep.region = region_of(session.round_path("capture-A"), rep.rank, rep.scope, rep.notes);
  rep.evidence.reset();
  // How many calls of the op the step holds, from A's per-kernel replay of it.
  auto replayed = load_step(session.round_path("kernel-A"), rep.rank, rep.step);
  if (!replayed) return replayed.error();
  rep.calls = 1;
  if (*replayed) rep.calls = std::max(1, calls_of((*replayed)->step, rep.scope, rep.op));
  rep.calls = std::max(rep.calls, rep.occurrence + 1);
  const std::string kernel_call = with_call(rep.scope + " " + rep.op, rep.occurrence, rep.calls);
  rep.reached = "kernel named: " + kernel_call + " (output " + (*kernel)->name + ")";
  session.note("kernel", "suspect kernel: " + kernel_call + "; confirming it alone");
  if (auto r = confirm(session, **kernel); !r) {
    // The kernel is named; a confirmation that could not run is reported, not
    // fatal. One the workload did not comply with is trouble, as at any stage.
    if (session.noncompliant()) return r.error();
    rep.notes.push_back("confirmation failed: " + r.error().message);
  }
  return true;
}

std::string state_record(const Report& report) {
  return StateRecord{report.state_scope, report.state_op, report.state}.text();
}

Result<Report> run(const Options& options, const Progress& progress, const StageNote& note) {
  Report rep;
  rep.run_a = options.run_a;
  rep.run_b = options.run_b;
  auto chosen = choose_step(options, rep);
  if (!chosen) return chosen.error();
  if (!*chosen) return rep;
  Session session(options, progress, note, rep);
  if (auto r = plan_sides(session); !r) return r.error();
  if (runs_consumed_different_data(session)) return rep;
  if (auto r = session.open_workdir(); !r) return r.error();

  auto layer = layer_pass(session);
  if (!layer) return layer.error();
  if (!*layer) return rep;
  session.note("layer", "suspect layer: " + (*layer)->scope + " (inputs match, outputs differ)");
  auto named = name_kernel(session, **layer);
  if (!named) return named.error();
  if (!*named) return rep;
  if (auto r = search_culprits(session); !r) return r.error();
  return rep;
}

}  // namespace dtrace::bisect
