// Renders a log::RunSummary (`dtrace show`) for people (text) and scripts (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "log/summary.hpp"

namespace dtrace::report {

nlohmann::json show_to_json(const log::RunSummary& summary);
std::string show_to_text(const log::RunSummary& summary);

// One record as one line: `seq scope op io name dtype shape hash|bits value`,
// with `-` for a field the record lacks.
std::string record_line(const log::Record& record);

}  // namespace dtrace::report
