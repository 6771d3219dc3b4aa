// What the stages of a bisect share: the two sides' replay commands, the
// working directory for replay outputs and captures, and the log of replays.
#pragma once

#include <chrono>
#include <map>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/bisect.hpp"
#include "diff/diff.hpp"
#include "log/reader.hpp"
#include "replay/runner.hpp"

namespace dtrace::bisect {

using Variables = std::vector<std::pair<std::string, std::string>>;

// A rank's step read from a log, with the reader its strings live in.
struct LoadedStep {
  std::unique_ptr<log::RunReader> reader;
  log::Step step;
};

// One run's configuration, as its header declares it (dtrace-fp(5), REPLAY PROTOCOL).
struct Side {
  char name = 'A';
  std::string run;
  std::vector<std::string> argv;
  std::string cwd;
  Variables env;  // the header's env: a configuration includes its environment
  // Its header's replay protocol is dtrace-replay/1.2 or a later 1.x: its
  // workload serves replay sessions (man/dtrace-fp.5).
  bool serves_sessions = false;
  // dtrace-replay/1.3 or a later 1.x: it honours pins (DTRACE_PIN).
  bool honours_pins = false;
  std::string protocol;  // as its header says it
  int world_size = 1;    // the ranks that answer each of a session's requests
  // The bisected step as this run recorded it (the restore check's reference);
  // nullopt when the run has no complete such step (a resumed run starts later).
  std::optional<LoadedStep> recorded;
};

// The call a stage needs a replay to have run or captured: a layer's own
// records (op = the layer's op) or one op's, and which call of it in the step
// (a record's occurrence: 0 the first, man/dtrace-fp.5).
struct Target {
  std::string scope, op;
  int occurrence = 0;
};

class Session {
 public:
  Session(const Options& options, const Progress& progress, const StageNote& note, Report& report);
  ~Session();  // removes the working directory unless --keep named it

  Result<void> open_workdir();
  std::string path(const std::string& name) const { return workdir_ + "/" + name; }
  // A stage's file in the culprit search's current round: round 0's as
  // path() names it, round k's with "r<k>-" before it (culprits.cpp).
  std::string round_path(const std::string& name) const {
    return round == 0 ? path(name) : path("r" + std::to_string(round) + "-" + name);
  }
  // The round of the culprit search (0: the first culprit's), and the pin
  // capture its step replays carry (DTRACE_PIN; none in round 0).
  int round = 0;
  std::optional<std::string> step_pins;
  std::vector<struct Pin> pins;  // the ops pinned in this round (the culprits before it)

  // Runs side's command with `variables` added; trouble (it could not start,
  // crashed, exited nonzero, timed out) is an Error with the tail of its stderr,
  // and so is exiting 0 without a readable log in DTRACE_OUT, or a replay that
  // did not give what the variables asked for (check_compliance, with the
  // call `target` the stage isolates or captures the inputs of).
  Result<void> replay(const std::string& stage, const Side& side, const Variables& variables,
                      const std::optional<Target>& target = std::nullopt);
  // True once a replay did not comply with its request: the bisection stops
  // there (exit 2), even where a failed stage would otherwise be only noted.
  bool noncompliant() const { return noncompliant_; }
  // Whether `side`'s replays are requests to its sessions: its workload serves
  // them and --launches was not given (plan_sides sets report.replay_mode).
  bool uses_sessions(const Side& side) const {
    return side.serves_sessions && !options.launches && !launched_instead_.contains(side.name);
  }
  // Ends both sides' sessions: the next replay of each starts a fresh one
  // (another process, where a choice made once per process must be tried
  // again), for the reason `why`. Nothing to do without sessions.
  void fresh_sessions(const std::string& why);
  // Two replays' records of the bisected step compared: only that step, as a
  // step replay also holds the steps it fast-forwarded (DTRACE_FAST_FORWARD).
  Result<diff::Report> diff_replays(const std::string& a, const std::string& b) const;
  void note(const std::string& stage, const std::string& message) const {
    if (note_) note_(stage, message);
  }

  const Options& options;
  Report& report;
  Side a, b;
  // Set by the restore check when the runs diverged before the step and share
  // one configuration: the step is localized from A's state by repetition, so
  // the second slot of every stage replays A (files still named by slot, B).
  bool repeat_a = false;
  const Side& second() const { return repeat_a ? a : b; }

 private:
  Result<void> check_replay_log(const std::string& stage, const Side& side,
                                const Variables& variables) const;
  const Progress& progress_;
  const StageNote& note_;
  Result<replay::Outcome> launch(const std::string& stage, const Side& side, const replay::Command& command,
                                 Replay& record);
  Result<replay::Outcome> request(const std::string& stage, const Side& side, const replay::Command& command,
                                  Replay& record);
  Result<void> start_session(const std::string& stage, const Side& side, const replay::Command& like);
  void end_sessions();
  std::string workdir_;
  bool remove_ = false;
  bool noncompliant_ = false;
  // Each side's session, while it serves, and its entry in report.launches.
  struct Served {
    std::unique_ptr<replay::SessionLaunch> launch;
    std::size_t index = 0;
    std::chrono::steady_clock::time_point started;
  };
  std::map<char, Served> served_;
  std::string fresh_why_;  // given to the next sessions started
  // Each side's first step replay (its directory; its launch, its request
  // number in that launch's session or -1, and its stage, which name it):
  // the restore check's, to which every later step replay of the side is held.
  struct FirstReplay {
    std::string out;
    int launch = -1, request = -1;
    std::string stage;
  };
  std::map<char, FirstReplay> first_step_replay_;
  // Sides whose replay command exited 0 without answering its session's first
  // request (a --replay program that does not serve sessions): launched instead.
  std::set<char> launched_instead_;
};

// nullopt when the log has no complete step `step` for `rank`.
Result<std::optional<LoadedStep>> load_step(const std::string& path, std::int32_t rank,
                                            std::int64_t step);
// Every complete step of `rank` in a log, in step order (isolation repetitions).
struct LoadedSteps {
  std::unique_ptr<log::RunReader> reader;
  std::vector<log::Step> steps;
};
Result<LoadedSteps> load_steps(const std::string& path, std::int32_t rank);
// Every complete step of a log that `keep` accepts, in the reader's order
// (the steps of one number across ranks: a capture's, a pin capture's).
Result<LoadedSteps> load_steps_where(const std::string& path, const std::function<bool(const log::Step&)>& keep);

// Resolves both sides' commands from the runs' headers (or --replay), refuses
// a command taken from a log without --trust, and reads the bisected step as
// each run recorded it, refusing a step neither run recorded.
Result<void> plan_sides(Session& session);

// The stages, in order. Each returns true when it settled the verdict.
struct Suspect {
  std::string scope, op, name, io;
  int occurrence = 0;
};
Result<std::optional<Suspect>> layer_pass(Session& session);
Result<std::optional<Suspect>> kernel_pass(Session& session, const Suspect& layer);
Result<void> confirm(Session& session, const Suspect& kernel);
// Names the op found (kernel pass and confirm) from `layer` on: the report's
// op, scope, calls and evidence, as the first culprit or a later one.
Result<bool> name_kernel(Session& session, const Suspect& layer);
// The culprit search after the first (culprits.cpp, man/dtrace.1 "Every
// culprit"): pins every op named so far and replays the step again, until the
// replays agree or a limit; fills report.culprits and report.search_end.
Result<void> search_culprits(Session& session);

// Pinned ops (pins.cpp, dtrace-replay/1.3, man/dtrace-fp.5 "Pinned ops").
// An op pinned: its identity and the capture of the round that named it,
// whose out records of the op are its fixed result.
struct Pin {
  std::string scope, op;
  std::string capture;
};
// Writes the pin capture `dir` for step replays of `step`: every out record
// of every pinned op in its capture's step, each rank's, with its bytes.
// Returns how many records it holds.
Result<int> write_step_pins(const std::vector<Pin>& pins, std::int64_t step, const std::string& dir);
// Writes the pin capture `dir` for isolating `layer` (its call target.occurrence)
// from `capture` (a round's kernel-level capture of the layer, pins applied):
// the pinned ops' out records inside that call, counted as the repetitions
// count them. Returns how many records it holds (0: `dir` not written, the
// isolation needs no pins).
Result<int> write_isolation_pins(const std::vector<Pin>& pins, const std::string& capture, std::int64_t step,
                                 const Target& layer, const std::string& dir);
// The pin acknowledgements (rank<r>.pins) in a replay's `out` against
// the pin capture `pins` asked for: every step or repetition of each rank took
// every pin of that rank. An Error, starting with `who`, otherwise.
Result<void> check_pins_taken(const std::string& who, const std::string& out, const std::string& pins,
                              std::int32_t rank, bool repetitions);

// Compliance (compliance.cpp): the replay `variables` asked of `side` for
// `rank` gave what they asked -- under DTRACE_ISOLATE, repetitions 0..K-1,
// complete, holding only the isolated layer or op, each with the captured
// inputs of `target`'s call; under DTRACE_REPLAY_STEP, that step only,
// complete, with restored state where the run recorded state; a capture
// holding `target`'s inputs and nothing outside DTRACE_SCOPE. Otherwise an
// Error, starting with `who`, that says what the workload did instead.
Result<void> check_compliance(const std::string& who, const Side& side, std::int32_t rank,
                              const Variables& variables, const std::optional<Target>& target);
// The variables of an isolation of `isolate` ("scope" or "scope::op") from the
// capture `inputs`, `k` repetitions into `out`. DTRACE_OCCURRENCE names a call
// after the first only, so a workload that predates it sees, wherever an op
// occurs once, the request it always saw (man/dtrace-fp.5).
Variables isolation_variables(const std::string& step, const std::string& scope, const std::string& isolate,
                              int occurrence, const std::string& inputs, int k, const std::string& out);
// A scope inside `layer`, or the layer's own (compliance.cpp): fwd/layer.1/mlp
// is inside fwd/layer.1, fwd/layer.10 is not.
bool inside_scope(std::string_view scope, std::string_view layer);
// A JSON object a workload wrote beside its replay's records (kernels.rank<r>.json,
// regions.rank<r>.json: dtrace-fp(5)), read as the workload's word (confirm.cpp):
// nullopt when the file is absent, or, with a note naming it and ending in
// `unshown`, when it is not a regular file or not a JSON object.
std::optional<nlohmann::json> workload_json(const std::string& path, const std::string& unshown,
                                            std::vector<std::string>& notes);
// The note about such a file that cannot be read as its reader needs ("PATH: WHY; UNSHOWN"),
// one wording for workload_json and the readers of what it returns.
void workload_note(std::vector<std::string>& notes, const std::string& path, const std::string& why,
                   const std::string& unshown);
// The compiled region `scope` lies in, from the workload's declaration in the
// capture `dir` for `rank` (regions.cpp); nullopt when it declared none there
// or `scope` is in none. A declaration that does not parse adds a note and
// names no region: the op stands without it.
std::optional<Region> region_of(const std::string& dir, std::int32_t rank, const std::string& scope,
                                std::vector<std::string>& notes);
// How many calls of (scope, op) a step holds (the report's "call 2 of 2").
int calls_of(const log::Step& step, const std::string& scope, const std::string& op);
// The captured in records of `target`'s call, by name, in the capture `dir`
// for `rank`: the step DTRACE_INPUTS names to isolation (`step`, else the
// capture's first complete step), read by the rule the compliance check applies.
struct CapturedCall {
  LoadedStep step;
  std::map<std::string, const log::Record*> inputs;
};
Result<CapturedCall> captured_call(const std::string& dir, std::int32_t rank, std::optional<std::int64_t> step,
                                   const Target& target);

// The restore check, case (b) (dtrace(1)): each replay matched its own run;
// when the runs' recorded states at the step differ, the runs diverged
// earlier. Sets report.earlier from the logs; returns true when that settles
// the verdict (diverged-earlier; restore when no earlier step differs), and
// with a shared configuration sets session.repeat_a instead, where
// `may_repeat_a` (false once the layer pass has replayed both sides and
// follows another rank: diverged-earlier then, whatever the configuration).
Result<bool> runs_diverged_earlier(Session& session, bool may_repeat_a = true);

// Every step replay of `side` after its first (which the restore check
// judges, with its verdicts) is held by value to the state records the run
// recorded at the step, and to those of that first replay (`first_out`,
// described as `first_what`): an Error, starting with `who`, naming the first
// state record the replay `out` started otherwise from (man/dtrace.1,
// restore check). Presence alone is compliance's check.
Result<void> check_held_state(const Session& session, const Side& side, const std::string& who,
                              const std::string& out, const std::string& first_out, const std::string& first_what);

// Does `replay` reproduce what a run recorded at the step? Compared over the
// records both hold, by identity (the replay may be finer), timings aside;
// nullopt when they share no record but state.
std::optional<bool> reproduces(const log::Step& replay, const log::Step& recorded);
// The record of `recorded` that `replay` holds otherwise (digest, dtype or
// shape), by the same matching; null when none.
const log::Record* first_unreproduced(const log::Step& replay, const log::Step& recorded);

// The restore check, when a replay of `side` started the step from other
// state than its run recorded: did the replay depart from the run in a step
// it fast-forwarded (recorded at step level, DTRACE_FAST_FORWARD)? Sets the
// verdict fast-forward and returns true when it did; false when every
// fast-forwarded step the replay recorded matches the run (or it recorded none).
Result<bool> fast_forward_departed(Session& session, const Side& side, const std::string& replay_out);

// The restore check: the first state record where `replayed` and `recorded`
// disagree (a state record present in `recorded` but missing in `replayed`
// counts), by identity; nullopt when they agree.
std::optional<StateRecord> first_state_difference(const log::Step& replayed, const log::Step& recorded);
// The rule both it and the data check (first_input_difference) compare by: the
// first record of `recorded` that `pick` selects and that `replayed` does not
// hold alike (missing, or another digest, dtype or shape), matched by scope,
// op, name and occurrence among the picked records; with that occurrence.
struct PickedDifference {
  const log::Record* record = nullptr;
  int occurrence = 0;
  const log::Record* replayed = nullptr;  // `replayed`'s record of that identity; null when it lacks one
};
std::optional<PickedDifference> first_picked_difference(const log::Step& replayed, const log::Step& recorded,
                                                        const std::function<bool(const log::Record&)>& pick);
// Sets the report's restore state record (state, state_scope, state_op).
void set_state(Report& report, const StateRecord& state);

// The data check (data.cpp): the first record of what step N consumed (scope
// step, io in: the batch) that differs, by identity, between `a` and `b`, when
// nothing of the step differs before it (diff::compare_step's first mismatch);
// with `only_inputs`, the first such record of `b` that `a` gets wrong, whatever
// differs elsewhere (a replay `a` against its run's record `b`, which may be
// coarser). nullopt when the step's inputs agree.
std::optional<DataDifference> first_input_difference(const log::Step& a, const log::Step& b, bool only_inputs);
// Settles the verdict data (before any replay) when the runs' own records of the step first differ
// in what it consumed; true when it did.
bool runs_consumed_different_data(Session& session);

// The generator verdict (generator.cpp): `generator` is where the step first
// differs, every record before it matching; `found` says where, in words
// ("restore check: replaying run A ..."). Sets the verdict, its record and
// reading, told apart by whether both runs begin at the step.
Result<void> settle_generator(Session& session, const diff::GeneratorRecord& generator, const std::string& found);
// The restore check's state record `state`, when it is a generator's and step
// N is where both runs begin: verdict generator (true); at a later step it
// stays a restore (false).
Result<bool> generator_at_start(Session& session, const StateRecord& state, const std::string& found);
// Is step N the first step both runs hold on the followed rank?
Result<bool> runs_begin_at_step(const Session& session);
// Does a state record hold a generator's state (diff::holds_generator)?
bool is_generator_state(const StateRecord& state);

// Numeric evidence from two captured outputs of the same tensor, their
// difference judged against the larger of the output's magnitude and
// `input_magnitude` (the op's inputs', when known: what a reduction summed).
Evidence compare_outputs(const std::vector<std::byte>& a, const std::vector<std::byte>& b,
                         const std::string& dtype, std::optional<double> input_magnitude = std::nullopt);
// The largest finite |value| of `bytes` elements of `dtype`; nullopt when the
// dtype is not a float read element by element (f64, f32, bf16, f16).
std::optional<double> largest_magnitude(const std::byte* data, std::size_t bytes, const std::string& dtype);

}  // namespace dtrace::bisect
