// The deterministic environment (dtrace(1), env): the variables a bitwise
// deterministic run needs, the values accepted for each, and the defaults an
// unset one gets, as Megatron Core validates them.
//
// Three users: a training program calls apply() before its first cuBLAS or
// NCCL call (a set but invalid value is an error, never silently replaced);
// the recorder's header records the values in force (header_env()); and
// `dtrace diff` flags a header env value that is not deterministic
// (why_not_deterministic()). Header-only types, no dependency beyond the
// standard library, so a workload can include it alone.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtrace::determinism {

// One variable and its rule.
struct Rule {
  std::string_view name;
  std::optional<std::string_view> default_value;  // filled in when unset; none: left unset
  std::string_view accepted;                      // the rule, for people
};

// Every known variable, in a fixed order (the order of reports).
std::span<const Rule> rules();
// The rule for `name`; nullptr for a variable the rules do not cover.
const Rule* find_rule(std::string_view name);

using Environment = std::map<std::string, std::string>;

// A variable that changes a run's numbers but has no one deterministic value:
// compared runs must agree on it (set it the same way, or leave it unset in
// both). `dtrace env` lists these beside the rules; nothing validates them.
struct Advisory {
  std::string_view name;
  std::string_view why;  // what it changes, for people
};
std::span<const Advisory> advisories();

// The verdict on one variable.
struct Check {
  std::string name;
  std::optional<std::string> value;  // in force: as set, or the default; nullopt: unset, no default
  bool defaulted = false;            // unset, so `value` is the default
  bool valid = true;
  // Why not valid, reading on from the assignment: "NCCL_ALGO=Tree, whose
  // reduction order is not fixed (...)".
  std::string reason;
};

// One Check per known variable, in rules() order. A variable counts as set when
// `env` has it, even with an empty value (an empty value is judged like any other).
std::vector<Check> validate(const Environment& env);
bool all_valid(const std::vector<Check>& checks);

// Why `value` of `name` is not deterministic on its own, or nullopt when it is
// (or when `name` is not a known variable). Conditions between variables
// (TRITON_CACHE_AUTOTUNING=1 needs TRITON_CACHE_DIR) need the overload with the
// rest of the environment.
std::optional<std::string> why_not_deterministic(std::string_view name, std::string_view value);
std::optional<std::string> why_not_deterministic(std::string_view name, std::string_view value,
                                                 const Environment& env);

struct Applied {
  std::vector<Check> checks;        // validate()'s verdict
  std::vector<std::string> filled;  // variables set to their default, in rules() order
  bool ok() const { return all_valid(checks); }
};

// Fills the default of every unset variable into `env`. When any set value is
// invalid nothing is filled: the caller must stop (checks say why), since a run
// started that way would not be deterministic.
Applied apply(Environment& env);
// The same on this process's environment (setenv). Call it before other
// threads start: the process environment is not thread-safe.
Applied apply();

// The known variables (rules and advisories) set in this process's environment.
Environment process_environment();

// The values in force, for a log header's "env" (dtrace-fp(5)): every known
// variable that has a value, set or defaulted.
std::vector<std::pair<std::string, std::string>> header_env(const std::vector<Check>& checks);

}  // namespace dtrace::determinism
