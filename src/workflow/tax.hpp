// `dtrace tax`: what determinism costs. The workload runs with its
// deterministic kernels (DTRACE_DETERMINISTIC=1) and with its fast ones
// (DTRACE_DETERMINISTIC=0), N arms each, interleaved so that a machine
// warming up or slowing down weighs on both modes alike; each step's time
// comes from the workload's own `"io":"timing"` records named step_seconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/result.hpp"
#include "workflow/arm.hpp"

namespace dtrace::workflow {

struct TaxOptions {
  std::vector<std::string> command;
  int arms = 3;      // per mode
  std::string keep;  // keep the arms in this new directory
  double timeout_s = 1e9;
};

// One mode's step times (seconds). A step's time is its slowest rank's (the
// step ends for everyone when the last rank is done); each arm's first step
// is left out when the arm has more (start-up: caches, allocation, autotuning).
struct ModeTiming {
  std::string mode;                  // "deterministic" or "fast"
  std::vector<double> step_seconds;  // every timed step of every arm of the mode
  std::vector<double> arm_medians;   // per arm, in run order
  double median = 0, p25 = 0, p75 = 0;
};

struct TaxReport {
  ModeTiming deterministic, fast;
  double overhead_percent = 0;  // deterministic median over fast median, less one
  // The two modes' interquartile ranges overlap: the overhead is within the
  // noise of these measurements.
  bool within_noise = false;
  // Whether each mode's arms were bit-identical (a diff of the first arm with
  // each other): the deterministic ones should be; fast ones usually are not.
  // Unset with a single arm per mode.
  std::optional<bool> deterministic_identical, fast_identical;
  std::vector<Arm> arms;  // in run order
  std::string kept;       // the directory holding the arms; empty when removed
  std::vector<std::string> notes;
};

Result<TaxReport> measure_tax(const TaxOptions& options, const Progress& progress);

// The step times of one run: per step, the largest step_seconds timing record
// over ranks, in step order, complete steps only. An Error when the run has none.
Result<std::vector<double>> step_times(const std::string& run);

// The q-quantile (0..1) of `values` by linear interpolation; 0 for none.
double quantile(std::vector<double> values, double q);

}  // namespace dtrace::workflow
