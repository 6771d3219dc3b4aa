#include "bisect/session.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "replay/runner.hpp"

namespace dtrace::bisect {

namespace fs = std::filesystem;

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::named: return "named";
    case Verdict::restore: return "restore";
    case Verdict::not_reproduced: return "not-reproduced";
    case Verdict::not_localized: return "not-localized";
    case Verdict::diverged_earlier: return "diverged-earlier";
  }
  return "unknown";
}

std::string_view basis_name(Basis basis) {
  switch (basis) {
    case Basis::confirmed: return "confirmed";
    case Basis::layer_repetitions: return "layer-repetitions";
    case Basis::step_replays: return "step-replays";
  }
  return "unknown";
}

Session::Session(const Options& opts, const Progress& progress, const StageNote& note, Report& rep)
    : options(opts), report(rep), progress_(progress), note_(note) {}

Session::~Session() {
  if (remove_ && !workdir_.empty()) {
    std::error_code ec;
    fs::remove_all(workdir_, ec);
  }
}

Result<void> Session::open_workdir() {
  std::error_code ec;
  if (options.keep) {
    workdir_ = *options.keep;
    if (fs::exists(workdir_, ec) && !fs::is_empty(workdir_, ec)) {
      return Error{*options.keep + ": --keep needs a new or empty directory"};
    }
    fs::create_directories(workdir_, ec);
    if (ec) return Error{*options.keep + ": cannot create: " + ec.message()};
    workdir_ = fs::absolute(workdir_, ec).string();
    return {};
  }
  std::string templ = (fs::temp_directory_path(ec) / "dtrace-bisect-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) return Error{"cannot create a temporary directory"};
  workdir_ = templ;
  remove_ = true;
  return {};
}

Result<void> Session::replay(const std::string& stage, const Side& side, const Variables& variables,
                             const std::optional<Target>& target) {
  Replay record;
  record.stage = stage;
  record.side = side.name;
  record.argv = side.argv;
  record.env = variables;
  if (progress_) progress_(record, false);
  replay::Command command;
  command.argv = side.argv;
  command.env = side.env;
  command.env.insert(command.env.end(), variables.begin(), variables.end());
  command.cwd = side.cwd;
  command.timeout_s = options.timeout_s;
  auto outcome = options.runner ? options.runner(command) : replay::run(command);
  if (!outcome) return Error{"replay of run " + std::string(1, side.name) + " (" + stage + "): " +
                             outcome.error().message};
  record.seconds = outcome->seconds;
  record.exit = outcome->exit_code;
  record.outcome = outcome->describe();
  report.replays.push_back(record);
  if (progress_) progress_(record, true);
  if (!outcome->ok()) {
    std::string message = "replay of run " + std::string(1, side.name) + " (" + stage + ") failed: " +
                          outcome->describe();
    if (!outcome->stderr_tail.empty()) message += "; its stderr ends with:\n" + outcome->stderr_tail;
    return Error{message};
  }
  if (auto r = check_replay_log(stage, side, variables); !r) return r;
  auto complied = check_compliance("replay of run " + std::string(1, side.name) + " (" + stage + ")", side,
                                   report.rank, variables, target);
  if (!complied) noncompliant_ = true;
  return complied;
}

// A replay that exits 0 must have written a log to DTRACE_OUT that opens as a
// dtrace-fp/1 run; saying so here names the workload as the culprit, where a
// later read would only name a temporary file that is gone by then.
Result<void> Session::check_replay_log(const std::string& stage, const Side& side,
                                       const Variables& variables) const {
  const auto out = std::find_if(variables.begin(), variables.end(),
                                [](const auto& v) { return v.first == "DTRACE_OUT"; });
  if (out == variables.end()) return {};
  const std::string who = "replay of run " + std::string(1, side.name) + " (" + stage + ")";
  std::error_code ec;
  if (!fs::exists(out->second, ec) || fs::file_size(out->second, ec) == 0 || ec) {
    return Error{who + " exited 0 but wrote nothing to DTRACE_OUT; does the workload speak dtrace-replay/1?"};
  }
  if (auto reader = log::RunReader::open(out->second); !reader) {
    return Error{who + " wrote a log dtrace cannot read: " + reader.error().message};
  }
  return {};
}

Variables isolation_variables(const std::string& step, const std::string& scope, const std::string& isolate,
                              int occurrence, const std::string& inputs, int k, const std::string& out) {
  Variables v{{"DTRACE_REPLAY_STEP", step}, {"DTRACE_LEVEL", "kernel"}, {"DTRACE_SCOPE", scope},
              {"DTRACE_ISOLATE", isolate}};
  if (occurrence > 0) v.emplace_back("DTRACE_OCCURRENCE", std::to_string(occurrence));
  v.insert(v.end(), {{"DTRACE_INPUTS", inputs}, {"DTRACE_REPEAT", std::to_string(k)}, {"DTRACE_OUT", out}});
  return v;
}

Result<std::optional<LoadedStep>> load_step(const std::string& path, std::int32_t rank,
                                            std::int64_t step) {
  auto reader = log::RunReader::open(path);
  if (!reader) return reader.error();
  while (true) {
    auto next = (*reader)->next();
    if (!next) return next.error();
    if (!*next) return std::optional<LoadedStep>{};
    if ((*next)->rank == rank && (*next)->step == step &&
        (*next)->status == log::StepStatus::complete) {
      return std::optional<LoadedStep>{LoadedStep{std::move(*reader), std::move(**next)}};
    }
  }
}

Result<LoadedSteps> load_steps(const std::string& path, std::int32_t rank) {
  auto reader = log::RunReader::open(path);
  if (!reader) return reader.error();
  LoadedSteps out;
  while (true) {
    auto next = (*reader)->next();
    if (!next) return next.error();
    if (!*next) break;
    if ((*next)->rank == rank && (*next)->status == log::StepStatus::complete) {
      out.steps.push_back(std::move(**next));
    }
  }
  std::sort(out.steps.begin(), out.steps.end(),
            [](const log::Step& x, const log::Step& y) { return x.step < y.step; });
  out.reader = std::move(*reader);
  return out;
}

}  // namespace dtrace::bisect
