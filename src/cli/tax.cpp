// `dtrace tax [--arms N] [--json] -- CMD ARGS`.
#include "workflow/tax.hpp"

#include <iostream>

#include "cli/arm_progress.hpp"
#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "report/tax_report.hpp"

namespace dtrace::cli {

void add_tax(CLI::App& app, int& exit_status) {
  struct Args {
    workflow::TaxOptions options;
    double timeout = 0;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "tax",
      "Measure what determinism costs: run the workload with its deterministic kernels\n"
      "(DTRACE_DETERMINISTIC=1) and its fast ones (DTRACE_DETERMINISTIC=0), N arms each,\n"
      "interleaved, and report each mode's median step time, the overhead and the spread.\n"
      "Step times come from the workload's \"io\":\"timing\" records named step_seconds.\n"
      "Exit status: 0 measured, 2 trouble.");
  cmd->add_option("--arms", args->options.arms, "arms per mode (default 3)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--keep", args->options.keep, "keep the arms' runs in this new directory");
  cmd->add_option("--timeout", args->timeout, "seconds each arm may run (default: no limit)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "print one JSON document on stdout");
  cmd->add_option("CMD", args->options.command, "the workload and its arguments (after --)")
      ->required();
  cmd->callback([args, &exit_status] {
    workflow::TaxOptions options = args->options;
    if (args->timeout > 0) options.timeout_s = args->timeout;
    auto report = workflow::measure_tax(options, log_arm);
    if (!report) throw Failure(report.error().message);
    if (args->json) {
      std::cout << report::tax_to_json(*report).dump(2) << "\n";
    } else {
      std::cout << report::tax_to_text(*report);
    }
    exit_status = kExitSame;
  });
}

}  // namespace dtrace::cli
