// What verify and tax share on the command line: the options that say where
// the arms run and for how long, the workload after `--`, and the progress
// line printed on stderr for each arm they run, so stdout holds the
// certificate or report (or JSON) alone.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "workflow/arm.hpp"

namespace dtrace::cli {

// --keep DIR, --timeout S (left as is when not given: no limit), --json and
// the required CMD words.
void add_arm_options(CLI::App& cmd, std::string& keep, double& timeout_s, bool& json,
                     std::vector<std::string>& command);

void log_arm(const workflow::ArmPlan& plan, const workflow::Arm* done);

}  // namespace dtrace::cli
