// `dtrace tax [--arms N] [--json] -- CMD ARGS`.
#include "workflow/tax.hpp"

#include <iostream>

#include "cli/arms.hpp"
#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "report/tax_report.hpp"

namespace dtrace::cli {

void add_tax(CLI::App& app, int& exit_status) {
  struct Args {
    workflow::TaxOptions options;
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
  add_arm_options(*cmd, args->options.keep, args->options.timeout_s, args->json,
                  args->options.command);
  cmd->callback([args, &exit_status] {
    auto report = workflow::measure_tax(args->options, log_arm);
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
