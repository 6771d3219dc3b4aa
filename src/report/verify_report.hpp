// Renders a verify certificate (`dtrace verify`) for people and for scripts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "workflow/verify.hpp"

namespace dtrace::report {

nlohmann::json verify_to_json(const workflow::Certificate& certificate);
// First line "certified: ..." or "NOT certified: ...", then what was checked,
// compared, and where the arms first diverged.
std::string verify_to_text(const workflow::Certificate& certificate);

}  // namespace dtrace::report
