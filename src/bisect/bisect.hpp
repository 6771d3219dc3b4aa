// `dtrace bisect` (dtrace(1), bisect): replays the training program at the first
// divergent step, finer and finer — the step with per-layer hashes, the suspect
// layer alone with per-kernel hashes, then the suspect kernel alone — and names
// the kernel responsible, with numeric evidence from its captured outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "replay/runner.hpp"
#include "util/result.hpp"

namespace dtrace::bisect {

// How a replay is executed. Empty means replay::run (the workload itself);
// tests substitute a fake that writes, to the command's DTRACE_OUT and
// DTRACE_CAPTURE, what a workload would, so each stage's verdicts can be
// exercised without a training program.
using ReplayRunner = std::function<Result<replay::Outcome>(const replay::Command& command)>;

struct Options {
  std::string run_a, run_b;
  std::optional<std::int64_t> step;   // default: the first divergent step
  std::optional<std::int32_t> rank;   // default: the rank diff named at that step
  int repeat = 3;                     // attempts for intermittent divergence; K for confirm
  double timeout_s = 600;             // per replay
  bool trust = false;                 // run the replay argv found in the logs
  std::optional<std::vector<std::string>> replay;  // or this argv, given by the user
  std::optional<std::string> keep;    // keep replay outputs and captures here
  ReplayRunner runner;                // default (empty): replay::run
  // --launches: one launch per replay, even for a workload that serves replay
  // sessions (dtrace-replay/1.2, man/dtrace-fp.5 "Replay sessions").
  bool launches = false;
  // The culprit search (man/dtrace.1, "Every culprit"): after naming an op,
  // pin it and look again, up to max_culprits ops; `first` stops at the first.
  bool first = false;
  int max_culprits = 5;
};

// diverged_earlier: the runs' own records differ before the bisected step and
// their configurations differ, so no replay of this step can name a kernel
// (dtrace(1), "restore check"). fast_forward: a replay restored an older
// checkpoint and one of the steps it ran to reach the bisected step came out
// otherwise than its run recorded it, so the step's state could not be
// reproduced; that step is the one to bisect. data: what the step consumed (a
// step-scope `in` record, its batch) is where the step first differs
// (dtrace(1), "data check"). generator: where the step first differs, every
// record before it matching, is a generator's state: it was not seeded alike,
// or not saved and restored (dtrace(1), "generator").
enum class Verdict { named, restore, not_reproduced, not_localized, diverged_earlier, fast_forward, data, generator };
std::string_view verdict_name(Verdict verdict);

// What a named kernel rests on (man/dtrace.1): confirmed alone (its
// repetitions from one input gave different outputs); or, when alone it
// repeated itself, the suspect layer's repetitions from one input, where its
// output differed while its inputs matched; or, when the layer alone repeated
// itself too, the per-kernel replays of the whole step.
enum class Basis { confirmed, layer_repetitions, step_replays };
std::string_view basis_name(Basis basis);

// A state record by identity, named as reports name it: "scope op name"
// ("step param b1" and "step momentum b1" are two records).
struct StateRecord {
  std::string scope, op, name;
  std::string text() const { return scope + " " + op + " " + name; }
};
struct Report;
// The restore verdict's state record (Report::state_scope, state_op, state), named.
std::string state_record(const Report& report);

// One replay: a launch of the workload, or a request to a session of it.
struct Replay {
  std::string stage;   // "layer", "capture", "kernel", "confirm"
  char side = 'A';     // whose configuration
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // the DTRACE_* variables set
  double seconds = 0;
  int exit = 0;
  std::string outcome;  // "exit 0", "killed by signal 9", ...
  bool request = false; // served by a session (Report::launches[launch]), not a launch of its own
  int launch = -1;      // the launch that served it (index into Report::launches)
};

// One start of the workload: a launch per replay, or a session that served
// several (man/dtrace-fp.5, "Replay sessions").
struct Launch {
  char side = 'A';
  std::string stage;  // the stage of its first replay
  bool session = false;
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // the DTRACE_* variables it started with
  int requests = 0;     // replays it served
  double seconds = 0;   // from its start to its last answer
  std::string outcome;  // its last replay's outcome
  std::string why;      // why a fresh session, when it is not its side's first
  // A launch of a replay that its side's session declined (man/dtrace-fp.5,
  // "Replay sessions"): that session (an index into Report::launches), the
  // request's number in it, and the reason the workload gave. The session
  // served the side's later requests.
  struct Declined {
    int session = -1;
    int request = -1;
    std::string reason;
  };
  std::optional<Declined> declined;
};

// What the confirmation measured on the suspect kernel's outputs.
struct Evidence {
  std::string output;       // the out record compared (name)
  std::string dtype;
  int repetitions = 0;      // per side
  int distinct_outputs = 0; // distinct fingerprints over all repetitions of both sides
  std::uint64_t elements = 0;
  std::uint64_t elements_differing = 0;
  double max_abs_difference = 0;
  std::optional<std::uint64_t> max_ulp;
  std::uint64_t nan_a = 0, nan_b = 0, inf_a = 0, inf_b = 0;
  // The differing elements by distance: ulp_histogram[k] counts those between
  // 2^k and 2^(k+1)-1 ulp apart; ulp_undefined those with a NaN on either side.
  // Empty when the dtype is not a float read element by element.
  std::vector<std::uint64_t> ulp_histogram;
  std::uint64_t ulp_undefined = 0;
  // Each repetition's output fingerprint, A's repetitions first.
  struct Output {
    char side = 'A';
    std::int64_t repetition = 0;
    std::string fingerprint;
  };
  std::vector<Output> outputs;
  // The magnitudes the difference is judged against (largest finite |value|):
  // the compared output's (A's of the pair), and the op's captured float
  // inputs' (nullopt when it has none, or none was read). `magnitude` says
  // which the reading used, the larger: "inputs" or "output"; empty when no
  // float elements were compared.
  std::optional<double> output_magnitude;
  std::optional<double> input_magnitude;
  std::string magnitude;
  std::string reading;      // what the numbers mean, in words
  // What the op ran beneath it in the confirm replay, as the workload listed
  // it (kernels.rank<r>.json in its capture, dtrace-fp(5)): device kernels on
  // a GPU, or CPU ops. Empty when the workload listed nothing.
  std::vector<std::string> kernels;
  std::string kernels_device;  // "cuda", "cpu", ... as the workload said
  std::string kernels_source;  // "torch.profiler", ...
};

// The compiled region a named op lies in, as the workload declared it
// (dtrace-fp(5), "Compiled regions": regions.rank<r>.json in the kernel pass's
// capture). A region is one layer to the layer pass; inside it the workload
// records parts of its own, sub-scopes the op's scope may name (dtrace_torch:
// "eager", the region's graph run op by op; "inductor", the kernels the
// compiler generated for it).
struct Region {
  std::string scope;       // the region's scope, fwd/blocks.0
  std::string kind;        // what compiled it, "torch.compile"
  std::string part;        // the sub-scope the op lies in, "" for the region's own call
  std::string part_means;  // what the part is, in the workload's words ("" when it said nothing)
};

// Where the runs' own records first differ, read from the logs (no replay),
// when that is before the bisected step.
struct EarlierDivergence {
  std::int64_t step = 0;
  std::int32_t rank = 0;
  std::string record;   // "scope op io name" of the first differing record
  std::string command;  // the bisect to run there
};

// The record of what the step consumed where the data first differs (verdict data).
struct DataDifference {
  std::string scope, op, name;
  int occurrence = 0;  // which record of (scope, op, name) at the step: a micro-batch
  int calls = 1;       // how many such records the step holds
  // "step batch in tokens, call 2 of 2": how reports name it (dtrace(1), CALLS OF A REPEATED OP).
  std::string text() const;
};

// The generator verdict's record, and whether the step is where both runs
// begin (nothing before it ran or was restored: it was not seeded alike).
struct GeneratorDifference {
  std::string scope, op, io, name;
  bool first_step = false;
};

// How the layer pass's replays of the step compare with what each run recorded
// there, kept when the replays agreed with each other while the runs differ:
// the signature of a choice made once per process (an autotuner's pick).
struct Outcomes {
  int replays = 0;          // layer-level replays classified
  int like_a = 0;           // reproduced run A's records of the step
  int like_b = 0;           // reproduced run B's
  int neither = 0;          // reproduced neither run
  int attempts = 0;         // attempts (two replays each) made
  int budget = 0;           // attempts allowed
};

// One op named at the bisected step (man/dtrace.1, "Every culprit"): the
// first as the report's own fields say it, each later one found with every
// op named before it pinned (dtrace-replay/1.3, man/dtrace-fp.5 "Pinned ops").
struct Culprit {
  std::string op, scope, role;
  std::int32_t rank = 0;  // the rank whose replays named it
  int occurrence = 0;
  int calls = 1;
  Basis basis = Basis::confirmed;
  std::string layer;
  std::optional<Region> region;  // the compiled region it lies in, if any
  std::optional<Evidence> evidence;
  std::string reached;   // "kernel named: ..."
  // The replays that found it: indices [first_replay, end_replay) into Report::replays.
  int first_replay = 0, end_replay = 0;
  // The ops pinned while it was searched for (the culprits before it), "scope op".
  std::vector<std::string> pinned;
  std::vector<std::string> notes;  // what its round noted (a confirmation that failed, ...)
};

struct Report {
  Verdict verdict = Verdict::not_reproduced;
  // The runs are identical (not-reproduced without a replay): there was no
  // divergence to bisect.
  bool nothing_to_bisect = false;
  std::string run_a, run_b;
  std::int64_t step = 0;
  std::int32_t rank = 0;
  std::vector<std::int32_t> ranks_replayed;
  bool shared_configuration = false;  // A and B are one configuration, replayed repeatedly
  // named:
  std::string op, scope, role;
  int occurrence = 0;  // which call of op in scope at the step (0 the first)
  int calls = 1;       // how many calls of op the step's scope holds
  Basis basis = Basis::confirmed;
  std::string layer;                  // the suspect layer scope
  std::optional<Region> region;       // the compiled region the named op lies in, if any
  // restore: the first state record that differs, by scope, op and name
  // (state_record() names it: "step param b1" and "step momentum b1" differ).
  std::string state, state_scope, state_op;
  std::optional<Evidence> evidence;
  std::optional<DataDifference> input;       // data
  std::optional<GeneratorDifference> generator;  // generator
  std::optional<EarlierDivergence> earlier;  // diverged-earlier, or named by repetition after it
  // fast-forward: the first fast-forwarded step a replay got otherwise than
  // its run (record: the run's record the replay did not reproduce).
  std::optional<EarlierDivergence> departed;
  char departed_side = 'A';
  std::optional<Outcomes> outcomes;
  std::string reached;                // how far it got, in words
  std::vector<Replay> replays;
  std::vector<Launch> launches;
  // How the replays ran: "sessions" (one launch per side, dtrace-replay/1.2)
  // or "launches"; and why (which run does not serve sessions, --launches).
  std::string replay_mode = "launches";
  std::string replay_mode_why;
  std::vector<std::string> notes;
  // Every culprit, in the order found; the first is the one the fields above
  // name (verdict named). Empty for any other verdict.
  std::vector<Culprit> culprits;
  // What ended the culprit search, in words ("with these 2 ops pinned, the
  // replays of step 7 agree over 3 attempts"); empty when none ran.
  std::string search_end;
  // Why it ended: "agree" (nothing else differs), "first" (--first),
  // "max-culprits", "no-pins" (a workload that does not announce 1.3),
  // "not-localized" (a later round found a difference it could not name).
  std::string search_stop;
};

// Called before (done = false) and after (done = true) each replay.
using Progress = std::function<void(const Replay& replay, bool done)>;
// Called when a stage settles something between replays: the restore check
// (which reads the layer pass's first replays, so has none of its own), the
// suspect layer, the suspect kernel.
using StageNote = std::function<void(const std::string& stage, const std::string& message)>;

// Trouble (unreadable runs, no replay command, a replay that crashed or timed
// out, output that is not a log) is an Error; a divergence that cannot be
// reproduced or localized is a Report with that verdict.
Result<Report> run(const Options& options, const Progress& progress, const StageNote& note = {});

}  // namespace dtrace::bisect
