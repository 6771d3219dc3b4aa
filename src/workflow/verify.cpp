#include "workflow/verify.hpp"

#include <algorithm>
#include <set>

#include "log/reader.hpp"

namespace dtrace::workflow {

namespace {

Result<Arm> start(const ArmPlan& plan, const VerifyOptions& options, const Progress& progress) {
  if (progress) progress(plan, nullptr);
  auto arm = run_arm(plan, options.timeout_s);
  if (arm && progress) progress(plan, &*arm);
  return arm;
}

Result<Comparison> compare(const Arm& a, const Arm& b, std::string what) {
  // Read in full: verify reports how many records two short runs agreed on,
  // which a search (that reads only differing steps) does not count.
  diff::DiffOptions read_all;
  read_all.stream = true;
  auto report = diff::diff_runs(a.plan.run_dir, b.plan.run_dir, read_all);
  if (!report) {
    return Error{"arms " + a.plan.label + " and " + b.plan.label + ": " + report.error().message};
  }
  return Comparison{a.plan.label, b.plan.label, std::move(what), std::move(*report)};
}

// Adds a comparison's counts to the trial's. `disjoint`: the comparisons cover
// different steps (before and after a resume), so their step counts add up;
// otherwise every comparison covers the same steps again.
void add_counts(Trial& trial, const diff::Compared& c, bool disjoint) {
  diff::Compared& t = trial.compared;
  if (trial.comparisons.size() == 1) {
    t = c;
    return;
  }
  t.first_step = std::min(t.first_step, c.first_step);
  t.last_step = std::max(t.last_step, c.last_step);
  t.steps = disjoint ? t.steps + c.steps : std::max(t.steps, c.steps);
  t.ranks = std::max(t.ranks, c.ranks);
  t.records += c.records;
}

Result<void> add_comparison(Trial& trial, Result<Comparison> comparison, bool disjoint) {
  if (!comparison) return comparison.error();
  trial.comparisons.push_back(std::move(*comparison));
  add_counts(trial, trial.comparisons.back().report.compared, disjoint);
  return {};
}

// N independent arms; arm 1 against each other arm.
Result<Trial> run_to_run(const std::vector<std::string>& argv, const std::string& prefix,
                         const VerifyOptions& options, const Workspace& workspace,
                         const Progress& progress) {
  Trial trial;
  trial.argv = argv;
  for (int i = 1; i <= options.arms; ++i) {
    const std::string label = prefix + std::to_string(i);
    auto arm = start(workspace.plan(label, argv, label), options, progress);
    if (!arm) return arm.error();
    trial.arms.push_back(std::move(*arm));
  }
  for (std::size_t i = 1; i < trial.arms.size(); ++i) {
    auto added = add_comparison(trial, compare(trial.arms[0], trial.arms[i], "run to run"), false);
    if (!added) return added.error();
  }
  return trial;
}

// An uninterrupted arm, one stopped at K (DTRACE_STOP_AT) and one resumed
// from the stopped arm's checkpoint (DTRACE_RESUME_AT). The stopped arm must
// match the uninterrupted one before K, the resumed one from K on: together
// they are the run a job interrupted at K would have produced. Each arm is
// checked as soon as it ends, so a workload that ignores a variable is named
// for it rather than failing later for want of a checkpoint.
Result<Trial> checkpoint_resume(const std::vector<std::string>& argv, const std::string& prefix,
                                std::int64_t k, const VerifyOptions& options,
                                const Workspace& workspace, const Progress& progress) {
  Trial trial;
  trial.argv = argv;
  const std::string at = std::to_string(k);
  const std::string handed_on = prefix + "stop-resume";
  auto full = start(workspace.plan(prefix + "full", argv, prefix + "full"), options, progress);
  if (!full) return full.error();
  trial.arms.push_back(std::move(*full));

  auto stopped =
      start(workspace.plan(prefix + "stopped", argv, handed_on, {{"DTRACE_STOP_AT", at}}), options,
            progress);
  if (!stopped) return stopped.error();
  trial.arms.push_back(std::move(*stopped));
  auto before = compare(trial.arms[0], trial.arms[1], "before the stop at step " + at);
  if (!before) return before.error();
  if (before->report.compared.last_step >= k) {
    return Error{"arm " + trial.arms[1].plan.label + " ran step " +
                 std::to_string(before->report.compared.last_step) +
                 ": the workload does not honour DTRACE_STOP_AT=" + at + " (run the steps before " +
                 at + ", checkpoint, exit)"};
  }

  auto resumed =
      start(workspace.plan(prefix + "resumed", argv, handed_on, {{"DTRACE_RESUME_AT", at}}),
            options, progress);
  if (!resumed) return resumed.error();
  trial.arms.push_back(std::move(*resumed));
  auto after = compare(trial.arms[0], trial.arms[2], "resumed at step " + at);
  if (!after) return after.error();
  if (after->report.compared.first_step < k) {
    return Error{"arm " + trial.arms[2].plan.label + " ran step " +
                 std::to_string(after->report.compared.first_step) +
                 ": the workload does not honour DTRACE_RESUME_AT=" + at +
                 " (restore the checkpoint of step " + at + " and go on from there)"};
  }
  auto added = add_comparison(trial, std::move(before), true);
  if (added) added = add_comparison(trial, std::move(after), true);
  if (!added) return added.error();
  return trial;
}

Result<Trial> run_trial(const std::vector<std::string>& argv, const std::string& prefix,
                        const VerifyOptions& options, const Workspace& workspace,
                        const Progress& progress) {
  if (options.resume_at) {
    return checkpoint_resume(argv, prefix, *options.resume_at, options, workspace, progress);
  }
  return run_to_run(argv, prefix, options, workspace, progress);
}

// Env values `dtrace env` rejects in any arm's header, once each: an arm that
// ran with them may agree with its twin today and not on another machine.
void note_env_flags(const Trial& trial, const std::string& which, std::vector<std::string>& notes) {
  std::set<std::string> seen;
  for (const Comparison& c : trial.comparisons) {
    for (const diff::EnvFlag& flag : c.report.env_flags) {
      if (seen.insert(flag.key + "=" + flag.value).second) {
        notes.push_back(which + " ran with " + flag.reason);
      }
    }
  }
}

}  // namespace

std::string_view guarantee_name(Guarantee guarantee) {
  return guarantee == Guarantee::run_to_run ? "run-to-run" : "checkpoint-resume";
}

bool Trial::identical() const {
  return std::ranges::none_of(comparisons, [](const Comparison& c) { return c.report.diverged(); });
}

const Comparison* Trial::first_divergence() const {
  const Comparison* first = nullptr;
  for (const Comparison& c : comparisons) {
    if (c.report.diverged() &&
        (first == nullptr || c.report.first->step < first->report.first->step)) {
      first = &c;
    }
  }
  return first;
}

Result<Certificate> verify(const VerifyOptions& options, const Progress& progress) {
  if (options.command.empty()) return Error{"no command to verify (dtrace verify -- CMD ARGS)"};
  if (!options.resume_at && options.arms < 2) return Error{"--arms must be at least 2"};
  if (options.resume_at && *options.resume_at < 1) {
    return Error{"--resume-at must be a step after the first (at least 1)"};
  }
  auto workspace = Workspace::create(options.keep);
  if (!workspace) return workspace.error();

  Certificate certificate;
  certificate.guarantee = options.resume_at ? Guarantee::checkpoint_resume : Guarantee::run_to_run;
  certificate.resume_at = options.resume_at;
  if ((*workspace)->kept()) certificate.kept = (*workspace)->path();

  auto workload =
      run_trial(options.command, options.resume_at ? "" : "arm", options, **workspace, progress);
  if (!workload) return workload.error();
  certificate.workload = std::move(*workload);
  if (!options.control.empty()) {
    auto control = run_trial(options.control, options.resume_at ? "control-" : "control", options,
                             **workspace, progress);
    if (!control) return control.error();
    certificate.control = std::move(*control);
  }

  auto reader = log::RunReader::open(certificate.workload.arms.front().plan.run_dir);
  if (!reader) return reader.error();
  certificate.level = (*reader)->header().level;
  certificate.world_size = (*reader)->world_size();
  note_env_flags(certificate.workload, "the workload", certificate.notes);
  if (certificate.control) note_env_flags(*certificate.control, "the control", certificate.notes);
  return certificate;
}

}  // namespace dtrace::workflow
