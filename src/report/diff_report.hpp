// Renders a diff::Report for people (text) and for scripts (JSON, dtrace(1), diff and JSON OUTPUT).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "diff/diff.hpp"

namespace dtrace::report {

nlohmann::json diff_to_json(const diff::Report& report);
std::string diff_to_text(const diff::Report& report);

}  // namespace dtrace::report
