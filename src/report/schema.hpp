#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace dtrace::report {

// Every --json document names the contract it follows, so that a script can
// tell which one it reads: "schema" (dtrace-diff, dtrace-bisect, ...) and
// "schema_version" ("MAJOR.MINOR"). A field added is a new minor version; a
// field removed or renamed, or whose type or meaning changes, a new major one.
// Each contract is a JSON Schema, schemas/<schema>-<major>.schema.json,
// installed in share/dtrace/ and described in dtrace(1), JSON OUTPUT; the
// tests validate every command's output against it (tests/e2e/json_schemas.sh).
struct Schema {
  std::string_view name;
  std::string_view version;
};

inline constexpr Schema diff_schema{"dtrace-diff", "1.1"};
inline constexpr Schema bisect_schema{"dtrace-bisect", "1.7"};
inline constexpr Schema show_schema{"dtrace-show", "1.1"};
inline constexpr Schema check_schema{"dtrace-check", "1.4"};
inline constexpr Schema env_schema{"dtrace-env", "1.0"};
inline constexpr Schema verify_schema{"dtrace-verify", "1.0"};
inline constexpr Schema tax_schema{"dtrace-tax", "1.0"};
inline constexpr Schema replicas_schema{"dtrace-replicas", "1.0"};
// `dtrace watch --json` prints one document per line, each an event stamped so.
inline constexpr Schema watch_schema{"dtrace-watch", "1.0"};

// Adds "schema" and "schema_version" to a document (an object).
inline void stamp(nlohmann::json& document, const Schema& schema) {
  document["schema"] = schema.name;
  document["schema_version"] = schema.version;
}

}  // namespace dtrace::report
