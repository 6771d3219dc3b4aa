// Compliance: before a stage draws a conclusion from a replay, the replay must
// have given what the stage asked for (man/dtrace.1, bisect).
//
// A workload that misreads or ignores a variable still writes a valid log: one
// that checks DTRACE_REPLAY_STEP before DTRACE_ISOLATE records a whole step
// instead of K repetitions of a layer; one that cannot tell the calls of an op
// apart re-runs the first instead of the second. A stage reading such a log
// would conclude from the wrong evidence and call it proof. So every replay is
// checked against its request -- the steps or repetitions asked for, complete;
// records inside the isolated layer or op only; the restored state recorded at
// a replayed step; a capture holding the inputs the next stage reads; the
// repetitions run from the captured inputs of the requested call -- and one
// that did not comply is an Error saying what the workload did instead.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "bisect/session.hpp"
#include "util/intervals.hpp"
#include "util/words.hpp"

namespace dtrace::bisect {

namespace {

namespace fs = std::filesystem;

std::string n(std::int64_t v) { return std::to_string(v); }

// What the variables asked of the replay.
struct Asked {
  std::optional<std::int64_t> step;  // DTRACE_REPLAY_STEP
  std::string level;                 // DTRACE_LEVEL ("" when unset)
  std::string scope;                 // DTRACE_SCOPE
  std::string out;                   // DTRACE_OUT
  std::optional<std::string> capture, inputs, isolate;
  std::optional<std::string> pin;    // DTRACE_PIN
  std::string isolate_scope, isolate_op;
  int occurrence = 0;  // DTRACE_OCCURRENCE
  int repeat = 1;      // DTRACE_REPEAT
};

Asked asked_from(const Variables& variables) {
  Asked a;
  for (const auto& [key, value] : variables) {
    if (key == "DTRACE_REPLAY_STEP") a.step = std::stoll(value);
    if (key == "DTRACE_LEVEL") a.level = value;
    if (key == "DTRACE_SCOPE") a.scope = value;
    if (key == "DTRACE_OUT_DIR") a.out = value;
    if (key == "DTRACE_CAPTURE") a.capture = value;
    if (key == "DTRACE_INPUTS") a.inputs = value;
    if (key == "DTRACE_ISOLATE") a.isolate = value;
    if (key == "DTRACE_PIN") a.pin = value;
    if (key == "DTRACE_OCCURRENCE") a.occurrence = std::stoi(value);
    if (key == "DTRACE_REPEAT") a.repeat = std::stoi(value);
  }
  if (a.isolate) {
    const std::size_t at = a.isolate->find("::");
    a.isolate_scope = a.isolate->substr(0, at);
    if (at != std::string::npos) a.isolate_op = a.isolate->substr(at + 2);
  }
  return a;
}

// What a replay's log holds: every rank's steps, and the bisected rank's
// complete steps themselves.
struct Seen {
  std::unique_ptr<log::RunReader> reader;  // the records' strings live here
  std::int32_t rank = 0;                   // the bisected rank
  std::string level;
  std::map<std::int32_t, std::map<std::int64_t, log::StepStatus>> steps;
  std::map<std::int64_t, log::Step> rank_steps;  // complete steps of the bisected rank
  std::vector<std::string> scopes;               // the rank's compared scopes, first seen first
  std::size_t rank_records = 0;                  // the rank's compared records
};

Result<Seen> read_replay_log(const std::string& path, std::int32_t rank) {
  auto reader = log::RunReader::open(path);
  if (!reader) return reader.error();
  Seen seen;
  seen.rank = rank;
  seen.level = (*reader)->header().level;
  std::set<std::string> scopes;
  while (true) {
    auto next = (*reader)->next();
    if (!next) return next.error();
    if (!*next) break;
    log::Step& step = **next;
    seen.steps[step.rank][step.step] = step.status;
    if (step.rank != rank) continue;
    for (const log::Record& r : step.records) {
      if (!log::is_compared(r.io)) continue;
      ++seen.rank_records;
      if (scopes.insert(std::string(r.scope)).second) seen.scopes.emplace_back(r.scope);
    }
    if (step.status == log::StepStatus::complete) seen.rank_steps.emplace(step.step, std::move(step));
  }
  seen.reader = std::move(*reader);
  return seen;
}

std::string step_list(const std::map<std::int64_t, log::StepStatus>& steps) {
  IntervalSet set;
  for (const auto& [step, status] : steps) set.insert(step);
  return set.to_string();
}

// "fwd/layer.0/attn, fwd/layer.0/mlp and 3 more"
std::string scope_list(const std::vector<std::string>& scopes) {
  constexpr std::size_t kShown = 3;
  std::string s;
  for (std::size_t i = 0; i < scopes.size() && i < kShown; ++i) s += (i ? ", " : "") + scopes[i];
  if (scopes.size() > kShown) s += " and " + n(static_cast<std::int64_t>(scopes.size() - kShown)) + " more";
  return s;
}

// "1 step (step 5) of 37 records at scopes step, fwd/layer.0/attn and 9 more"
std::string what_was_recorded(const Seen& seen, std::int32_t rank) {
  auto it = seen.steps.find(rank);
  if (it == seen.steps.end() || it->second.empty()) return "nothing for rank " + n(rank);
  std::string s = plural(static_cast<std::int64_t>(it->second.size()), "step", "steps") + " (" +
                  (it->second.size() == 1 ? "step " : "steps ") + step_list(it->second) + ")";
  if (rank != seen.rank) return s;
  s += " of " + plural(static_cast<std::int64_t>(seen.rank_records), "record", "records");
  if (!seen.scopes.empty()) s += (seen.scopes.size() == 1 ? " at scope " : " at scopes ") + scope_list(seen.scopes);
  return s;
}

// "fwd/mixer planted.seqmean.default, call 2": a target as every text names a
// call (call_text), the calls of the op not known here.
std::string call_name(const Target& t) { return with_call(t.scope + " " + t.op, t.occurrence, 0); }

bool inside_isolation(const Asked& asked, const log::Record& r) {
  if (!asked.isolate_op.empty()) return r.scope == asked.isolate_scope && r.op == asked.isolate_op;
  return inside_scope(r.scope, asked.isolate_scope);
}

// The in records of one call (scope, op, occurrence) of a step, by name.
std::map<std::string, const log::Record*> inputs_of_call(const log::Step& step, const std::string& scope,
                                                         const std::string& op, int occurrence) {
  std::map<std::string, const log::Record*> out;
  std::map<std::string, int> seen;
  for (const log::Record& r : step.records) {
    if (r.io != log::Io::in || r.scope != scope || r.op != op) continue;
    if (seen[std::string(r.name)]++ == occurrence) out.emplace(r.name, &r);
  }
  return out;
}

// How many calls of (scope, op) a step holds: the most occurrences of any of
// its input or output names.
int calls_in(const log::Step& step, const std::string& scope, const std::string& op) {
  std::map<std::pair<int, std::string>, int> seen;
  int calls = 0;
  for (const log::Record& r : step.records) {
    if ((r.io != log::Io::in && r.io != log::Io::out) || r.scope != scope || r.op != op) continue;
    calls = std::max(calls, ++seen[{static_cast<int>(r.io), std::string(r.name)}]);
  }
  return calls;
}

// The captured step the isolation reads its inputs from (man/dtrace-fp.5:
// DTRACE_REPLAY_STEP when set, else the capture's first complete step).
Result<LoadedStep> captured_step(const std::string& dir, std::int32_t rank, std::optional<std::int64_t> step) {
  // The index is capture.jsonl, or one capture.rank<r>.jsonl per process
  // (dtrace-replay/1.1): the directory's *.jsonl read together as one log.
  const std::string& index = dir;
  if (step) {
    auto loaded = load_step(index, rank, *step);
    if (!loaded) return loaded.error();
    if (!*loaded) return Error{index + ": no complete step " + n(*step) + " of rank " + n(rank)};
    return std::move(**loaded);
  }
  auto all = load_steps(index, rank);
  if (!all) return all.error();
  if (all->steps.empty()) return Error{index + ": no complete step of rank " + n(rank)};
  return LoadedStep{std::move(all->reader), std::move(all->steps.front())};
}

// DTRACE_ISOLATE + DTRACE_REPEAT: repetitions 0..K-1, each complete, holding
// only the isolated layer or op, each run from the captured inputs of the
// requested call.
Result<void> check_isolation(const std::string& who, const Asked& asked, const Seen& seen, std::int32_t rank,
                             const std::optional<Target>& target) {
  const std::string wanted = plural(asked.repeat, "repetition", "repetitions") +
                             " of " + *asked.isolate;
  const auto& steps = seen.steps.contains(rank) ? seen.steps.at(rank) : std::map<std::int64_t, log::StepStatus>{};
  for (const auto& [number, step] : seen.rank_steps) {
    for (const log::Record& r : step.records) {
      if (log::is_compared(r.io) && !inside_isolation(asked, r)) {
        return Error{who + ": the workload ignored DTRACE_ISOLATE: it recorded " + what_was_recorded(seen, rank) +
                     " instead of " + wanted + " (step " + n(number) + " holds " + std::string(r.scope) + " " +
                     std::string(r.op) + " " + std::string(r.io_text) + " " + std::string(r.name) + ")"};
      }
    }
  }
  bool exact = static_cast<int>(steps.size()) == asked.repeat;
  for (int k = 0; exact && k < asked.repeat; ++k) exact = steps.contains(k);
  if (!exact) {
    return Error{who + ": the workload ignored DTRACE_REPEAT=" + n(asked.repeat) + ": it recorded " +
                 what_was_recorded(seen, rank) + " instead of " + wanted + " (steps 0-" + n(asked.repeat - 1) + ")"};
  }
  for (const auto& [k, status] : steps) {
    if (status != log::StepStatus::complete) {
      return Error{who + ": repetition " + n(k) + " of " + *asked.isolate + " is " +
                   std::string(log::status_name(status)) + " in the log (no end record, or a wrong count)"};
    }
  }
  if (!target || !asked.inputs) return {};
  // The repetitions' own inputs against the captured call's.
  auto captured = captured_step(*asked.inputs, rank, asked.step);
  if (!captured) return Error{who + ": reading the captured inputs (DTRACE_INPUTS): " + captured.error().message};
  const auto wanted_inputs = inputs_of_call(captured->step, target->scope, target->op, target->occurrence);
  if (wanted_inputs.empty()) {
    return Error{who + ": the capture " + *asked.inputs + " holds no input of " + call_name(*target) +
                 " for rank " + n(rank) + " to isolate it from"};
  }
  const int calls = calls_in(captured->step, target->scope, target->op);
  for (const auto& [k, step] : seen.rank_steps) {
    const auto ran = inputs_of_call(step, target->scope, target->op, 0);
    if (ran.empty()) {
      return Error{who + ": repetition " + n(k) + " records no input of " + target->scope + " " + target->op +
                   ": nothing shows it ran from the captured inputs (DTRACE_INPUTS)"};
    }
    for (const auto& [name, want] : wanted_inputs) {
      auto it = ran.find(name);
      if (it != ran.end() && it->second->digest == want->digest) continue;
      if (it == ran.end()) {
        return Error{who + ": repetition " + n(k) + " of " + target->scope + " " + target->op +
                     " records no input '" + name + "', which the capture holds"};
      }
      // Which captured call did it run, if any?
      for (int other = 0; other < calls; ++other) {
        if (other == target->occurrence) continue;
        const auto other_inputs = inputs_of_call(captured->step, target->scope, target->op, other);
        auto o = other_inputs.find(name);
        if (o != other_inputs.end() && o->second->digest == it->second->digest) {
          return Error{who + ": the workload ignored DTRACE_OCCURRENCE=" + n(target->occurrence) +
                       ": its repetitions ran " + with_call(target->scope + " " + target->op, other, calls) +
                       " (input '" + name + "' " + it->second->digest.hex() + ") instead of " +
                       call_text(target->occurrence, calls)};
        }
      }
      return Error{who + ": repetition " + n(k) + " ran " + call_name(*target) + " with input '" + name + "' " +
                   it->second->digest.hex() + ", but the capture holds " + want->digest.hex() +
                   ": it did not run from the captured inputs (DTRACE_INPUTS)"};
    }
  }
  return {};
}

// DTRACE_CAPTURE: the capture must hold the inputs the next stage isolates
// the target from, each with its bytes, and nothing outside DTRACE_SCOPE.
Result<void> check_capture(const std::string& who, const Asked& asked, std::int32_t rank, const Target& target) {
  const std::string& dir = *asked.capture;
  auto captured = captured_step(dir, rank, asked.step);
  if (!captured) {
    return Error{who + ": the workload left no usable capture in DTRACE_CAPTURE=" + dir + ": " +
                 captured.error().message};
  }
  for (const log::Record& r : captured->step.records) {
    if (!r.scope.starts_with(asked.scope)) {
      return Error{who + ": the workload ignored DTRACE_SCOPE=" + asked.scope + ": it captured " +
                   std::string(r.scope) + " " + std::string(r.op) + " " + std::string(r.io_text) + " " +
                   std::string(r.name)};
    }
  }
  const auto inputs = inputs_of_call(captured->step, target.scope, target.op, target.occurrence);
  if (inputs.empty()) {
    return Error{who + ": the workload captured no input of " + call_name(target) + " in " + dir +
                 " (DTRACE_CAPTURE), and the next stage re-runs it from them"};
  }
  for (const auto& [name, r] : inputs) {
    const std::string file = dir + "/" + log::capture_file_name(rank, captured->step.step, r->seq);
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      return Error{who + ": the capture lists input '" + name + "' of " + call_name(target) + " but " + file +
                   " is not a regular file"};
    }
  }
  return {};
}

// DTRACE_REPLAY_STEP=N alone: step N, complete, with the restored state; and
// before it only the steps fast-forwarded to reach it (DTRACE_FAST_FORWARD,
// which a workload may leave unrecorded), never a step after it.
Result<void> check_replayed_step(const std::string& who, const Asked& asked, const Seen& seen, const Side& side,
                                 std::int32_t rank) {
  const std::int64_t step = *asked.step;
  for (const auto& [r, steps] : seen.steps) {
    if (!steps.contains(step) || steps.rbegin()->first != step) {
      return Error{who + ": the workload ignored DTRACE_REPLAY_STEP=" + n(step) + ": it recorded " +
                   what_was_recorded(seen, r) + " for rank " + n(r) + " instead of step " + n(step) +
                   " (and the steps it fast-forwarded to reach it) only"};
    }
  }
  auto it = seen.rank_steps.find(step);
  if (it == seen.rank_steps.end()) {
    return Error{who + ": the workload recorded no complete step " + n(step) + " for rank " + n(rank) +
                 " (it recorded " + what_was_recorded(seen, rank) + ")"};
  }
  if (!side.recorded) return {};
  auto is_state = [](const log::Record& r) { return r.io == log::Io::state; };
  const auto recorded_states = std::count_if(side.recorded->step.records.begin(),
                                             side.recorded->step.records.end(), is_state);
  if (recorded_states > 0 && std::none_of(it->second.records.begin(), it->second.records.end(), is_state)) {
    return Error{who + ": the workload recorded no restored state at step " + n(step) + " (no io \"state\" record; run " +
                 std::string(1, side.name) + " recorded " + n(recorded_states) +
                 " there): DTRACE_REPLAY_STEP asks for the state it restored, which the restore check compares"};
  }
  return {};
}

}  // namespace

Result<void> check_compliance(const std::string& who, const Side& side, std::int32_t rank,
                              const Variables& variables, const std::optional<Target>& target) {
  const Asked asked = asked_from(variables);
  if (asked.out.empty()) return {};
  auto seen = read_replay_log(asked.out, rank);
  if (!seen) return Error{who + " wrote a log dtrace cannot read: " + seen.error().message};
  if (!asked.level.empty() && seen->level != asked.level) {
    return Error{who + ": the workload ignored DTRACE_LEVEL=" + asked.level + ": its log says level \"" +
                 seen->level + "\""};
  }
  // A pin not taken is refused like any request ignored (man/dtrace-fp.5,
  // "Pinned ops"): what follows would be downstream of the op still varying.
  if (asked.pin) {
    for (const auto& [seen_rank, steps] : seen->steps) {
      if (auto r = check_pins_taken(who, asked.out, *asked.pin, seen_rank, asked.isolate.has_value()); !r) return r;
    }
  }
  if (asked.isolate) return check_isolation(who, asked, *seen, rank, target);
  if (asked.step) {
    if (auto r = check_replayed_step(who, asked, *seen, side, rank); !r) return r;
  }
  if (asked.capture && target) return check_capture(who, asked, rank, *target);
  return {};
}

bool inside_scope(std::string_view scope, std::string_view layer) {
  return scope.starts_with(layer) && (scope.size() == layer.size() || scope[layer.size()] == '/');
}

int calls_of(const log::Step& step, const std::string& scope, const std::string& op) {
  return calls_in(step, scope, op);
}

Result<CapturedCall> captured_call(const std::string& dir, std::int32_t rank, std::optional<std::int64_t> step,
                                   const Target& target) {
  auto captured = captured_step(dir, rank, step);
  if (!captured) return captured.error();
  CapturedCall call{std::move(*captured), {}};
  call.inputs = inputs_of_call(call.step.step, target.scope, target.op, target.occurrence);
  return call;
}

}  // namespace dtrace::bisect
