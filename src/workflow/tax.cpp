#include "workflow/tax.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include "diff/diff.hpp"
#include "log/reader.hpp"

namespace dtrace::workflow {

namespace {

constexpr std::string_view kStepTimeName = "step_seconds";

// A timing record's seconds: from its exact bits when it has them.
std::optional<double> seconds_of(const log::Record& record) {
  if (record.scalar && record.digest.digits == 16 && record.dtype == "f64") {
    return std::bit_cast<double>(record.digest.low);
  }
  if (record.scalar && record.digest.digits == 8 && record.dtype == "f32") {
    return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(record.digest.low)));
  }
  if (record.has_value) return record.value;
  return std::nullopt;
}

void summarize(ModeTiming& mode) {
  mode.median = quantile(mode.step_seconds, 0.5);
  mode.p25 = quantile(mode.step_seconds, 0.25);
  mode.p75 = quantile(mode.step_seconds, 0.75);
}

// Whether every arm of a mode left bit-identical records (first arm against each other).
Result<std::optional<bool>> arms_identical(const std::vector<const Arm*>& arms) {
  if (arms.size() < 2) return std::optional<bool>();
  for (std::size_t i = 1; i < arms.size(); ++i) {
    auto report = diff::diff_runs(arms[0]->plan.run_dir, arms[i]->plan.run_dir);
    if (!report) {
      return Error{"arms " + arms[0]->plan.label + " and " + arms[i]->plan.label + ": " +
                   report.error().message};
    }
    if (report->diverged()) return std::optional<bool>(false);
  }
  return std::optional<bool>(true);
}

}  // namespace

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::ranges::sort(values);
  const double at = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(at));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (at - static_cast<double>(below));
}

Result<std::vector<double>> step_times(const std::string& run) {
  auto reader = log::RunReader::open(run);
  if (!reader) return reader.error();
  std::map<std::int64_t, double> slowest;
  for (;;) {
    auto step = (*reader)->next();
    if (!step) return step.error();
    if (!*step) break;
    if ((*step)->status != log::StepStatus::complete) continue;
    for (const log::Record& record : (*step)->records) {
      if (record.io != log::Io::timing || record.name != kStepTimeName) continue;
      if (auto seconds = seconds_of(record)) {
        auto [it, fresh] = slowest.emplace((*step)->step, *seconds);
        if (!fresh) it->second = std::max(it->second, *seconds);
      }
    }
  }
  if (slowest.empty()) {
    return Error{run +
                 ": no step time: the workload must write a record with \"io\":\"timing\" "
                 "named step_seconds (seconds) in every step"};
  }
  std::vector<double> times;
  for (const auto& [step, seconds] : slowest) times.push_back(seconds);
  return times;
}

Result<TaxReport> measure_tax(const TaxOptions& options, const Progress& progress) {
  if (options.command.empty()) return Error{"no command to measure (dtrace tax -- CMD ARGS)"};
  if (options.arms < 1) return Error{"--arms must be at least 1"};
  auto workspace = Workspace::create(options.keep);
  if (!workspace) return workspace.error();

  TaxReport report;
  report.deterministic.mode = "deterministic";
  report.fast.mode = "fast";
  if ((*workspace)->kept()) report.kept = (*workspace)->path();
  // ABBA order (deterministic, fast, fast, deterministic, ...): a drift in the
  // machine's speed falls on both modes alike, not on whichever runs second.
  std::vector<const Arm*> deterministic_arms, fast_arms;
  report.arms.reserve(static_cast<std::size_t>(2 * options.arms));
  for (int i = 1; i <= options.arms; ++i) {
    const bool deterministic_first = i % 2 == 1;
    for (const bool deterministic : {deterministic_first, !deterministic_first}) {
      ModeTiming& mode = deterministic ? report.deterministic : report.fast;
      const std::string label = mode.mode + "." + std::to_string(i);
      const ArmPlan plan = (*workspace)
                               ->plan(label, options.command, label,
                                      {{"DTRACE_DETERMINISTIC", deterministic ? "1" : "0"}});
      if (progress) progress(plan, nullptr);
      auto arm = run_arm(plan, options.timeout_s);
      if (!arm) return arm.error();
      if (progress) progress(plan, &*arm);
      auto times = step_times(plan.run_dir);
      if (!times) return Error{"arm " + label + ": " + times.error().message};
      if (times->size() > 1) times->erase(times->begin());
      mode.arm_medians.push_back(quantile(*times, 0.5));
      mode.step_seconds.insert(mode.step_seconds.end(), times->begin(), times->end());
      report.arms.push_back(std::move(*arm));
      (deterministic ? deterministic_arms : fast_arms).push_back(&report.arms.back());
    }
  }
  summarize(report.deterministic);
  summarize(report.fast);
  if (report.fast.median > 0) {
    report.overhead_percent = (report.deterministic.median / report.fast.median - 1.0) * 100.0;
  }
  report.within_noise =
      report.deterministic.p25 <= report.fast.p75 && report.fast.p25 <= report.deterministic.p75;
  auto same = arms_identical(deterministic_arms);
  if (!same) return same.error();
  report.deterministic_identical = *same;
  same = arms_identical(fast_arms);
  if (!same) return same.error();
  report.fast_identical = *same;
  if (report.deterministic_identical == false) {
    report.notes.push_back(
        "the deterministic arms diverged: what was timed is not deterministic "
        "(dtrace verify -- CMD finds where)");
  }
  if (report.fast_identical == true) {
    report.notes.push_back(
        "the fast arms were bit-identical too: the workload may ignore "
        "DTRACE_DETERMINISTIC=0, or its fast kernels happen to agree");
  }
  return report;
}

}  // namespace dtrace::workflow
