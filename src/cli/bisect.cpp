// `dtrace bisect [--step N] [RUN_A RUN_B] ...` (dtrace(1), bisect).
#include "bisect/bisect.hpp"

#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/html_file.hpp"
#include "cli/numbers.hpp"
#include "cli/state.hpp"
#include "replay/runner.hpp"
#include "diff/diff.hpp"
#include "report/bisect_report.hpp"
#include "report/html_report.hpp"

namespace dtrace::cli {

void add_bisect(CLI::App& app, int& exit_status) {
  struct Args {
    std::vector<std::string> runs;
    std::optional<std::int64_t> step;
    std::optional<std::int32_t> rank;
    int repeat = 3;
    double timeout = 600;
    bool trust = false;
    bool launches = false;
    bool first = false;
    int max_culprits = 5;
    std::string replay;
    std::string keep;
    bool json = false;
    std::string html;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "bisect",
      "Replay the first divergent step finer and finer (layers, then the suspect layer's\n"
      "kernels, then the suspect kernel alone) and name the kernel responsible.\n"
      "Without runs and step it uses those of the last `dtrace diff` in this directory.\n"
      "The replay command comes from the runs' logs: it runs only with --trust, or give it\n"
      "with --replay. Exit status: 0 a kernel (or the restore, the data, or a generator) named,\n"
      "1 not reproduced, not localized, diverged-earlier (the runs already differ before --step\n"
      "and differ in configuration: the report names the earlier step to bisect), or fast-forward (a\n"
      "replay reached --step from an older checkpoint through a step that came out otherwise\n"
      "than in its run: the report names that step to bisect), 2 trouble.");
  cmd->add_option("RUNS", args->runs, "RUN_A RUN_B (default: those of the last diff)")->expected(0, 2);
  cmd->add_option("--step", args->step, "the step to replay (default: the first divergent step)")
      ->check(step_number());
  cmd->add_option("--rank", args->rank, "the rank to follow (default: the rank diff named)")
      ->check(rank_number());
  cmd->add_option("--repeat", args->repeat, "attempts for an intermittent divergence, and repetitions "
                                            "of the isolated layer and kernel (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--timeout", args->timeout, "seconds each replay may run (default 600)")
      ->check(positive_seconds());
  cmd->add_flag("--trust", args->trust, "run the replay command recorded in the runs' logs");
  cmd->add_option("--replay", args->replay, "the command to replay both runs with, instead of the logs'");
  cmd->add_flag("--launches", args->launches,
                "launch the workload for each replay, even where it serves replay sessions (one launch per side)");
  cmd->add_flag("--first", args->first,
                "stop at the first culprit (default: pin it and replay the step again for the next, man dtrace, "
                "EVERY CULPRIT)");
  cmd->add_option("--max-culprits", args->max_culprits, "name at most this many culprits at the step (default 5)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--keep", args->keep, "keep replay outputs and captures in this new directory");
  cmd->add_flag("--json", args->json, "print one JSON document on stdout (its schema: man dtrace, JSON OUTPUT)");
  cmd->add_option("--html", args->html,
                  "also write the bisection and the runs' divergence as one self-contained HTML page to FILE "
                  "(man dtrace, HTML REPORT)")
      ->type_name("FILE");
  cmd->callback([args, &exit_status] {
    bisect::Options options;
    if (args->runs.size() == 1) throw Failure("bisect takes two runs, or none to use the last diff's");
    if (args->runs.size() == 2) {
      options.run_a = args->runs[0];
      options.run_b = args->runs[1];
    } else {
      auto last = load_last_diff();
      if (!last) throw Failure("no runs given and no earlier `dtrace diff` in this directory (.dtrace/)");
      options.run_a = last->run_a;
      options.run_b = last->run_b;
      if (!args->step && last->step) {
        options.step = last->step;
        if (!args->rank) options.rank = last->rank;
      }
      spdlog::info("using the last diff (.dtrace/): A {}, B {}{}", options.run_a, options.run_b,
                   options.step ? ", step " + std::to_string(*options.step) : std::string());
    }
    if (args->step) options.step = args->step;
    if (args->rank) options.rank = args->rank;
    options.repeat = args->repeat;
    options.timeout_s = args->timeout;
    options.trust = args->trust;
    options.launches = args->launches;
    options.first = args->first;
    options.max_culprits = args->max_culprits;
    if (!args->replay.empty()) {
      auto words = replay::split_words(args->replay);
      if (!words) throw Failure("--replay: " + words.error().message);
      options.replay = *words;
    }
    if (!args->keep.empty()) options.keep = args->keep;
    auto progress = [](const bisect::Replay& replay, bool done) {
      if (!done) {
        spdlog::info("[{}] replaying {}: {}", replay.stage, replay.side, report::replay_command_line(replay));
      } else {
        spdlog::info("[{}] replayed {} in {:.2f} s: {}", replay.stage, replay.side, replay.seconds,
                     replay.outcome);
      }
    };
    auto note = [](const std::string& stage, const std::string& message) {
      spdlog::info("[{}] {}", stage, message);
    };
    if (!args->html.empty()) check_html_target(args->html, options.run_a, options.run_b);
    auto result = bisect::run(options, progress, note);
    if (!result) throw Failure(result.error().message);
    if (!args->html.empty()) {
      // The map and the strip come from the runs' own diff; a bisect whose
      // runs no longer read still gets its ladder and evidence.
      auto divergence = diff::diff_runs(options.run_a, options.run_b);
      if (!divergence) spdlog::warn("report without the runs' map: {}", divergence.error().message);
      write_html_report(args->html, report::divergence_html(divergence ? &*divergence : nullptr, &*result),
                        options.run_a, options.run_b);
      spdlog::info("report: {}", args->html);
    }
    if (args->json) {
      std::cout << report::bisect_to_json(*result).dump(2) << "\n";
    } else {
      std::cout << report::bisect_to_text(*result);
    }
    // A cause named (a kernel, the restore, the data, a generator): 0 (dtrace(1), EXIT STATUS).
    const bool named = result->verdict == bisect::Verdict::named || result->verdict == bisect::Verdict::restore ||
                       result->verdict == bisect::Verdict::data || result->verdict == bisect::Verdict::generator;
    exit_status = named ? kExitSame : kExitDifferent;
  });
}

}  // namespace dtrace::cli
