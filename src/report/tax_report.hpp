// Renders a determinism-tax measurement (`dtrace tax`) for people and scripts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "workflow/tax.hpp"

namespace dtrace::report {

nlohmann::json tax_to_json(const workflow::TaxReport& report);
// One line per mode (median step time, interquartile range, arm medians), then
// the overhead and whether it stands out of the noise.
std::string tax_to_text(const workflow::TaxReport& report);

}  // namespace dtrace::report
