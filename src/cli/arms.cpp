#include "cli/arms.hpp"

#include <spdlog/spdlog.h>

#include "cli/numbers.hpp"

namespace dtrace::cli {

void add_arm_options(CLI::App& cmd, std::string& keep, double& timeout_s, bool& json,
                     std::vector<std::string>& command) {
  cmd.add_option("--keep", keep, "keep the arms' runs in this new directory");
  cmd.add_option("--timeout", timeout_s, "seconds each arm may run (default: no limit)")
      ->check(positive_seconds());
  cmd.add_flag("--json", json, "print one JSON document on stdout (its schema: man dtrace, JSON OUTPUT)");
  cmd.add_option("CMD", command, "the workload and its arguments (after --)")->required();
}

void log_arm(const workflow::ArmPlan& plan, const workflow::Arm* done) {
  if (done == nullptr) {
    spdlog::info("[{}] running: {}", plan.label, workflow::command_line(plan));
  } else {
    spdlog::info("[{}] done in {:.2f} s", plan.label, done->seconds);
  }
}

}  // namespace dtrace::cli
