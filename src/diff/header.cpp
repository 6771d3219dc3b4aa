#include "diff/header.hpp"

#include <map>

#include "dtrace/determinism.hpp"

namespace dtrace::diff {

namespace {

// Nested objects become dotted paths so "config.model.layers" reads as one line.
void flatten(const nlohmann::json& value, const std::string& prefix,
             std::map<std::string, nlohmann::json>& out) {
  if (value.is_object() && !value.empty()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    }
  } else {
    out[prefix] = value;
  }
}

void compare_section(const std::string& section, const nlohmann::json& a, const nlohmann::json& b,
                     Report& report) {
  std::map<std::string, nlohmann::json> fa, fb;
  flatten(a, "", fa);
  flatten(b, "", fb);
  fa.erase("");
  fb.erase("");
  for (const auto& [key, va] : fa) {
    auto it = fb.find(key);
    if (it == fb.end()) {
      report.header_differences.push_back({section, key, va, nullptr});
    } else if (it->second != va) {
      report.header_differences.push_back({section, key, va, it->second});
    }
  }
  for (const auto& [key, vb] : fb) {
    if (!fa.contains(key)) report.header_differences.push_back({section, key, nullptr, vb});
  }
}

// A run's header env values that the deterministic-environment rules reject.
void flag_env(char run, const log::Header& header, Report& report) {
  determinism::Environment env;
  for (auto it = header.env.begin(); it != header.env.end(); ++it) {
    env[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
  }
  for (const auto& [key, value] : env) {
    if (auto why = determinism::why_not_deterministic(key, value, env)) {
      report.env_flags.push_back({run, key, value, *why});
    }
  }
}

}  // namespace

void compare_headers(const log::Header& a, const log::Header& b, Report& report) {
  if (a.level != b.level) report.header_differences.push_back({"level", "", a.level, b.level});
  compare_section("env", a.env, b.env, report);
  compare_section("config", a.config, b.config, report);
  flag_env('A', a, report);
  flag_env('B', b, report);
}

}  // namespace dtrace::diff
