// `dtrace replicas RUN [--groups GROUPS] [--json]` (dtrace(1), replicas).
#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "replicas/replicas.hpp"
#include "report/replicas_report.hpp"

namespace dtrace::cli {

void add_replicas(CLI::App& app, int& exit_status) {
  struct Options {
    std::string run;
    std::string groups;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "replicas",
      "Check that the data-parallel replicas of one run agree, with no reference run:\n"
      "parameters and optimizer state (step-scope state records but the per-rank ones,\n"
      "rng and data by default), the gradients the optimizer steps with (op grads) and\n"
      "all-reduce outputs, compared across the ranks of each replica group, step by step.\n"
      "Names each group's first departing step, record (file:line) and rank: the\n"
      "minority, or says there is no majority.\n"
      "Exit status: 0 replicas agree, 1 a rank departed, 2 trouble.");
  cmd->add_option("RUN", options->run, "the run")->required();
  cmd->add_option("--groups", options->groups,
                  "replica groups: ranks and ranges separated by ',', groups by ':'\n"
                  "(0-7, or 0,2,4,6:1,3,5,7); default: the header's \"replicas\" field");
  cmd->add_flag("--json", options->json, "print one JSON document on stdout (its schema: man dtrace, JSON OUTPUT)");
  cmd->callback([options, &exit_status] {
    allow_many_files();
    std::optional<std::string> groups;
    if (!options->groups.empty()) groups = options->groups;
    auto report = replicas::check_run(options->run, groups);
    if (!report) throw Failure(report.error().message);
    if (options->json) {
      std::cout << report::replicas_to_json(*report).dump(2) << "\n";
    } else {
      std::cout << report::replicas_to_text(*report);
    }
    exit_status = report->departed() ? kExitDifferent : kExitSame;
  });
}

}  // namespace dtrace::cli
