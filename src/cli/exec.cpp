// `dtrace exec -- CMD ARGS`: runs CMD with the deterministic environment, as
// env(1) would: the defaults of unset variables filled, CMD in our place
// (same pid, stdin, stdout), its exit status ours. A set but invalid value is
// refused without running CMD, because a run started that way is not
// deterministic and nothing downstream would say so.
#include "replay/exec.hpp"

#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "dtrace/determinism.hpp"

namespace dtrace::cli {

namespace {

// env(1)'s statuses, since CMD's own statuses pass through unchanged.
constexpr int kExitRefused = 125;
constexpr int kExitCannotRun = 126;
constexpr int kExitNotFound = 127;

}  // namespace

void add_exec(CLI::App& app, int& exit_status) {
  auto command = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "exec",
      "Run CMD with the deterministic environment: unset variables get their defaults\n"
      "(NCCL_ALGO=Ring, NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, CUBLAS_WORKSPACE_CONFIG=:4096:8).\n"
      "A set but invalid value is refused without running CMD (see dtrace env).\n"
      "Exit status: CMD's; 125 refused, 126 CMD cannot run, 127 CMD not found.");
  cmd->add_option("CMD", *command, "the command and its arguments (after --)")->required();
  cmd->callback([command, &exit_status] {
    const auto applied = determinism::apply();
    if (!applied.ok()) {
      for (const auto& check : applied.checks) {
        if (!check.valid) spdlog::error("{}", check.reason);
      }
      spdlog::error(
          "not running {}: the environment is not deterministic (fix or unset the "
          "variables above)",
          command->front());
      exit_status = kExitRefused;
      return;
    }
    const auto failure = replay::replace_process(*command);
    spdlog::error("{}", failure.message);
    exit_status = failure.not_found ? kExitNotFound : kExitCannotRun;
  });
}

}  // namespace dtrace::cli
