// Stage 2 (with stage 1's replays): replay step N on both sides at layer level.
// The replays' step-start state is checked against what each run recorded and
// against each other (the restore check); then the first layer whose inputs
// match and whose outputs differ is the suspect.
#include <algorithm>

#include "bisect/session.hpp"
#include "diff/align.hpp"
#include "diff/diff.hpp"

namespace dtrace::bisect {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

// Attempts the layer pass makes when its replays agree with each other and
// reproduce one run's records of the step while the runs differ (dtrace(1),
// "per-process choices"): a choice made once per process comes out either way
// in each replay, so more replays are started until two differ, within this
// budget (or --repeat, if larger).
constexpr int kPerProcessAttempts = 8;

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
    // Not a restore that missed state when a step fast-forwarded from an
    // older checkpoint already came out otherwise than the run.
    auto departed = fast_forward_departed(s, side, replay_out);
    if (!departed) return departed.error();
    if (*departed) return false;
    const std::string found = "restore check: replaying run " + std::string(1, side.name) + " at step " +
                              n(rep.step) + " does not start from the generator state the run recorded (" +
                              diff->text() + ")";
    auto settled = generator_at_start(s, *diff, found);
    if (!settled) return settled.error();
    if (*settled) return false;
    rep.verdict = Verdict::restore;
    set_state(rep, *diff);
    rep.reached = "restore check: replaying run " + std::string(1, side.name) + " at step " + n(rep.step) +
                  " does not restore the state the run recorded: " + state_record(rep);
    return false;
  }
  // The replays may still localize a kernel between themselves; what they
  // cannot do is reproduce the run, and the report must say why.
  if (auto input = first_input_difference((*replayed)->step, side.recorded->step, true)) {
    const std::string line = "data: replaying run " + std::string(1, side.name) + " at step " + n(rep.step) +
                             " does not feed the step what the run consumed there (" + input->text() +
                             "): its checkpoint does not restore the data "
                             "pipeline's state, so the replays compute from other data than the run did";
    rep.notes.push_back(line);
    s.note("restore", line);
  }
  return true;
}

// Which run's records of the step a replay reproduced.
Result<void> classify_replay(const Session& s, const std::string& replay_out, Outcomes& outcomes) {
  auto replayed = load_step(replay_out, s.report.rank, s.report.step);
  if (!replayed) return replayed.error();
  ++outcomes.replays;
  if (!*replayed) {
    ++outcomes.neither;
    return {};
  }
  const auto like_a = reproduces((*replayed)->step, s.a.recorded->step);
  const auto like_b = reproduces((*replayed)->step, s.b.recorded->step);
  if (like_a.value_or(false) && !like_b.value_or(false)) {
    ++outcomes.like_a;
  } else if (like_b.value_or(false) && !like_a.value_or(false)) {
    ++outcomes.like_b;
  } else {
    ++outcomes.neither;
  }
  return {};
}

std::string replays_of(int count) { return n(count) + (count == 1 ? " replay" : " replays"); }

// What a per-process search that never saw two outcomes learned.
std::string per_process_reading(const Outcomes& o, std::int64_t step) {
  const std::string head = "layer pass: " + n(o.attempts) + " attempts (" + replays_of(o.replays) + ") of step " +
                           n(step) + " all agree with each other, though the runs' records of the step differ; ";
  if (o.like_a == o.replays || o.like_b == o.replays) {
    const char seen = o.like_a == o.replays ? 'A' : 'B';
    const char missing = seen == 'A' ? 'B' : 'A';
    return head + "every replay reproduced run " + std::string(1, seen) + "'s records and run " +
           std::string(1, missing) + "'s outcome never came up: a choice made once per process (an autotuner's " +
           "pick) that went run " + std::string(1, missing) + "'s way only in that run, or a difference outside " +
           "the replays (the machine, a library, the environment) made run " + std::string(1, missing) + " differ";
  }
  if (o.neither == o.replays) {
    return head + "no replay reproduced either run's records: what both runs computed at that step depended on "
                  "something the replays do not reproduce (the machine, a library, the environment, the data), "
                  "not on a choice made per process";
  }
  return head + n(o.like_a) + " reproduced run A's records, " + n(o.like_b) + " run B's, " + n(o.neither) +
         " neither; the divergence did not reproduce between replays";
}

// The restore check's case (a) on the followed rank: does each replay
// (attempt 0's, of A and of B) start from the state its run recorded? False
// when one does not, the verdict then set (restore, or fast-forward).
Result<bool> replays_restore_their_runs(Session& s, const std::string& out_a, const std::string& out_b) {
  for (auto [side, out] : {std::pair{&s.a, out_a}, std::pair{&s.b, out_b}}) {
    auto ok = restore_matches_run(s, *side, out);
    if (!ok) return ok.error();
    if (!*ok) {
      s.note("restore", s.report.reached);
      return false;
    }
  }
  return true;
}

// The restore check again, on the rank now followed (the replays differ on
// another rank than the one it ran on): that rank's recorded step is loaded,
// attempt 0's replays checked against their runs, and the runs against each
// other. True when that settles the verdict: restore, or diverged-earlier
// even where A and B share one configuration (the pass has replayed B
// already; bisecting the earlier step is the answer that holds either way).
Result<bool> recheck_restore(Session& s) {
  for (Side* side : {&s.a, &s.b}) {
    auto loaded = load_step(side->run, s.report.rank, s.report.step);
    if (!loaded) return loaded.error();
    side->recorded = std::move(*loaded);
  }
  auto restored = replays_restore_their_runs(s, s.path("layer-A-0"), s.path("layer-B-0"));
  if (!restored) return restored.error();
  if (!*restored) return true;
  return runs_diverged_earlier(s, /*may_repeat_a=*/false);
}

}  // namespace

Result<std::optional<Suspect>> layer_pass(Session& s) {
  Report& rep = s.report;
  const int attempts = std::max(1, s.options.repeat);
  int budget = attempts;
  // The runs' own records of the step differ on the followed rank: replays
  // that agree with each other then point at a per-process choice.
  const bool runs_differ =
      s.a.recorded && s.b.recorded && diff::compare_step(s.a.recorded->step, s.b.recorded->step).first;
  Outcomes outcomes;
  bool agreed_while_runs_differ = false;
  std::int32_t checked_rank = rep.rank;  // the rank the restore check ran on
  std::string first_replay;  // the first replay of A: later attempts are compared with it too
  int attempt = 0;
  bool fresh_noted = false;
  for (; attempt < budget; ++attempt) {
    if (agreed_while_runs_differ && !s.repeat_a &&
        (s.uses_sessions(s.a) || s.uses_sessions(s.b))) {
      // The other run's outcome of a choice made once per process cannot come
      // up in a session that already made it: each attempt of the search gets
      // fresh processes, and the stages after it ask the ones that diverged.
      const std::string why = "layer pass attempt " + n(attempt + 1) +
                              ": a choice made once per process is the same in every request of one session";
      if (!fresh_noted) {
        fresh_noted = true;
        rep.notes.push_back("layer pass: from attempt " + n(attempt + 1) +
                            " on, each attempt ran in fresh sessions (a choice made once per process is the "
                            "same in every request of one session)");
      }
      s.fresh_sessions(why);
    }
    const std::string out_a = s.path("layer-A-" + n(attempt));
    const std::string out_b = s.path("layer-B-" + n(attempt));
    std::string second_out = s.repeat_a ? s.path("layer-A-" + n(attempt) + "-again") : out_b;
    for (auto [side, out] : {std::pair{&std::as_const(s.a), out_a}, std::pair{&s.second(), second_out}}) {
      if (auto r = s.replay("layer", *side, {{"DTRACE_REPLAY_STEP", n(rep.step)},
                                             {"DTRACE_LEVEL", "layer"},
                                             {"DTRACE_OUT_DIR", out}});
          !r) {
        return r.error();
      }
    }
    if (attempt == 0) {
      // Which ranks the replays ran, said even when the restore check settles it.
      if (auto reader = log::RunReader::open(out_a); reader && rep.ranks_replayed.empty()) {
        for (std::int32_t r = 0; r < (*reader)->header().world_size; ++r) rep.ranks_replayed.push_back(r);
      }
      auto restored = replays_restore_their_runs(s, out_a, out_b);
      if (!restored) return restored.error();
      if (!*restored) return std::optional<Suspect>{};
      auto earlier = runs_diverged_earlier(s);
      if (!earlier) return earlier.error();
      if (*earlier) return std::optional<Suspect>{};
      if (s.repeat_a) {
        // B's replay served the restore check; the step is now A's, repeated.
        second_out = s.path("layer-A-0-again");
        if (auto r = s.replay("layer", s.a, {{"DTRACE_REPLAY_STEP", n(rep.step)},
                                             {"DTRACE_LEVEL", "layer"},
                                             {"DTRACE_OUT_DIR", second_out}});
            !r) {
          return r.error();
        }
      } else {
        s.note("restore", "the replays of A and B start step " + n(rep.step) +
                              " from the state each run recorded there");
      }
      first_replay = out_a;
    }
    if (runs_differ && !s.repeat_a) {
      for (const std::string& out : {out_a, second_out}) {
        if (auto r = classify_replay(s, out, outcomes); !r) return r.error();
      }
    }
    auto d = s.diff_replays(out_a, second_out);
    if (!d) return Error{"reading the layer-level replays: " + d.error().message};
    if (rep.ranks_replayed.empty()) {
      for (std::int32_t r = 0; r < d->compared.ranks; ++r) rep.ranks_replayed.push_back(r);
    }
    if (!d->diverged() && attempt > 0) {
      // This attempt's replays agree; an earlier attempt's may have come out
      // the other way (a per-process choice): compare with the first replay.
      d = s.diff_replays(first_replay, out_a);
      if (!d) return Error{"reading the layer-level replays: " + d.error().message};
      if (d->diverged()) {
        rep.notes.push_back("layer pass, attempt " + n(attempt + 1) + ": its replays agree with each other but "
                            "differ from attempt 1's; localizing between them");
      }
    }
    if (!d->diverged()) {
      rep.notes.push_back("layer pass, attempt " + n(attempt + 1) + ": the two replays of step " +
                          n(rep.step) + " agree");
      if (!runs_differ || s.repeat_a) continue;
      agreed_while_runs_differ = true;
      // Replays that reproduce one run's records whole, while the runs differ,
      // are the signature of a choice made once per process: more replays may
      // make the other run's choice. Replays that reproduce neither run point
      // elsewhere, and more of them would not help.
      if (outcomes.like_a + outcomes.like_b > 0 && budget < kPerProcessAttempts) {
        budget = kPerProcessAttempts;
        s.note("layer", "the replays agree and reproduce one run's records of step " + n(rep.step) +
                            ", but the runs differ: a choice made once per process? up to " + n(budget) +
                            " attempts until the other run's outcome comes up");
      }
      continue;
    }
    if (agreed_while_runs_differ && !s.repeat_a) {
      outcomes.attempts = attempt + 1;
      outcomes.budget = budget;
      rep.outcomes = outcomes;
      const std::string counts = n(outcomes.like_a) + " like run A, " + n(outcomes.like_b) + " like run B, " +
                                 n(outcomes.neither) + " like neither, in " + n(attempt + 1) + " attempts";
      if (outcomes.like_a > 0 && outcomes.like_b > 0) {
        rep.notes.push_back("per-process choice: the replays came out both runs' ways (" + counts +
                            "), each outcome made whole by one process: a choice made once per process (an "
                            "autotuner's pick)");
      } else {
        rep.notes.push_back("the replays differed only in some attempts (" + counts + ")");
      }
    }
    const diff::Mismatch* m = &*d->first;
    for (const auto& ranked : d->ranks) {
      if (ranked.rank == rep.rank) m = &ranked;
    }
    // The followed rank only received the difference (through a collective)
    // while another rank originated it: in these replays the divergence began
    // there (a per-process choice made differently on another rank), so follow it.
    if (m->role != diff::Role::origin && d->first->role == diff::Role::origin && d->first->rank != m->rank) {
      rep.notes.push_back("rank " + n(rep.rank) + " only received the replays' difference; following rank " +
                          n(d->first->rank) + ", where it originated");
      m = &*d->first;
      rep.rank = m->rank;
    }
    if (m->rank != rep.rank) {
      rep.notes.push_back("rank " + n(rep.rank) + " did not diverge in the replays; following rank " +
                          n(m->rank) + ", which did");
      rep.rank = m->rank;
    }
    if (rep.rank != checked_rank) {
      // The restore check ran on the rank first followed; the replays differ
      // on this one, so it runs again here before their difference means
      // anything (a state record that differs because the runs diverged
      // before the step is not a restore that missed state).
      auto settled = recheck_restore(s);
      if (!settled) return settled.error();
      checked_rank = rep.rank;
      if (*settled) return std::optional<Suspect>{};
    }
    if (m->io == "state") {
      const StateRecord state{m->scope, m->op, m->name};
      const std::string found = "restore check: the replays of A and B start step " + n(rep.step) +
                                " from different generator states (" + state.text() + ")";
      auto settled = generator_at_start(s, state, found);
      if (!settled) return settled.error();
      if (*settled) {
        s.note("restore", rep.reached);
        return std::optional<Suspect>{};
      }
      rep.verdict = Verdict::restore;
      set_state(rep, StateRecord{m->scope, m->op, m->name});
      rep.reached = "restore check: the replays of A and B start step " + n(rep.step) +
                    " from different state: " + state_record(rep);
      s.note("restore", rep.reached);
      return std::optional<Suspect>{};
    }
    // A generator's state, the first difference or drawn from before it (the
    // role unknown, diff::classify): no layer of the step introduced it.
    if (m->role == diff::Role::unknown && m->generator) {
      const std::string at = m->scope + " " + m->op + " " + m->io + " " + m->name;
      const std::string what = at == m->generator->text()
                                   ? ", a generator's state, every record before it matching"
                                   : ", what a draw computed (its inputs match), and the generator the step drew "
                                     "from differs (" + m->generator->text() + ")";
      auto settled = settle_generator(s, *m->generator,
                                      "layer pass: the replays of step " + n(rep.step) + " first differ at " + at + what);
      if (!settled) return settled.error();
      s.note("layer", rep.reached);
      return std::optional<Suspect>{};
    }
    // A receiver, or an unknown (no input recorded to tell): only an origin
    // is a layer whose inputs match and outputs differ (dtrace(1), layer pass).
    if (m->role != diff::Role::origin) {
      rep.verdict = Verdict::not_localized;
      rep.reached = "layer pass: the first layer-level difference, " + m->scope + " " + m->op + " " + m->io +
                    " " + m->name + (m->role == diff::Role::unknown ? ", is an " : ", is a ") +
                    std::string(diff::role_name(m->role)) + ": no recorded layer introduces it";
      return std::optional<Suspect>{};
    }
    rep.layer = m->scope;
    return std::optional<Suspect>{Suspect{m->scope, m->op, m->name, m->io, m->occurrence}};
  }
  rep.verdict = Verdict::not_reproduced;
  if (agreed_while_runs_differ && !s.repeat_a) {
    outcomes.attempts = attempt;
    outcomes.budget = budget;
    rep.outcomes = outcomes;
    rep.reached = per_process_reading(outcomes, rep.step);
    return std::optional<Suspect>{};
  }
  if (s.a.recorded && s.b.recorded && !runs_differ) {
    // Asked for a step (--step and --rank, so diff did not read the runs)
    // where the runs themselves agree: there was nothing there to reproduce.
    rep.reached = "layer pass: " + replays_of(attempt) + " of step " + n(rep.step) + " on each side agree at " +
                  "layer level, and so do the runs' own records of step " + n(rep.step) + " on rank " +
                  n(rep.rank) + ": nothing to bisect there (dtrace diff says where the runs differ, if anywhere)";
    return std::optional<Suspect>{};
  }
  rep.reached = "layer pass: " + replays_of(attempt) + " of step " + n(rep.step) + " on each side agree at layer " +
                "level; the divergence did not reproduce";
  return std::optional<Suspect>{};
}

}  // namespace dtrace::bisect
