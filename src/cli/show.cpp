// `dtrace show RUN [--step N | --steps A-B] [--rank R] [--json]`: what a run holds.
#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/numbers.hpp"
#include "log/summary.hpp"
#include "report/show_report.hpp"

namespace dtrace::cli {

void add_show(CLI::App& app, int& exit_status) {
  struct Options {
    std::string run;
    std::optional<std::int64_t> step;
    std::optional<std::int32_t> rank;
    bool json = false;
    std::string steps;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "show",
      "Summarize a run: header, files, ranks, steps per rank, record counts,\n"
      "completeness and the reader's notes. With --step and/or --rank also print\n"
      "the selected records in seq order (one line each: seq scope op io name dtype\n"
      "shape hash|bits value, and \", call K of N\" for a call of a repeated op).\n"
      "A run is a directory of *.jsonl files or one .jsonl file.\n"
      "Exit status: 0 shown, 2 trouble (unreadable or malformed run, with file:line).");
  cmd->add_option("RUN", options->run, "the run")->required();
  cmd->add_option("--step", options->step, "also print the records of step N")
      ->check(step_number());
  cmd->add_option("--steps", options->steps, "also print the records of the steps in this window: A-B, A- or A")
      ->check(step_range())
      ->excludes("--step");
  cmd->add_option("--rank", options->rank, "also print the records of rank R")
      ->check(rank_number());
  cmd->add_flag("--json", options->json, "print one JSON document on stdout (its schema: man dtrace, JSON OUTPUT)");
  cmd->callback([options, &exit_status] {
    allow_many_files();
    log::Selection selection{options->step, options->rank, {}};
    if (!options->steps.empty()) selection.steps = parse_step_range(options->steps);
    auto summary = log::summarize_run(options->run, selection);
    if (!summary) throw Failure(summary.error().message);
    if (options->json) {
      std::cout << report::show_to_json(*summary).dump(2) << "\n";
    } else {
      std::cout << report::show_to_text(*summary);
    }
    exit_status = kExitSame;
  });
}

}  // namespace dtrace::cli
