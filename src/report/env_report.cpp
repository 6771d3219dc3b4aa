#include "report/env_report.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "report/schema.hpp"

namespace dtrace::report {

namespace determinism = dtrace::determinism;

namespace {

std::string state_of(const determinism::Check& check) {
  if (!check.valid) return "INVALID";
  if (check.defaulted) return "default";
  return check.value ? "set" : "unset";
}

std::string shell_quoted(const std::string& value) {
  if (!value.empty() &&
      value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "0123456789-_./:,+@%^") == std::string::npos) {
    return value;
  }
  std::string out = "'";
  for (char c : value) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::size_t name_width() {
  std::size_t width = 0;
  for (const auto& rule : determinism::rules()) width = std::max(width, rule.name.size());
  for (const auto& advisory : determinism::advisories()) {
    width = std::max(width, advisory.name.size());
  }
  return width + 2;
}

}  // namespace

std::string env_to_text(const determinism::Environment& env) {
  const auto checks = determinism::validate(env);
  const std::size_t width = name_width();
  std::ostringstream o;
  o << "deterministic environment (the variables Megatron Core validates):\n";
  for (const auto& check : checks) {
    const auto* rule = determinism::find_rule(check.name);
    o << "  " << std::left << std::setw(static_cast<int>(width)) << check.name << std::setw(12)
      << (check.value ? *check.value : std::string("-")) << " " << std::setw(8) << state_of(check)
      << " accepts: " << rule->accepted << "\n";
  }
  const auto invalid = std::ranges::count_if(checks, [](const auto& c) { return !c.valid; });
  for (const auto& check : checks) {
    if (!check.valid) o << "invalid: " << check.reason << "\n";
  }
  o << "also changes the numbers (no rule; runs you compare must agree):\n";
  for (const auto& advisory : determinism::advisories()) {
    auto it = env.find(std::string(advisory.name));
    o << "  " << std::left << std::setw(static_cast<int>(width)) << advisory.name << std::setw(12)
      << (it == env.end() ? std::string("-") : it->second) << " " << advisory.why << "\n";
  }
  o << "set in the program, not the environment: torch.use_deterministic_algorithms(True), "
       "torch.backends.cudnn.benchmark = False\n";
  if (invalid == 0) {
    o << "valid: a run started with `dtrace exec` gets the values above\n";
  } else {
    o << "not deterministic: " << invalid << (invalid == 1 ? " variable" : " variables")
      << " set to a rejected value (never replaced: fix or unset)\n";
  }
  return o.str();
}

nlohmann::json env_to_json(const determinism::Environment& env) {
  const auto checks = determinism::validate(env);
  nlohmann::json variables = nlohmann::json::array();
  for (const auto& check : checks) {
    const auto* rule = determinism::find_rule(check.name);
    nlohmann::json v = {
        {"name", check.name},
        {"value", check.value ? nlohmann::json(*check.value) : nlohmann::json()},
        {"state", check.valid ? state_of(check) : (check.value ? "set" : "unset")},
        {"valid", check.valid},
        {"accepts", rule->accepted},
        {"default", rule->default_value ? nlohmann::json(*rule->default_value) : nlohmann::json()}};
    if (!check.valid) v["reason"] = check.reason;
    variables.push_back(std::move(v));
  }
  nlohmann::json advisories = nlohmann::json::array();
  for (const auto& advisory : determinism::advisories()) {
    auto it = env.find(std::string(advisory.name));
    advisories.push_back(
        {{"name", advisory.name},
         {"value", it == env.end() ? nlohmann::json() : nlohmann::json(it->second)},
         {"why", advisory.why}});
  }
  const bool valid = determinism::all_valid(checks);
  nlohmann::json exports = nlohmann::json::object();
  if (valid) {
    for (const auto& [name, value] : determinism::header_env(checks)) exports[name] = value;
  }
  nlohmann::json j = {{"valid", valid},
                      {"variables", variables},
                      {"advisories", advisories},
                      {"exports", valid ? exports : nlohmann::json()}};
  stamp(j, env_schema);
  return j;
}

std::string env_exports(const std::vector<determinism::Check>& checks) {
  std::string out;
  for (const auto& [name, value] : determinism::header_env(checks)) {
    out += "export " + name + "=" + shell_quoted(value) + "\n";
  }
  return out;
}

}  // namespace dtrace::report
