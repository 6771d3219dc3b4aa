// `dtrace check RUN [--json]`: certifies a run before anyone trusts a diff of it.
#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "log/certify.hpp"
#include "report/check_report.hpp"

namespace dtrace::cli {

void add_check(CLI::App& app, int& exit_status) {
  struct Options {
    std::string run;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Certify a run before trusting a diff of it: every rank 0..world_size-1\n"
      "present with the same steps, seq strictly increasing within each rank and\n"
      "step, every step ended with the right count, no record written twice, headers\n"
      "that agree between files, a known hash algorithm. Each violation is listed\n"
      "with file:line where one applies.\n"
      "Exit status: 0 certified, 1 violations, 2 unreadable (with file:line).");
  cmd->add_option("RUN", options->run, "the run")->required();
  cmd->add_flag("--json", options->json, "print one JSON document on stdout (its schema: man dtrace, JSON OUTPUT)");
  cmd->callback([options, &exit_status] {
    allow_many_files();
    auto certification = log::certify_run(options->run);
    if (!certification) throw Failure(certification.error().message);
    if (options->json) {
      std::cout << report::check_to_json(*certification).dump(2) << "\n";
    } else {
      std::cout << report::check_to_text(*certification);
    }
    exit_status = certification->certified() ? kExitSame : kExitDifferent;
  });
}

}  // namespace dtrace::cli
