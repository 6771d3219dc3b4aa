// Stage 2 (with stage 1's replays): replay step N on both sides at layer level.
// The replays' step-start state is checked against what each run recorded and
// against each other (the restore check); then the first layer whose inputs
// match and whose outputs differ is the suspect.
#include "bisect/session.hpp"
#include "diff/diff.hpp"

namespace dtrace::bisect {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

// Does replaying `side` start from the state its run recorded at the step?
Result<bool> restore_matches_run(Session& s, const Side& side, const std::string& replay_out) {
  Report& rep = s.report;
  auto replayed = load_step(replay_out, rep.rank, rep.step);
  if (!replayed) {
    return Error{"replay of run " + std::string(1, side.name) + " wrote a log dtrace cannot read: " +
                 replayed.error().message};
  }
  if (!*replayed) {
    return Error{"replay of run " + std::string(1, side.name) + " wrote no complete step " + n(rep.step) +
                 " for rank " + n(rep.rank) + " to " + replay_out};
  }
  if (!side.recorded) return true;  // the run has no such step (a resumed run starts later)
  if (auto diff = first_state_difference((*replayed)->step, side.recorded->step)) {
    rep.verdict = Verdict::restore;
    rep.state = diff->first;
    rep.state_scope = diff->second;
    rep.reached = "restore check: replaying run " + std::string(1, side.name) + " at step " + n(rep.step) +
                  " does not restore the state the run recorded: " + diff->second + " " + diff->first;
    return false;
  }
  return true;
}

}  // namespace

Result<std::optional<Suspect>> layer_pass(Session& s) {
  Report& rep = s.report;
  const int attempts = std::max(1, s.options.repeat);
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const std::string out_a = s.path("layer-A-" + n(attempt));
    const std::string out_b = s.path("layer-B-" + n(attempt));
    for (auto [side, out] : {std::pair{&s.a, out_a}, std::pair{&s.b, out_b}}) {
      if (auto r = s.replay("layer", *side, {{"DTRACE_REPLAY_STEP", n(rep.step)},
                                             {"DTRACE_LEVEL", "layer"},
                                             {"DTRACE_OUT_DIR", out}});
          !r) {
        return r.error();
      }
    }
    if (attempt == 0) {
      for (auto [side, out] : {std::pair{&s.a, out_a}, std::pair{&s.b, out_b}}) {
        auto ok = restore_matches_run(s, *side, out);
        if (!ok) return ok.error();
        if (!*ok) {
          s.note("restore", rep.reached);
          return std::optional<Suspect>{};
        }
      }
      s.note("restore", "the replays of A and B start step " + n(rep.step) +
                            " from the state each run recorded there");
    }
    auto d = diff::diff_runs(out_a, out_b);
    if (!d) return Error{"reading the layer-level replays: " + d.error().message};
    if (rep.ranks_replayed.empty()) {
      for (std::int32_t r = 0; r < d->compared.ranks; ++r) rep.ranks_replayed.push_back(r);
    }
    if (!d->diverged()) {
      rep.notes.push_back("layer pass, attempt " + n(attempt + 1) + ": the two replays of step " +
                          n(rep.step) + " agree");
      continue;
    }
    const diff::Mismatch* m = &*d->first;
    for (const auto& ranked : d->ranks) {
      if (ranked.rank == rep.rank) m = &ranked;
    }
    if (m->rank != rep.rank) {
      rep.notes.push_back("rank " + n(rep.rank) + " did not diverge in the replays; following rank " +
                          n(m->rank) + ", which did");
      rep.rank = m->rank;
    }
    if (m->io == "state") {
      rep.verdict = Verdict::restore;
      rep.state = m->name;
      rep.state_scope = m->scope;
      rep.reached = "restore check: the replays of A and B start step " + n(rep.step) +
                    " from different state: " + m->scope + " " + m->name;
      s.note("restore", rep.reached);
      return std::optional<Suspect>{};
    }
    if (m->role != diff::Role::origin) {
      rep.verdict = Verdict::not_localized;
      rep.reached = "layer pass: the first layer-level difference, " + m->scope + " " + m->op + " " + m->io +
                    " " + m->name + ", is a " + std::string(diff::role_name(m->role)) +
                    ": no recorded layer introduces it";
      return std::optional<Suspect>{};
    }
    rep.layer = m->scope;
    return std::optional<Suspect>{Suspect{m->scope, m->op, m->name, m->io, m->occurrence}};
  }
  rep.verdict = Verdict::not_reproduced;
  rep.reached = "layer pass: " + n(attempts) + (attempts == 1 ? " replay" : " replays") + " of step " +
                n(rep.step) + " on each side agree at layer level; the divergence did not reproduce";
  return std::optional<Suspect>{};
}

}  // namespace dtrace::bisect
