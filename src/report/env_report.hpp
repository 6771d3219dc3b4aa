// Renders the deterministic environment (`dtrace env`): the rules of dtrace(1)
// (env) with the value in force for each, the advisory variables, and the export
// lines that fill the defaults.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtrace/determinism.hpp"

namespace dtrace::report {

// `env`: the process's known variables (determinism::process_environment()).
std::string env_to_text(const determinism::Environment& env);
nlohmann::json env_to_json(const determinism::Environment& env);
// "export NAME=VALUE" for every ruled variable with a value in force (set or
// defaulted), quoted for a POSIX shell. Only meaningful when every check is
// valid: an invalid value is never exported.
std::string env_exports(const std::vector<determinism::Check>& checks);

}  // namespace dtrace::report
