#include "workflow/arm.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "log/reader.hpp"
#include "replay/runner.hpp"

namespace dtrace::workflow {

namespace fs = std::filesystem;

namespace {

// The last non-empty line of what the arm wrote to stderr: a workload's own
// error message is usually there, and one line keeps dtrace's error one line.
std::string last_line(const std::string& text) {
  std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return {};
  const std::size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

std::string quoted(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789-_./:=,+@%^") == std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

Result<std::unique_ptr<Workspace>> Workspace::create(const std::string& keep) {
  if (keep.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = (fs::path(tmp && *tmp ? tmp : "/tmp") / "dtrace-arms.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Error{"cannot create a temporary directory " + pattern};
    }
    return std::unique_ptr<Workspace>(new Workspace(pattern, false));
  }
  std::error_code ec;
  if (fs::exists(keep, ec)) {
    return Error{"--keep " + keep +
                 ": exists; give a new directory (arms of an earlier run "
                 "must not mix in)"};
  }
  if (!fs::create_directories(keep, ec) || ec) {
    return Error{"--keep " + keep + ": cannot create directory" +
                 (ec ? ": " + ec.message() : std::string())};
  }
  return std::unique_ptr<Workspace>(
      new Workspace(fs::absolute(keep).lexically_normal().string(), true));
}

Workspace::~Workspace() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);  // best effort: nothing to report to at destruction
}

ArmPlan Workspace::plan(const std::string& label, const std::vector<std::string>& argv,
                        const std::string& checkpoints, const Variables& extra) const {
  ArmPlan plan;
  plan.label = label;
  plan.argv = argv;
  plan.run_dir = (fs::path(path_) / label).string();
  plan.env.emplace_back("DTRACE_RUN_DIR", plan.run_dir);
  plan.env.emplace_back("DTRACE_CHECKPOINT_DIR",
                        (fs::path(path_) / "checkpoints" / checkpoints).string());
  plan.env.insert(plan.env.end(), extra.begin(), extra.end());
  return plan;
}

Result<Arm> run_arm(const ArmPlan& plan, double timeout_s) {
  replay::Command command;
  command.argv = plan.argv;
  command.env = plan.env;
  // An arm is a training run: replay variables left in the user's shell (a
  // DTRACE_OUT from an earlier experiment) would turn it into a replay that
  // writes no run. Empty counts as unset (dtrace-replay/1).
  for (const char* name :
       {"DTRACE_OUT", "DTRACE_OUT_DIR", "DTRACE_REPLAY_STEP", "DTRACE_CAPTURE", "DTRACE_ISOLATE",
        "DTRACE_OCCURRENCE", "DTRACE_INPUTS", "DTRACE_REPEAT", "DTRACE_STOP_AT", "DTRACE_RESUME_AT"}) {
    const bool planned =
        std::ranges::any_of(plan.env, [name](const auto& v) { return v.first == name; });
    if (!planned && std::getenv(name) != nullptr) command.env.emplace_back(name, "");
  }
  command.timeout_s = timeout_s;
  // Each process of an arm started through a launcher leaves its rank's status
  // beside its log (dtrace-replay/1.1): a failed rank stops the arm at once.
  command.rank_dir = plan.run_dir;
  // What a launcher killed mid-run leaves in TMPDIR goes with the workspace.
  const std::string tmp = (fs::path(plan.run_dir).parent_path() / "tmp").string();
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (!ec) command.env.emplace_back("TMPDIR", tmp);
  auto outcome = replay::run(command);
  if (!outcome) return Error{"arm " + plan.label + ": " + outcome.error().message};
  if (!outcome->ok()) {
    std::string message = "arm " + plan.label + " failed (" + outcome->describe() + ")";
    if (const std::string said = last_line(outcome->relevant_stderr()); !said.empty()) {
      message += ": " + said;
    } else if (!outcome->faults.empty()) {
      message += ": " + outcome->relevant_stderr_label();
      if (const std::string launcher = last_line(outcome->stderr_tail); !launcher.empty()) {
        message += "; " + outcome->command_stderr_label() + " ends with: " + launcher;
      }
    }
    return Error{message};
  }
  if (!log::list_run_files(plan.run_dir)) {
    return Error{"arm " + plan.label + " wrote no log in " + plan.run_dir +
                 ": the workload must write its run to DTRACE_RUN_DIR (dtrace's recorder does)"};
  }
  return Arm{plan, outcome->seconds};
}

std::string command_line(const ArmPlan& plan) {
  std::string line;
  for (const auto& [name, value] : plan.env) line += name + "=" + quoted(value) + " ";
  for (std::size_t i = 0; i < plan.argv.size(); ++i) {
    if (i > 0) line += ' ';
    line += quoted(plan.argv[i]);
  }
  return line;
}

}  // namespace dtrace::workflow
