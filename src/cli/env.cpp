// `dtrace env [--check] [--exports] [--json]`: the deterministic environment
// (dtrace(1), env) as this shell has it.
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "dtrace/determinism.hpp"
#include "report/env_report.hpp"

namespace dtrace::cli {

void add_env(CLI::App& app, int& exit_status) {
  struct Options {
    bool check = false;
    bool exports = false;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "env",
      "Show the determinism-relevant environment: each variable Megatron Core validates,\n"
      "its value in force (set, or the default filled when unset) and whether it is\n"
      "accepted, then variables that change the numbers without a rule.\n"
      "A set but invalid value is never replaced. Exit status: 0, or with --check 1 when\n"
      "a value is invalid; --exports prints `export` lines with the defaults filled, and\n"
      "refuses (exit 1, nothing on stdout) when a value is invalid.");
  cmd->add_flag("--check", options->check, "exit 1 when a set value is invalid, saying why");
  auto* exports = cmd->add_flag("--exports", options->exports,
                                "print `export NAME=VALUE` lines for a shell: eval \"$(dtrace env "
                                "--exports)\"");
  cmd->add_flag("--json", options->json, "print one JSON document on stdout (its schema: man dtrace, JSON OUTPUT)")->excludes(exports);
  cmd->callback([options, &exit_status] {
    const auto env = determinism::process_environment();
    const auto checks = determinism::validate(env);
    const bool valid = determinism::all_valid(checks);
    if (options->exports) {
      if (!valid) {
        for (const auto& check : checks) {
          if (!check.valid) spdlog::error("{}", check.reason);
        }
        spdlog::error("no exports: a set value is invalid (fix or unset it)");
        exit_status = kExitDifferent;
        return;
      }
      std::cout << report::env_exports(checks);
      return;
    }
    if (options->json) {
      std::cout << report::env_to_json(env).dump(2) << "\n";
    } else {
      std::cout << report::env_to_text(env);
    }
    if (options->check && !valid) exit_status = kExitDifferent;
  });
}

}  // namespace dtrace::cli
