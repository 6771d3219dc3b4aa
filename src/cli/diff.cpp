// `dtrace diff RUN_A RUN_B [--json] [--stream] [--steps A-B]` (dtrace(1), diff).
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/numbers.hpp"
#include "cli/state.hpp"
#include "diff/diff.hpp"
#include "report/diff_report.hpp"

namespace dtrace::cli {

void add_diff(CLI::App& app, int& exit_status) {
  struct Options {
    std::string run_a, run_b;
    bool json = false;
    bool stream = false;
    std::string steps;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "diff",
      "Compare two runs' fingerprint logs and report where they first diverge.\n"
      "A run is a directory of *.jsonl files or one .jsonl file.\n"
      "Exit status: 0 identical over the compared steps, 1 diverged, 2 trouble.");
  cmd->add_option("RUN_A", options->run_a, "the first run")->required();
  cmd->add_option("RUN_B", options->run_b, "the second run")->required();
  cmd->add_flag("--json", options->json, "print one JSON document on stdout (its schema: man dtrace, JSON OUTPUT)");
  cmd->add_flag("--stream", options->stream,
                "read every record of both runs, even when both carry chained step digests\n"
                "(by default those are searched, and only the differing steps are read)");
  cmd->add_option("--steps", options->steps, "compare only the steps in this window: A-B, A- or A")
      ->check(step_range());
  cmd->callback([options, &exit_status] {
    allow_many_files();
    diff::DiffOptions diff_options;
    diff_options.stream = options->stream;
    if (!options->steps.empty()) {
      std::tie(diff_options.steps.first, diff_options.steps.last) = parse_step_range(options->steps);
    }
    auto report = diff::diff_runs(options->run_a, options->run_b, diff_options);
    if (!report) {
      forget_last_diff();
      throw Failure(report.error().message);
    }
    if (options->json) {
      std::cout << report::diff_to_json(*report).dump(2) << "\n";
    } else {
      std::cout << report::diff_to_text(*report);
    }
    save_last_diff(*report);
    exit_status = report->diverged() ? kExitDifferent : kExitSame;
  });
}

}  // namespace dtrace::cli
