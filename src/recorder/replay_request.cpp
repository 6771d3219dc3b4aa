// Reading the replay protocol's variables (dtrace-replay/1, dtrace-fp(5)).
//
// Every value is checked here, once, at start-up: a replay that dtrace started
// with a value the workload misreads would record the wrong thing and send the
// bisection the wrong way, so a bad value is a RecorderError that names the
// variable and the value rather than a silent fallback. An empty value counts as
// unset, the way launchers clear a variable (`DTRACE_OUT= prog`). Variables this
// recorder does not know are ignored, as the protocol asks.
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "dtrace/recorder.hpp"

namespace dtrace {

namespace {

using Variables = std::map<std::string, std::string>;

constexpr const char* kVariables[] = {
    "DTRACE_OUT",     "DTRACE_REPLAY_STEP", "DTRACE_LEVEL",  "DTRACE_SCOPE",
    "DTRACE_CAPTURE", "DTRACE_ISOLATE",     "DTRACE_INPUTS", "DTRACE_REPEAT",
    "DTRACE_OCCURRENCE", "DTRACE_FAST_FORWARD",
    // dtrace-replay/1.1: several processes, one replay.
    "DTRACE_OUT_DIR",
    // dtrace-replay/1.3: pinned ops.
    "DTRACE_PIN",
    // dtrace's workflow extensions (dtrace verify, dtrace tax).
    "DTRACE_RUN_DIR", "DTRACE_CHECKPOINT_DIR", "DTRACE_STOP_AT", "DTRACE_RESUME_AT",
    "DTRACE_DETERMINISTIC",
};

constexpr std::string_view kIsolateSeparator = "::";

std::optional<std::string> lookup(const Variables& variables, const char* name) {
  auto it = variables.find(name);
  if (it == variables.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

[[noreturn]] void reject(std::string_view name, std::string_view value, std::string_view why) {
  std::string message(name);
  message += '=';
  message += value;
  message += ": ";
  message += why;
  throw RecorderError(message, RecorderError::Kind::environment);
}

// The whole text as a decimal integer: "12abc", "+3", " 3" and overflow are not.
std::optional<std::int64_t> parse_integer(std::string_view text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [stop, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || stop != end) return std::nullopt;
  return value;
}

std::string normal_path(const std::string& path) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) return path;
  return absolute.lexically_normal().string();
}

// Splits DTRACE_ISOLATE at its first "::": op names may contain "::"
// themselves ("aten::mm"); scopes are '/'-separated and do not.
std::pair<std::string_view, std::string_view> split_isolate(std::string_view text) {
  const std::size_t at = text.find(kIsolateSeparator);
  if (at == std::string_view::npos) return {text, {}};
  return {text.substr(0, at), text.substr(at + kIsolateSeparator.size())};
}

std::int64_t step_variable(const char* name, const std::string& text) {
  auto step = parse_integer(text);
  if (!step || *step < 1) reject(name, text, "not a step number (an integer >= 1)");
  return *step;
}

// The variables dtrace verify and dtrace tax start a training run with. They
// steer a training run, so a replay (which must not touch the run's directory
// or checkpoints) refuses them; DTRACE_DETERMINISTIC alone is a property of the
// configuration and may reach a replay through the environment.
void read_workflow_variables(const Variables& variables, ReplayRequest& request) {
  request.run_dir = lookup(variables, "DTRACE_RUN_DIR");
  request.checkpoint_dir = lookup(variables, "DTRACE_CHECKPOINT_DIR");
  if (auto text = lookup(variables, "DTRACE_STOP_AT")) {
    request.stop_at = step_variable("DTRACE_STOP_AT", *text);
  }
  if (auto text = lookup(variables, "DTRACE_RESUME_AT")) {
    request.resume_at = step_variable("DTRACE_RESUME_AT", *text);
  }
  if (auto text = lookup(variables, "DTRACE_DETERMINISTIC")) {
    if (*text != "0" && *text != "1") {
      reject("DTRACE_DETERMINISTIC", *text, "not 0 (fast kernels) or 1 (deterministic kernels)");
    }
    request.deterministic = *text == "1";
  }
  if (request.stop_at && request.resume_at && *request.stop_at <= *request.resume_at) {
    reject("DTRACE_STOP_AT", std::to_string(*request.stop_at),
           "not after DTRACE_RESUME_AT=" + std::to_string(*request.resume_at) +
               " (a resumed run can only stop later than it starts)");
  }
  if (request.is_replay()) {
    const char* replay = request.step ? "DTRACE_REPLAY_STEP" : "DTRACE_ISOLATE";
    for (const char* name :
         {"DTRACE_RUN_DIR", "DTRACE_CHECKPOINT_DIR", "DTRACE_STOP_AT", "DTRACE_RESUME_AT"}) {
      if (auto text = lookup(variables, name)) {
        reject(name, *text,
               std::string("steers a training run; a replay (") + replay +
                   ") never writes the run directory or checkpoints");
      }
    }
  }
}

}  // namespace

ReplayRequest ReplayRequest::from_environment() {
  Variables variables;
  for (const char* name : kVariables) {
    if (const char* value = std::getenv(name)) variables.emplace(name, value);
  }
  return from_variables(variables);
}

ReplayRequest ReplayRequest::from_variables(const Variables& variables) {
  ReplayRequest request;
  request.out = lookup(variables, "DTRACE_OUT");
  request.out_dir = lookup(variables, "DTRACE_OUT_DIR");

  if (auto text = lookup(variables, "DTRACE_REPLAY_STEP")) {
    auto step = parse_integer(*text);
    if (!step || *step < 0)
      reject("DTRACE_REPLAY_STEP", *text, "not a step number (an integer >= 0)");
    request.step = *step;
  }

  if (auto text = lookup(variables, "DTRACE_FAST_FORWARD")) {
    if (*text != "step") reject("DTRACE_FAST_FORWARD", *text, "not \"step\" (the level fast-forwarded steps are recorded at)");
    request.record_fast_forward = true;
  }

  if (auto text = lookup(variables, "DTRACE_LEVEL")) {
    request.level = parse_level(*text);
    if (!request.level) reject("DTRACE_LEVEL", *text, "not one of step, layer, kernel");
  }

  request.scope = lookup(variables, "DTRACE_SCOPE").value_or("");
  request.capture = lookup(variables, "DTRACE_CAPTURE");
  request.inputs = lookup(variables, "DTRACE_INPUTS");

  if (auto text = lookup(variables, "DTRACE_REPEAT")) {
    auto repeat = parse_integer(*text);
    if (!repeat || *repeat < 1 || *repeat > std::numeric_limits<int>::max()) {
      reject("DTRACE_REPEAT", *text, "not a repetition count (an integer >= 1)");
    }
    request.repeat = static_cast<int>(*repeat);
  }

  if (auto text = lookup(variables, "DTRACE_ISOLATE")) {
    auto [scope, op] = split_isolate(*text);
    if (scope.empty())
      reject("DTRACE_ISOLATE", *text, "no scope before '::' (want scope or scope::op)");
    if (text->size() > scope.size() && op.empty()) {
      reject("DTRACE_ISOLATE", *text, "no op after '::' (want scope or scope::op)");
    }
    if (!request.inputs) {
      reject("DTRACE_ISOLATE", *text,
             "needs DTRACE_INPUTS, the capture directory to take the inputs from");
    }
    request.isolate = *text;
    if (auto occurrence = lookup(variables, "DTRACE_OCCURRENCE")) {
      auto value = parse_integer(*occurrence);
      if (!value || *value < 0 || *value > std::numeric_limits<int>::max()) {
        reject("DTRACE_OCCURRENCE", *occurrence, "not a call number (an integer >= 0, 0 the first call)");
      }
      request.isolate_occurrence = static_cast<int>(*value);
    }
  } else if (auto occurrence = lookup(variables, "DTRACE_OCCURRENCE")) {
    reject("DTRACE_OCCURRENCE", *occurrence,
           "only meaningful with DTRACE_ISOLATE (it names which call of the isolated op to run)");
  } else if (request.inputs) {
    reject("DTRACE_INPUTS", *request.inputs, "only meaningful with DTRACE_ISOLATE");
  } else if (request.repeat != 1) {
    reject("DTRACE_REPEAT", std::to_string(request.repeat),
           "only meaningful with DTRACE_ISOLATE (repetitions re-run an isolated scope)");
  }

  // A pin replaces an op's outputs inside the replayed step or the
  // repetitions: a training run has neither.
  request.pin = lookup(variables, "DTRACE_PIN");
  if (request.pin && !request.is_replay()) {
    reject("DTRACE_PIN", *request.pin,
           "only meaningful with DTRACE_REPLAY_STEP or DTRACE_ISOLATE (it pins ops of the replayed step)");
  }

  read_workflow_variables(variables, request);

  if (request.capture && request.inputs &&
      normal_path(*request.capture) == normal_path(*request.inputs)) {
    reject("DTRACE_CAPTURE", *request.capture,
           "is also DTRACE_INPUTS: a replay cannot capture into the capture it reads");
  }
  if (request.capture && request.pin && normal_path(*request.capture) == normal_path(*request.pin)) {
    reject("DTRACE_CAPTURE", *request.capture,
           "is also DTRACE_PIN: a replay cannot capture into the pins it reads");
  }
  return request;
}

std::string_view ReplayRequest::isolate_scope() const {
  if (!isolate) return {};
  return split_isolate(*isolate).first;
}

std::string_view ReplayRequest::isolate_op() const {
  if (!isolate) return {};
  return split_isolate(*isolate).second;
}

}  // namespace dtrace
