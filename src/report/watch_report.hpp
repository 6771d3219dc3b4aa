// Renders `dtrace watch` events (dtrace(1), watch): a line or a report per
// event for people, one JSON object per line for tooling (schema dtrace-watch).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "watch/watch.hpp"

namespace dtrace::report {

nlohmann::json watch_event_to_json(const watch::Event& event);
std::string watch_event_to_text(const watch::Event& event);

}  // namespace dtrace::report
