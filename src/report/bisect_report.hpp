// Renders a bisect::Report for people (text) and for scripts (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bisect/bisect.hpp"

namespace dtrace::report {

nlohmann::json bisect_to_json(const bisect::Report& report);
std::string bisect_to_text(const bisect::Report& report);
// "minitrain --steps 3 ..." with the DTRACE_* variables in front, as a shell would show it.
std::string replay_command_line(const bisect::Replay& replay);

}  // namespace dtrace::report
