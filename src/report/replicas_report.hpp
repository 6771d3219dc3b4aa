// Renders a replicas::Report (`dtrace replicas`, dtrace(1), replicas) for
// people (text) and scripts (JSON, schema dtrace-replicas).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "replicas/replicas.hpp"

namespace dtrace::report {

nlohmann::json departure_to_json(const replicas::Departure& departure, const replicas::Report& report);
nlohmann::json replicas_to_json(const replicas::Report& report);
// One paragraph per departed group, then what was compared and the notes.
std::string departure_to_text(const replicas::Departure& departure, const replicas::Report& report);
std::string replicas_to_text(const replicas::Report& report);

}  // namespace dtrace::report
