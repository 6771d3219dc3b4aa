// The progress line verify and tax print on stderr for each arm they run, so
// stdout holds the certificate or report (or JSON) alone.
#pragma once

#include "workflow/arm.hpp"

namespace dtrace::cli {

void log_arm(const workflow::ArmPlan& plan, const workflow::Arm* done);

}  // namespace dtrace::cli
