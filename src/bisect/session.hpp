// What the stages of a bisect share: the two sides' replay commands, the
// working directory for replay outputs and captures, and the log of replays.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bisect/bisect.hpp"
#include "log/reader.hpp"

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
  // The bisected step as this run recorded it (the restore check's reference);
  // nullopt when the run has no complete such step (a resumed run starts later).
  std::optional<LoadedStep> recorded;
};

class Session {
 public:
  Session(const Options& options, const Progress& progress, const StageNote& note, Report& report);
  ~Session();  // removes the working directory unless --keep named it

  Result<void> open_workdir();
  std::string path(const std::string& name) const { return workdir_ + "/" + name; }

  // Runs side's command with `variables` added; trouble (it could not start,
  // crashed, exited nonzero, timed out) is an Error with the tail of its stderr,
  // and so is exiting 0 without a readable log in DTRACE_OUT.
  Result<void> replay(const std::string& stage, const Side& side, const Variables& variables);
  void note(const std::string& stage, const std::string& message) const {
    if (note_) note_(stage, message);
  }

  const Options& options;
  Report& report;
  Side a, b;

 private:
  Result<void> check_replay_log(const std::string& stage, const Side& side,
                                const Variables& variables) const;
  const Progress& progress_;
  const StageNote& note_;
  std::string workdir_;
  bool remove_ = false;
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

// The restore check: the first state record where `replayed` and `recorded`
// disagree (a state record present in `recorded` but missing in `replayed`
// counts), by identity; nullopt when they agree.
std::optional<std::pair<std::string, std::string>> first_state_difference(const log::Step& replayed,
                                                                          const log::Step& recorded);

// Numeric evidence from two captured outputs of the same tensor.
Evidence compare_outputs(const std::vector<std::byte>& a, const std::vector<std::byte>& b,
                         const std::string& dtype);

}  // namespace dtrace::bisect
