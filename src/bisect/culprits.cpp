// The culprit search (man/dtrace.1, "Every culprit"): once an op is named at
// step N, every later difference in the step may be downstream of it, so
// nothing else can be seen. Pin it (dtrace-replay/1.3: its outputs replaced,
// on both sides, by one fixed result of it, run A's captured output of each
// of its calls) and replay the step again: the layer pass, the kernel pass
// and the confirm, each with every op named so far pinned, until the
// replays agree or a limit is reached.
#include <algorithm>

#include "bisect/session.hpp"
#include "diff/diff.hpp"
#include "util/words.hpp"

namespace dtrace::bisect {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

// The op the report's fields name now, as a culprit.
Culprit culprit_of(const Report& rep, int first_replay, std::vector<std::string> pinned) {
  Culprit c;
  c.op = rep.op;
  c.scope = rep.scope;
  c.role = rep.role;
  c.rank = rep.rank;
  c.occurrence = rep.occurrence;
  c.calls = rep.calls;
  c.basis = rep.basis;
  c.layer = rep.layer;
  c.region = rep.region;
  c.evidence = rep.evidence;
  c.reached = rep.reached;
  c.first_replay = first_replay;
  c.end_replay = static_cast<int>(rep.replays.size());
  c.pinned = std::move(pinned);
  return c;
}

// The report's fields back to the first culprit's: they name it (scripts that
// predate the list read them), whatever a later round found.
void name_first(Report& rep) {
  const Culprit& c = rep.culprits.front();
  rep.verdict = Verdict::named;
  rep.op = c.op;
  rep.scope = c.scope;
  rep.role = c.role;
  rep.rank = c.rank;
  rep.occurrence = c.occurrence;
  rep.calls = c.calls;
  rep.basis = c.basis;
  rep.layer = c.layer;
  rep.region = c.region;
  rep.evidence = c.evidence;
  rep.reached = c.reached;
}

std::string op_list(const std::vector<Culprit>& culprits) {
  std::string out;
  for (const Culprit& c : culprits) out += (out.empty() ? "" : ", ") + c.scope + " " + c.op;
  return out;
}

// The round's layer pass: step N replayed at layer level on both sides with
// the pins, up to `attempts` times, until two replays differ. The first
// layer whose inputs match and outputs differ; nullopt when every attempt's
// replays agreed (`why` empty) or they differ where no layer can be named
// (`why` says where).
Result<std::optional<Suspect>> pinned_layer_pass(Session& s, int attempts, std::string& why) {
  Report& rep = s.report;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const std::string out_a = s.round_path("layer-A-" + n(attempt));
    const std::string out_b = s.round_path("layer-B-" + n(attempt));
    for (auto [side, out] : {std::pair{&std::as_const(s.a), out_a}, std::pair{&s.second(), out_b}}) {
      if (auto r = s.replay("layer", *side, {{"DTRACE_REPLAY_STEP", n(rep.step)},
                                             {"DTRACE_LEVEL", "layer"},
                                             {"DTRACE_PIN", *s.step_pins},
                                             {"DTRACE_OUT_DIR", out}});
          !r) {
        return r.error();
      }
    }
    auto d = s.diff_replays(out_a, out_b);
    if (!d) return Error{"reading the layer-level replays: " + d.error().message};
    if (!d->diverged()) continue;
    const diff::Mismatch* m = &*d->first;
    for (const auto& ranked : d->ranks) {
      if (ranked.rank == rep.rank) m = &ranked;
    }
    if (m->role != diff::Role::origin && d->first->role == diff::Role::origin) m = &*d->first;
    const std::string at = m->scope + " " + m->op + " " + m->io + " " + m->name + " (rank " + n(m->rank) + ")";
    if (m->role != diff::Role::origin || m->io == "state") {
      why = "with " + op_list(rep.culprits) + " pinned, the replays of step " + n(rep.step) + " first differ at " +
            at + ", which is " + (m->role == diff::Role::unknown ? "an " : "a ") +
            std::string(diff::role_name(m->role)) + ": no recorded layer introduces it";
      return std::optional<Suspect>{};
    }
    rep.rank = m->rank;
    return std::optional<Suspect>{Suspect{m->scope, m->op, m->name, m->io, m->occurrence}};
  }
  return std::optional<Suspect>{};
}

}  // namespace

Result<void> search_culprits(Session& s) {
  Report& rep = s.report;
  rep.culprits.push_back(culprit_of(rep, 0, {}));
  const std::string step = n(rep.step);
  if (s.options.first) {
    rep.search_stop = "first";
    rep.search_end = "--first: the search stopped at the first culprit";
    return {};
  }
  for (const Side* side : {&s.a, &s.b}) {
    if (side->honours_pins) continue;
    rep.search_stop = "no-pins";
    rep.search_end = "run " + std::string(1, side->name) + "'s workload speaks " +
                     (side->protocol.empty() ? std::string("dtrace-replay/1") : side->protocol) +
                     ", which cannot pin an op (dtrace-replay/1.3): the search stopped at the first culprit; "
                     "other causes at step " + step + " may be hidden downstream of it";
    return {};
  }
  const int max_culprits = std::max(1, s.options.max_culprits);
  const int attempts = std::max(1, s.options.repeat);
  while (true) {
    if (static_cast<int>(rep.culprits.size()) >= max_culprits) {
      rep.search_stop = "max-culprits";
      rep.search_end = "the search stopped at --max-culprits " + n(max_culprits) +
                       ": with these ops pinned the replays of step " + step + " were not replayed again";
      break;
    }
    // This round's pins: every culprit so far, its outputs from the capture
    // of the round that named it.
    const Culprit& last = rep.culprits.back();
    s.pins.push_back(Pin{last.scope, last.op, s.round_path("capture-A")});
    ++s.round;
    const std::string pins_dir = s.round_path("pins");
    if (auto r = write_step_pins(s.pins, rep.step, pins_dir); !r) return r.error();
    s.step_pins = pins_dir;
    const std::string pinned = op_list(rep.culprits);
    s.note("pin", "pinned " + pinned + "; replaying step " + step + " again for what else differs");
    const int first_replay = static_cast<int>(rep.replays.size());
    const std::size_t notes_before = rep.notes.size();
    std::string why;
    auto layer = pinned_layer_pass(s, attempts, why);
    if (!layer) return layer.error();
    if (!*layer) {
      if (why.empty()) {
        rep.search_stop = "agree";
        rep.search_end = "with " + pinned + " pinned, the replays of step " + step + " agree over " +
                         n(attempts) + (attempts == 1 ? " attempt" : " attempts") +
                         (rep.culprits.size() == 1 ? ": nothing else differs with it pinned"
                                                   : ": nothing else differs with them pinned");
      } else {
        rep.search_stop = "not-localized";
        rep.search_end = why;
      }
      break;
    }
    s.note("layer", "with " + pinned + " pinned, suspect layer: " + (*layer)->scope);
    rep.layer = (*layer)->scope;
    auto named = name_kernel(s, **layer);
    if (!named) return named.error();
    std::vector<std::string> round_notes(rep.notes.begin() + static_cast<std::ptrdiff_t>(notes_before),
                                         rep.notes.end());
    rep.notes.resize(notes_before);
    if (!*named) {
      rep.search_stop = "not-localized";
      rep.search_end = "with " + pinned + " pinned, " + rep.reached;
      break;
    }
    const bool again = std::any_of(rep.culprits.begin(), rep.culprits.end(), [&](const Culprit& c) {
      return c.scope == rep.scope && c.op == rep.op;
    });
    if (again) {
      // A pinned op named again did not take its pin the way the replays
      // read it (compliance checked that it was taken): stop rather than loop.
      rep.search_stop = "not-localized";
      rep.search_end = "with " + pinned + " pinned, the replays named " + rep.scope + " " + rep.op +
                       " again: its pinned outputs did not make its calls agree";
      break;
    }
    std::vector<std::string> pins_named;
    for (const Culprit& c : rep.culprits) pins_named.push_back(c.scope + " " + c.op);
    Culprit found = culprit_of(rep, first_replay, pins_named);
    found.notes = std::move(round_notes);
    rep.culprits.push_back(std::move(found));
    // The next round starts from the first culprit's fields (its rank followed), as this one did.
    name_first(rep);
  }
  name_first(rep);
  return {};
}

}  // namespace dtrace::bisect
