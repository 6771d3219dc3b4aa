// `dtrace verify`: turns "bit-identical" into a checked claim. It runs the
// workload as independent arms (run-to-run reproducibility) or as an
// uninterrupted arm beside one stopped at step K and resumed from its
// checkpoint (bitwise checkpoint resume), diffs them, and issues a
// certificate. A control command, whose arms must diverge, proves the check
// can see a difference at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diff/diff.hpp"
#include "util/result.hpp"
#include "workflow/arm.hpp"

namespace dtrace::workflow {

enum class Guarantee { run_to_run, checkpoint_resume };
std::string_view guarantee_name(Guarantee guarantee);  // "run-to-run", "checkpoint-resume"

struct VerifyOptions {
  std::vector<std::string> command;
  std::vector<std::string> control;       // empty: no control
  int arms = 2;                           // run-to-run: arms of each command
  std::optional<std::int64_t> resume_at;  // set: checkpoint-resume at this step
  std::string keep;                       // keep the arms in this new directory
  double timeout_s = 1e9;                 // per arm
};

// Two arms' diff.
struct Comparison {
  std::string a, b;  // arm labels
  std::string what;  // "run to run", "before the stop", "after the resume"
  diff::Report report;
};

// The arms of one command and what their diffs found.
struct Trial {
  std::vector<std::string> argv;
  std::vector<Arm> arms;
  std::vector<Comparison> comparisons;
  diff::Compared compared;  // over every comparison: steps covered, records summed
  bool identical() const;
  // The comparison whose divergence comes first (earliest step), nullptr when identical.
  const Comparison* first_divergence() const;
};

struct Certificate {
  Guarantee guarantee = Guarantee::run_to_run;
  std::optional<std::int64_t> resume_at;
  std::string level;  // the first arm's header level
  std::int64_t world_size = 0;
  Trial workload;
  std::optional<Trial> control;
  std::string kept;                // the directory holding the arms; empty when removed
  std::vector<std::string> notes;  // env values §6 rejects, and the like
  bool certified() const { return workload.identical() && (!control || !control->identical()); }
};

// An Error is trouble: an arm that failed or wrote no log, runs diff cannot
// compare, or a workload that ignored DTRACE_STOP_AT or DTRACE_RESUME_AT.
Result<Certificate> verify(const VerifyOptions& options, const Progress& progress);

}  // namespace dtrace::workflow
