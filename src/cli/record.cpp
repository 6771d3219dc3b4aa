// `dtrace record [--out DIR] [--level L] -- CMD ARGS`: records a PyTorch
// program as it is (man/dtrace.1, RECORD). The library (src/record/) builds
// CMD's environment, runs it and reads what it left; this file renders.
#include <limits.h>
#include <stdlib.h>

#include <filesystem>

#include <spdlog/spdlog.h>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "log/summary.hpp"
#include "record/record.hpp"
#include "replay/exec.hpp"
#include "report/record_report.hpp"

namespace dtrace::cli {

namespace {

// A replay that cannot start CMD exits as a shell would (dtrace exec too):
// bisect reports the status of the replay command.
constexpr int kExitCannotRun = 126;
constexpr int kExitNotFound = 127;

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string self_exe() {
  char path[PATH_MAX];
  if (::realpath("/proc/self/exe", path) == nullptr) throw Failure("cannot read /proc/self/exe: where is dtrace?");
  return path;
}

record::PythonDir python_dir(const std::string& self) {
  record::PythonDirChoice choice;
  choice.self_exe = self;
  choice.build_exe = DTRACE_BUILD_EXE;
  choice.build_python = DTRACE_BUILD_PYTHON_DIR;
  choice.installed_python = DTRACE_INSTALLED_PYTHON_DIR;
  if (auto dir = variable("DTRACE_PYTHONPATH"); dir && !dir->empty()) choice.override_dir = dir;
  auto python = record::find_python_dir(choice);
  if (!python) throw Failure(python.error().message);
  return *python;
}

}  // namespace

void add_record(CLI::App& app, int& exit_status) {
  struct Args {
    std::string out;
    std::string level;
    std::vector<std::string> command;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "record",
      "Record a PyTorch program as it is: run CMD with dtrace_torch's automatic recorder loaded\n"
      "in each of its Python processes, every rank's log in DIR/rank<r>.jsonl (see dtrace(1), RECORD).\n"
      "Under a replay request (bisect) it replaces itself with CMD, recording what is asked.\n"
      "Exit status: 0 recorded, 2 CMD failed or recorded nothing, trouble.");
  cmd->add_option("--out", args->out, "the run directory (created; must hold no rank*.jsonl)");
  cmd->add_option("--level", args->level, "the recording's level (DTRACE_LEVEL; default step)")
      ->check(CLI::IsMember({"step", "layer", "kernel"}));
  cmd->add_option("CMD", args->command, "the program and its arguments (after --)")->required();
  cmd->callback([args, cmd, &exit_status] {
    const auto request = record::replay_request(variable);
    if (request) {
      for (const char* option : {"--out", "--level"}) {
        if (cmd->count(option) > 0) {
          throw Failure(std::string(option) + " is the recording's: a replay (" + request->name +
                        " is set) records where and how its request says");
        }
      }
    } else if (args->out.empty()) {
      throw Failure("--out DIR is required: the directory where the run's rank files go");
    }
    const std::string self = self_exe();
    record::EnvironmentPlan plan;
    plan.python = python_dir(self);
    plan.old_python_path = variable("PYTHONPATH");
    plan.self_exe = self;
    plan.command = args->command;
    std::error_code ec;
    plan.cwd = std::filesystem::current_path(ec).string();
    if (ec) throw Failure("cannot read the current directory: " + ec.message());
    plan.level = args->level;
    plan.replay = request.has_value();

    if (plan.replay) {
      // bisect's runner watches CMD's own processes and exit status: dtrace
      // steps aside.
      record::apply(record::environment(plan));
      const auto failure = replay::replace_process(args->command);
      spdlog::error("{}", failure.message);
      exit_status = failure.not_found ? kExitNotFound : kExitCannotRun;
      return;
    }

    auto run_dir = record::prepare_run_dir(args->out);
    if (!run_dir) throw Failure(run_dir.error().message);
    auto notes_dir = record::NotesDir::create();
    if (!notes_dir) throw Failure(notes_dir.error().message);
    plan.run_dir = *run_dir;
    plan.notes_dir = notes_dir->path();
    auto exit = record::run_in_foreground(args->command, record::environment(plan));
    if (!exit) throw Failure(exit.error().message);
    const record::Notes notes = record::read_notes(notes_dir->path());
    for (const std::string& damaged : notes.damaged) spdlog::warn("a note of CMD's processes is ignored: {}", damaged);
    const auto files = record::rank_files(*run_dir);

    if (!exit->ok()) {
      for (const record::Note& note : notes.notes) {
        if (!note.error.empty()) spdlog::error("{}", report::note_error_text(note));
      }
      spdlog::error("{}", report::exit_text(args->command, *exit));
      if (!files.empty()) spdlog::info("what it recorded stays in {}", args->out);
      exit_status = kExitTrouble;
      return;
    }
    if (files.empty()) {
      for (const std::string& line : report::nothing_recorded(args->command, args->out, notes)) {
        spdlog::error("{}", line);
      }
      exit_status = kExitTrouble;
      return;
    }
    for (const record::Note& note : notes.notes) {
      if (!note.error.empty()) spdlog::warn("{}", report::note_error_text(note));
    }
    auto summary = log::summarize_run(*run_dir, {});
    if (!summary) throw Failure("the run " + args->out + " cannot be read: " + summary.error().message);
    for (const std::string& line : report::recorded(*summary, args->out)) spdlog::info("{}", line);
    exit_status = kExitSame;
  });
}

}  // namespace dtrace::cli
