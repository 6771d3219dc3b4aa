// Renders a log::Certification (`dtrace check`) for people (text) and scripts (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "log/certify.hpp"

namespace dtrace::report {

nlohmann::json check_to_json(const log::Certification& certification);
// Certified: one line, "certified: RUN: N ranks, steps A-B (S steps), R records".
// Otherwise one line per listed violation, then a count.
std::string check_to_text(const log::Certification& certification);

}  // namespace dtrace::report
