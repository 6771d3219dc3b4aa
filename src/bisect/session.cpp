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
    case Verdict::fast_forward: return "fast-forward";
    case Verdict::data: return "data";
    case Verdict::generator: return "generator";
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

namespace {

// The last `count` lines of `text`: what a person reads first of a failure.
std::string last_lines(const std::string& text, int count) {
  std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return {};
  std::size_t begin = end + 1;
  for (int i = 0; i < count && begin > 0; ++i) {
    const std::size_t newline = text.rfind('\n', begin - 1);
    begin = newline == std::string::npos ? 0 : newline;
    if (newline == std::string::npos) break;
  }
  if (begin > 0 || text[begin] == '\n') ++begin;
  return text.substr(begin, end + 1 - begin);
}

// Which of a session's requests failed and what it asked (" in request 3 of
// its replay session (step 7, level kernel, scope fwd/layer.1, capture)"):
// the stage alone does not say which of the session's answers the failure
// came after. Empty for a launch (-1), whose variables the progress shows.
std::string session_request(int number, const Variables& variables) {
  if (number < 0) return {};
  const auto value = [&](const char* name) -> std::string {
    const auto it = std::find_if(variables.begin(), variables.end(), [&](const auto& v) { return v.first == name; });
    return it == variables.end() ? std::string() : it->second;
  };
  std::string asked;
  const auto add = [&](const std::string& part) { asked += (asked.empty() ? "" : ", ") + part; };
  if (const std::string isolate = value("DTRACE_ISOLATE"); !isolate.empty()) {
    add("isolate " + isolate);
    if (const std::string call = value("DTRACE_OCCURRENCE"); !call.empty()) add("call " + call);
    if (const std::string repeat = value("DTRACE_REPEAT"); !repeat.empty()) add(repeat + " repetitions");
  } else {
    if (const std::string step = value("DTRACE_REPLAY_STEP"); !step.empty()) add("step " + step);
    if (const std::string level = value("DTRACE_LEVEL"); !level.empty()) add("level " + level);
    if (const std::string scope = value("DTRACE_SCOPE"); !scope.empty()) add("scope " + scope);
    if (!value("DTRACE_CAPTURE").empty()) add("capture");
  }
  return " in request " + std::to_string(number) + " of its replay session" + (asked.empty() ? "" : " (" + asked + ")");
}

}  // namespace

Session::Session(const Options& opts, const Progress& progress, const StageNote& note, Report& rep)
    : options(opts), report(rep), progress_(progress), note_(note) {}

Session::~Session() {
  // The sessions' processes first: they write in the working directory.
  end_sessions();
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
  replay::Command command;
  command.argv = side.argv;
  command.env = side.env;
  command.env.insert(command.env.end(), variables.begin(), variables.end());
  // A step replay records the steps it fast-forwards at step level, so that
  // the restore check can tell a fast-forward that departed from the run from
  // a restore that missed state (man/dtrace-fp.5, DTRACE_FAST_FORWARD).
  const auto has = [&](const char* name) {
    return std::any_of(variables.begin(), variables.end(), [&](const auto& v) { return v.first == name; });
  };
  if (has("DTRACE_REPLAY_STEP") && !has("DTRACE_ISOLATE")) {
    command.env.emplace_back("DTRACE_FAST_FORWARD", "step");
    record.env.emplace_back("DTRACE_FAST_FORWARD", "step");
  }
  command.cwd = side.cwd;
  command.timeout_s = options.timeout_s;
  command.ranks = side.world_size;
  // dtrace-replay/1.1 (man/dtrace-fp.5): the replay's directory, where each
  // process of a job started through a launcher writes its rank's records and
  // status; a one-process workload writes DTRACE_OUT inside it. Either way the
  // directory is read as the replay's output, one run.
  if (const auto dir = std::find_if(variables.begin(), variables.end(),
                                    [](const auto& v) { return v.first == "DTRACE_OUT_DIR"; });
      dir != variables.end()) {
    std::error_code ec;
    fs::create_directories(dir->second, ec);
    if (ec) return Error{dir->second + ": cannot create the replay's directory: " + ec.message()};
    command.env.emplace_back("DTRACE_OUT", dir->second + "/replay.jsonl");
    record.env.emplace_back("DTRACE_OUT", dir->second + "/replay.jsonl");
    command.rank_dir = dir->second;
  }
  record.request = uses_sessions(side);
  if (progress_) progress_(record, false);
  // What a launcher killed mid-replay leaves in TMPDIR goes with the workdir.
  std::error_code ec;
  fs::create_directories(path("tmp"), ec);
  if (!ec) command.env.emplace_back("TMPDIR", path("tmp"));
  auto outcome = record.request ? request(stage, side, command, record) : launch(stage, side, command, record);
  if (outcome && record.request && outcome->unanswered && outcome->faults.empty() &&
      report.launches.at(static_cast<std::size_t>(record.launch)).requests == 1) {
    // Its header says it serves sessions, but the command exited 0 without
    // answering the first request: a program that does not know sessions
    // (--replay naming a wrapper that runs one replay, say). It is launched
    // for every replay instead, this one included, and the report says so.
    launched_instead_.insert(side.name);
    report.launches.at(static_cast<std::size_t>(record.launch)).outcome = outcome->describe();
    const std::string line = "run " + std::string(1, side.name) + "'s replay command exited 0 without answering " +
                             "its replay session's first request: launched for each replay instead";
    report.notes.push_back(line);
    note(stage, line);
    report.replay_mode = uses_sessions(a) || uses_sessions(b) ? "mixed" : "launches";
    report.replay_mode_why = line;
    record.request = false;
    std::error_code ec;  // the launch writes a new log where the request wrote whatever it did
    fs::remove_all(command.rank_dir, ec);
    fs::create_directories(command.rank_dir, ec);
    outcome = launch(stage, side, command, record);
  }
  if (outcome && record.request && outcome->declined) {
    // The session declined the request (it needs a fresh process, say): the
    // same variables are launched, which the checks below hold to what they
    // hold any replay to, and the session stays for the side's next requests.
    Launch::Declined declined{record.launch, outcome->request, *outcome->declined};
    report.launches.at(static_cast<std::size_t>(record.launch)).outcome = outcome->describe();
    note(stage, "run " + std::string(1, side.name) + "'s replay session declined request " +
                    std::to_string(declined.request) + " (" + declined.reason + "): launched instead");
    record.request = false;
    std::error_code ec;  // the launch writes a new log where the request wrote whatever it did
    fs::remove_all(command.rank_dir, ec);
    fs::create_directories(command.rank_dir, ec);
    outcome = launch(stage, side, command, record);
    report.launches.at(static_cast<std::size_t>(record.launch)).declined = std::move(declined);
  }
  if (!outcome) return Error{"replay of run " + std::string(1, side.name) + " (" + stage + "): " +
                             outcome.error().message};
  record.seconds = outcome->seconds;
  record.exit = outcome->exit_code;
  record.outcome = outcome->describe();
  Launch& launched = report.launches.at(static_cast<std::size_t>(record.launch));
  launched.outcome = record.outcome;
  if (!record.request) launched.seconds = record.seconds;
  report.replays.push_back(record);
  if (progress_) progress_(record, true);
  if (!outcome->ok()) {
    std::string message = "replay of run " + std::string(1, side.name) + " (" + stage + ") failed" +
                          session_request(outcome->request, variables) + ": " + outcome->describe();
    // A failed rank's own stderr, or that it has none; then the launcher's,
    // named as the launcher's (torchrun's, when the ranks' go to it).
    if (const std::string said = last_lines(outcome->relevant_stderr(), 10); !said.empty()) {
      message += "; " + outcome->relevant_stderr_label() + " ends with:\n" + said;
    } else if (!outcome->faults.empty()) {
      message += "; " + outcome->relevant_stderr_label();
    }
    if (!outcome->faults.empty() && outcome->faults.front().stderr_tail.empty()) {
      if (const std::string said = last_lines(outcome->stderr_tail, 10); !said.empty()) {
        message += "; " + outcome->command_stderr_label() + " ends with:\n" + said;
      }
    }
    return Error{message};
  }
  if (auto r = check_replay_log(stage, side, variables); !r) return r;
  auto complied = check_compliance("replay of run " + std::string(1, side.name) + " (" + stage + ")", side,
                                   report.rank, variables, target);
  if (!complied) {
    noncompliant_ = true;
    return complied;
  }
  if (has("DTRACE_REPLAY_STEP") && !has("DTRACE_ISOLATE") && !command.rank_dir.empty()) {
    // A request is named by its number in its session, as a failure names
    // it: that is what tells a session that carries state from one request
    // into the next.
    auto first = first_step_replay_.find(side.name);
    if (first == first_step_replay_.end()) {
      first_step_replay_[side.name] = {command.rank_dir, record.launch, outcome->request, stage};
    } else {
      const FirstReplay& f = first->second;
      const std::string what =
          f.request < 0 ? "its first replay (the " + f.stage + " stage's)"
                        : "request " + std::to_string(f.request) + " of its " +
                              (f.launch == record.launch ? "" : "first ") + "replay session (the " + f.stage +
                              " stage's)";
      auto held = check_held_state(*this, side,
                                   "replay of run " + std::string(1, side.name) + " (" + stage + ")" +
                                       session_request(outcome->request, variables),
                                   command.rank_dir, f.out, what);
      if (!held) {
        noncompliant_ = true;
        return held;
      }
    }
  }
  return {};
}

Result<replay::Outcome> Session::launch(const std::string& stage, const Side& side, const replay::Command& command,
                                        Replay& record) {
  Launch launched;
  launched.side = side.name;
  launched.stage = stage;
  launched.argv = command.argv;
  launched.env = record.env;
  launched.requests = 1;
  record.launch = static_cast<int>(report.launches.size());
  report.launches.push_back(launched);
  return options.runner ? options.runner(command) : replay::run(command);
}

// Starts `side`'s session: the launch carries the side's configuration, the
// step and DTRACE_SESSION (and `like`'s TMPDIR, cwd, timeout); it serves the
// side's requests from then on (served_).
Result<void> Session::start_session(const std::string& stage, const Side& side, const replay::Command& like) {
  Served& served = served_[side.name];
  const int number = static_cast<int>(report.launches.size());
  replay::Command start = like;
  start.argv = side.argv;
  start.cwd = side.cwd;
  start.ranks = side.world_size;
  start.env = side.env;
  const std::string step = std::to_string(report.step);
  start.env.emplace_back("DTRACE_REPLAY_STEP", step);
  for (const auto& [name, value] : like.env) {
    if (name == "TMPDIR") start.env.emplace_back(name, value);
  }
  start.rank_dir.clear();
  const std::string dir = path("session-" + std::string(1, side.name) + "-" + std::to_string(number));
  Launch launched;
  launched.side = side.name;
  launched.stage = stage;
  launched.session = true;
  launched.argv = side.argv;
  launched.env = {{"DTRACE_SESSION", dir}, {"DTRACE_REPLAY_STEP", step}};
  // A fresh session is one a stage asked for; a side's first needs no reason.
  const bool again = std::any_of(report.launches.begin(), report.launches.end(),
                                 [&](const Launch& l) { return l.side == side.name; });
  if (again) launched.why = fresh_why_;
  served.launch.reset();
  auto started = replay::SessionLaunch::start(start, dir, side.world_size);
  if (!started) return started.error();
  served.launch = std::move(*started);
  served.index = report.launches.size();
  served.started = std::chrono::steady_clock::now();
  report.launches.push_back(launched);
  return {};
}

// A request to the side's session, started first when it has none serving
// (man/dtrace-fp.5, "Replay sessions"): the request carries exactly the
// DTRACE_* variables a launch would get. When a side's session starts, the
// other side's starts with it, if that side serves sessions and has none:
// the two start-ups overlap, so a bisect pays one (issue 41; the replays
// themselves stay one at a time, tools/bench/RESULTS.md says why).
Result<replay::Outcome> Session::request(const std::string& stage, const Side& side, const replay::Command& command,
                                         Replay& record) {
  Served& served = served_[side.name];
  if (!served.launch || !served.launch->serving()) {
    if (auto r = start_session(stage, side, command); !r) return r.error();
    const Side& other = side.name == 'A' ? b : a;
    if (&second() != &a && uses_sessions(other) && !served_.contains(other.name)) {
      if (auto r = start_session(stage, other, command); !r) return r.error();
    }
  }
  record.launch = static_cast<int>(served.index);
  auto outcome = served.launch->request(record.env, command.rank_dir, command.timeout_s);
  Launch& launched = report.launches.at(served.index);
  ++launched.requests;
  launched.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - served.started).count();
  return outcome;
}

void Session::fresh_sessions(const std::string& why) {
  end_sessions();
  fresh_why_ = why;
}

// Every session is sent its end request before any is waited for: the
// workloads' exits overlap, as their start-ups do (issue 41).
void Session::end_sessions() {
  for (auto& [name, served] : served_) {
    if (served.launch) served.launch->close();
  }
  served_.clear();
}

// A replay that exits 0 must have written a log to its directory (DTRACE_OUT
// or the ranks' files) that opens as a dtrace-fp/1 run; saying so here names
// the workload as the culprit, where a later read would only name a temporary
// file that is gone by then.
Result<void> Session::check_replay_log(const std::string& stage, const Side& side,
                                       const Variables& variables) const {
  const auto out = std::find_if(variables.begin(), variables.end(),
                                [](const auto& v) { return v.first == "DTRACE_OUT_DIR"; });
  if (out == variables.end()) return {};
  const std::string who = "replay of run " + std::string(1, side.name) + " (" + stage + ")";
  std::error_code ec;
  bool wrote = false;
  for (fs::directory_iterator it(out->second, ec), end; !ec && it != end; it.increment(ec)) {
    wrote = wrote || (it->path().extension() == ".jsonl" && it->is_regular_file(ec) &&
                      fs::file_size(it->path(), ec) > 0);
  }
  if (!wrote) {
    return Error{who + " exited 0 but wrote nothing to DTRACE_OUT (or DTRACE_OUT_DIR/rank<r>.jsonl); "
                       "does the workload speak dtrace-replay/1?"};
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
  v.insert(v.end(), {{"DTRACE_INPUTS", inputs}, {"DTRACE_REPEAT", std::to_string(k)}, {"DTRACE_OUT_DIR", out}});
  return v;
}

Result<diff::Report> Session::diff_replays(const std::string& a, const std::string& b) const {
  diff::DiffOptions options;
  options.steps = {report.step, report.step};
  return diff::diff_runs(a, b, options);
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
  return load_steps_where(path, [rank](const log::Step& step) { return step.rank == rank; });
}

Result<LoadedSteps> load_steps_where(const std::string& path, const std::function<bool(const log::Step&)>& keep) {
  auto reader = log::RunReader::open(path);
  if (!reader) return reader.error();
  LoadedSteps out;
  while (true) {
    auto next = (*reader)->next();
    if (!next) return next.error();
    if (!*next) break;
    if ((*next)->status == log::StepStatus::complete && keep(**next)) {
      out.steps.push_back(std::move(**next));
    }
  }
  std::stable_sort(out.steps.begin(), out.steps.end(),
                   [](const log::Step& x, const log::Step& y) { return x.step < y.step; });
  out.reader = std::move(*reader);
  return out;
}

}  // namespace dtrace::bisect
