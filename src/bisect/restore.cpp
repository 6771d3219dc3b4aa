// Stage 1, the restore check: a replay must start step N from exactly the
// state the run recorded there, or everything after it is noise.
#include <algorithm>
#include <map>
#include <optional>

#include "bisect/session.hpp"
#include "diff/diff.hpp"
#include "util/words.hpp"

namespace dtrace::bisect {

namespace {

// A picked record's identity: scope, op and name, and which of those it is.
std::string picked_key(const log::Record& r, int occurrence) {
  return std::string(r.scope) + '\n' + std::string(r.op) + '\n' + std::string(r.name) + '\n' +
         std::to_string(occurrence);
}

// A word as a POSIX shell reads it back: quoted only when it needs to be.
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                          "_-+=./:,@%") == std::string::npos;
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// The bisect a user runs at `step`: the same runs, the same way of replaying.
std::string bisect_command(const Options& options, std::int64_t step) {
  std::string command = "dtrace bisect";
  if (options.replay) {
    std::string argv;
    for (const auto& word : *options.replay) argv += (argv.empty() ? "" : " ") + shell_word(word);
    command += " --replay " + shell_word(argv);
  } else {
    command += " --trust";
  }
  return command + " --step " + std::to_string(step) + " " + shell_word(options.run_a) + " " +
         shell_word(options.run_b);
}

std::string record_key(const log::Record& r, int occurrence) {
  const std::string io = r.io == log::Io::other ? std::string(r.io_text) : std::to_string(static_cast<int>(r.io));
  return std::string(r.scope) + '\n' + std::string(r.op) + '\n' + io + '\n' + std::string(r.name) + '\n' +
         std::to_string(occurrence);
}

}  // namespace

Result<bool> runs_diverged_earlier(Session& s, bool may_repeat_a) {
  Report& rep = s.report;
  if (!s.a.recorded || !s.b.recorded) return false;  // one run lacks the step: nothing to compare
  auto state = first_state_difference(s.a.recorded->step, s.b.recorded->step);
  if (!state) state = first_state_difference(s.b.recorded->step, s.a.recorded->step);
  if (!state) return false;
  const std::string step = std::to_string(rep.step);
  auto d = diff::diff_runs(s.options.run_a, s.options.run_b);
  if (!d) return d.error();
  if (!d->first || d->first->step >= rep.step) {
    // Nothing both runs recorded before the step differs: one of them began
    // the step from state it did not have (a run resumed from a checkpoint
    // that did not save or load everything). That is a restore, in the runs,
    // unless both began there with a generator seeded otherwise.
    auto settled = generator_at_start(s, *state, "restore check: runs A and B recorded different generator states "
                                                 "at the start of step " + step + " (" + state->text() + ")");
    if (!settled) return settled.error();
    if (*settled) {
      s.note("restore", rep.reached);
      return true;
    }
    rep.verdict = Verdict::restore;
    set_state(rep, *state);
    rep.reached = "restore check: runs A and B recorded different state at the start of step " + step + " (" +
                  state_record(rep) +
                  "), and no step they both recorded before it differs: one run did not restore that state";
    return true;
  }
  const diff::Mismatch& m = *d->first;
  EarlierDivergence earlier;
  earlier.step = m.step;
  earlier.rank = m.rank;
  earlier.record = with_call(m.scope + " " + m.op + " " + m.io + " " + m.name, m.occurrence, m.calls);
  earlier.command = bisect_command(s.options, m.step);
  rep.earlier = earlier;
  const std::string line = "the runs diverged before step " + step + ": each replay starts from its own run's state, "
                           "but the runs' records first differ at step " + std::to_string(m.step) + " (rank " +
                           std::to_string(m.rank) + ", " + earlier.record + "); bisect there: " + earlier.command;
  s.note("restore", line);
  if (!rep.shared_configuration) {
    rep.verdict = Verdict::diverged_earlier;
    rep.reached = "restore check: each replay matches its own run, but the runs' states at step " + step +
                  " differ (" + state->text() + ") and A and B differ in configuration: "
                  "no replay of step " + step + " compares like with like; bisect step " +
                  std::to_string(m.step) + " instead";
    return true;
  }
  if (!may_repeat_a) {
    rep.verdict = Verdict::diverged_earlier;
    rep.reached = "restore check on rank " + std::to_string(rep.rank) + ", where the replays differ: each replay "
                  "matches its own run, but the runs' states at step " + step + " differ (" + state->text() +
                  ") and their records first differ at step " + std::to_string(m.step) + "; bisect step " +
                  std::to_string(m.step) + " instead";
    return true;
  }
  rep.notes.push_back(line);
  rep.notes.push_back("A and B share one configuration: step " + step +
                      " is localized from A's state by repetition (replays of A compared with each other)");
  s.note("restore", "one configuration: localizing step " + step + " by repeating A's replay");
  s.repeat_a = true;
  return false;
}

namespace {

// The records of `recorded` that `replay` also holds, by identity, timings
// aside: the first one the replay holds otherwise, and whether any but state
// was compared.
std::pair<const log::Record*, bool> compare_held(const log::Step& replay, const log::Step& recorded) {
  std::map<std::string, const log::Record*> have;
  std::map<std::string, int> seen;
  for (const log::Record& r : replay.records) {
    const std::string base = record_key(r, 0);
    have[record_key(r, seen[base]++)] = &r;
  }
  seen.clear();
  bool compared = false;
  for (const log::Record& r : recorded.records) {
    const std::string base = record_key(r, 0);
    auto it = have.find(record_key(r, seen[base]++));
    // Timings differ in every process; the replay's finer records have no
    // counterpart in the run and are not looked at.
    if (it == have.end() || r.io == log::Io::timing) continue;
    const log::Record& x = *it->second;
    if (x.digest != r.digest || x.dtype != r.dtype ||
        !std::equal(r.shape.begin(), r.shape.end(), x.shape.begin(), x.shape.end())) {
      return {&r, true};
    }
    if (r.io != log::Io::state) compared = true;
  }
  return {nullptr, compared};
}

}  // namespace

std::optional<bool> reproduces(const log::Step& replay, const log::Step& recorded) {
  const auto [differs, compared] = compare_held(replay, recorded);
  if (differs != nullptr) return false;
  if (!compared) return std::nullopt;
  return true;
}

const log::Record* first_unreproduced(const log::Step& replay, const log::Step& recorded) {
  return compare_held(replay, recorded).first;
}

Result<bool> fast_forward_departed(Session& s, const Side& side, const std::string& replay_out) {
  Report& rep = s.report;
  auto replayed = load_steps(replay_out, rep.rank);
  if (!replayed) return replayed.error();
  std::map<std::int64_t, const log::Step*> forwarded;  // the replay's steps before N, by number
  for (const log::Step& step : replayed->steps) {
    if (step.step < rep.step) forwarded.emplace(step.step, &step);
  }
  if (forwarded.empty()) return false;
  // The run read once, until each forwarded step has been met (a rank's steps
  // may sit in any order, dtrace-fp(5)): a load_step per step would read it
  // from its start each time, K times for a checkpoint every K steps.
  auto reader = log::RunReader::open(side.run);
  if (!reader) return reader.error();
  std::optional<EarlierDivergence> first;  // the earliest step that departed
  std::size_t met = 0;
  while (met < forwarded.size()) {
    auto next = (*reader)->next();
    if (!next) return next.error();
    if (!*next) break;  // steps the run does not hold (it resumed later): nothing to check them against
    const log::Step& recorded = **next;
    if (recorded.rank != rep.rank || recorded.status != log::StepStatus::complete) continue;
    const auto it = forwarded.find(recorded.step);
    if (it == forwarded.end()) continue;
    ++met;
    if (first && first->step < recorded.step) continue;
    const log::Record* r = first_unreproduced(*it->second, recorded);
    if (r == nullptr) continue;
    first = EarlierDivergence{};
    first->step = recorded.step;
    first->rank = rep.rank;
    first->record = log::describe(*r);
  }
  if (!first) return false;
  first->command = bisect_command(s.options, first->step);
  rep.verdict = Verdict::fast_forward;
  rep.departed = first;
  rep.departed_side = side.name;
  const std::string n = std::to_string(rep.step), k = std::to_string(first->step);
  rep.reached = "restore check: replaying run " + std::string(1, side.name) + " at step " + n + " restored step " +
                std::to_string(forwarded.begin()->first) + " and fast-forwarded, and step " + k +
                " came out otherwise than the run recorded it (" + first->record +
                "): a step between the checkpoint and step " + n + " is not deterministic, so step " + n +
                "'s state cannot be reproduced from the checkpoint; bisect step " + k + ": " + first->command;
  return true;
}

namespace {

bool is_state(const log::Record& r) { return r.io == log::Io::state; }

}  // namespace

Result<void> check_held_state(const Session& s, const Side& side, const std::string& who, const std::string& out,
                              const std::string& first_out, const std::string& first_what) {
  const Report& rep = s.report;
  auto replayed = load_step(out, rep.rank, rep.step);
  if (!replayed) return Error{who + " wrote a log dtrace cannot read: " + replayed.error().message};
  if (!*replayed) return {};  // compliance names a missing step; nothing to hold to
  auto first = load_step(first_out, rep.rank, rep.step);
  if (!first) return first.error();
  const std::string x(1, side.name), n = std::to_string(rep.step);
  // The run's record is the reference where the run holds the step; the
  // first replay's otherwise (a resumed run starts later), and besides: it
  // may hold state records a coarser run did not write.
  struct Reference {
    const log::Step* step;
    std::string name;
  };
  std::vector<Reference> references;
  if (side.recorded) references.push_back({&side.recorded->step, "run " + x + " recorded"});
  if (*first) references.push_back({&(*first)->step, first_what + " restored"});
  for (const Reference& ref : references) {
    const auto d = first_picked_difference((*replayed)->step, *ref.step, is_state);
    if (!d) continue;
    const log::Record& want = *d->record;
    const log::Record* got = d->replayed;
    const std::string record = std::string(want.scope) + " " + std::string(want.op) + " " + std::string(want.name);
    const std::string value = got == nullptr ? "missing in this replay"
                                             : got->digest.hex() + " in this replay, " + want.digest.hex() + " as " +
                                                   ref.name + " it";
    return Error{who + ": it did not start step " + n + " from the state the run started it from: " + record +
                 " (rank " + std::to_string(rep.rank) + ") is " + value + ". The workload restores step " + n +
                 " otherwise here than at " + first_what +
                 (side.recorded ? ", which the restore check held to the run" : "") + "; a replay is "
                 "evidence only when it starts where the run started, so bisect stops rather than name a kernel "
                 "from it (man/dtrace.1, restore check)"};
  }
  return {};
}

Result<bool> generator_at_start(Session& s, const StateRecord& state, const std::string& found) {
  if (!is_generator_state(state)) return false;
  auto first = runs_begin_at_step(s);
  if (!first) return first.error();
  // At a later step a generator's state that differs is what a restore did
  // not save or load: the restore verdict's own case.
  if (!*first) return false;
  auto settled = settle_generator(s, diff::GeneratorRecord{state.scope, state.op, "state", state.name}, found);
  if (!settled) return settled.error();
  return true;
}

void set_state(Report& report, const StateRecord& state) {
  report.state_scope = state.scope;
  report.state_op = state.op;
  report.state = state.name;
}

std::optional<PickedDifference> first_picked_difference(const log::Step& replayed, const log::Step& recorded,
                                                        const std::function<bool(const log::Record&)>& pick) {
  std::map<std::string, const log::Record*> have;
  std::map<std::string, int> seen;
  for (const log::Record& r : replayed.records) {
    if (pick(r)) have[picked_key(r, seen[picked_key(r, 0)]++)] = &r;
  }
  // In the recorded step's own order: the first such record the replay got wrong.
  seen.clear();
  for (const log::Record& r : recorded.records) {
    if (!pick(r)) continue;
    const int occurrence = seen[picked_key(r, 0)]++;
    auto it = have.find(picked_key(r, occurrence));
    if (it == have.end() || it->second->digest != r.digest || it->second->dtype != r.dtype ||
        !std::equal(r.shape.begin(), r.shape.end(), it->second->shape.begin(), it->second->shape.end())) {
      return PickedDifference{&r, occurrence, it == have.end() ? nullptr : it->second};
    }
  }
  return std::nullopt;
}

std::optional<StateRecord> first_state_difference(const log::Step& replayed, const log::Step& recorded) {
  const auto d =
      first_picked_difference(replayed, recorded, [](const log::Record& r) { return r.io == log::Io::state; });
  if (!d) return std::nullopt;
  return StateRecord{std::string(d->record->scope), std::string(d->record->op), std::string(d->record->name)};
}

}  // namespace dtrace::bisect
