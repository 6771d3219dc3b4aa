#include "cli/arm_progress.hpp"

#include <spdlog/spdlog.h>

namespace dtrace::cli {

void log_arm(const workflow::ArmPlan& plan, const workflow::Arm* done) {
  if (done == nullptr) {
    spdlog::info("[{}] running: {}", plan.label, workflow::command_line(plan));
  } else {
    spdlog::info("[{}] done in {:.2f} s", plan.label, done->seconds);
  }
}

}  // namespace dtrace::cli
