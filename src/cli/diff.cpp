// `dtrace diff RUN_A RUN_B [--json] [--stream] [--steps A-B] [--html FILE]` (dtrace(1), diff).
#include <filesystem>
#include <fstream>
#include <iostream>

#include <spdlog/spdlog.h>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/html_file.hpp"
#include "cli/numbers.hpp"
#include "cli/state.hpp"
#include "diff/diff.hpp"
#include "report/diff_report.hpp"
#include "report/html_report.hpp"

namespace dtrace::cli {

void add_diff(CLI::App& app, int& exit_status) {
  struct Options {
    std::string run_a, run_b;
    bool json = false;
    std::string html;
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
  cmd->add_option("--html", options->html,
                  "also write the divergence as one self-contained HTML page to FILE (man dtrace, HTML REPORT)")
      ->type_name("FILE");
  cmd->add_flag("--stream", options->stream,
                "read every record of both runs, even when both carry chained step digests\n"
                "(by default those are searched, in files whose header declares one rank,\n"
                "and only the differing steps are read)");
  cmd->add_option("--steps", options->steps, "compare only the steps in this window: A-B, A- or A")
      ->check(step_range());
  cmd->callback([options, &exit_status] {
    allow_many_files();
    if (!options->html.empty()) check_html_target(options->html, options->run_a, options->run_b);
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
    // Before anything is printed: a refused path is trouble, with nothing on stdout.
    if (!options->html.empty()) {
      write_html_report(options->html, report::divergence_html(&*report, nullptr), options->run_a, options->run_b);
      spdlog::info("report: {}", options->html);
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
