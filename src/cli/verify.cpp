// `dtrace verify [--arms N] [--resume-at K] [--control 'ARGV'] [--json] -- CMD ARGS`.
#include "workflow/verify.hpp"

#include <iostream>

#include "cli/arms.hpp"
#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/numbers.hpp"
#include "replay/runner.hpp"
#include "report/verify_report.hpp"

namespace dtrace::cli {

void add_verify(CLI::App& app, int& exit_status) {
  struct Args {
    workflow::VerifyOptions options;
    std::string control;
    std::int64_t resume_at = 0;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "verify",
      "Certify that a workload is bit-identical: run it as N independent arms (run-to-run\n"
      "reproducibility), or with --resume-at K as an uninterrupted arm beside one stopped\n"
      "at step K and resumed from its checkpoint (bitwise checkpoint resume); diff the arms.\n"
      "The workload must honour DTRACE_RUN_DIR, DTRACE_CHECKPOINT_DIR, and for --resume-at\n"
      "DTRACE_STOP_AT and DTRACE_RESUME_AT (see dtrace(1)).\n"
      "Exit status: 0 certified, 1 not (the arms diverged, or the control did not), 2 trouble.");
  auto* arms = cmd->add_option("--arms", args->options.arms, "independent arms (default 2)")
                   ->check(CLI::Range(2, 100));
  cmd->add_option("--resume-at", args->resume_at,
                  "check checkpoint resume: stop one arm before step K, resume it at K")
      ->check(step_number())
      ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()))
      ->excludes(arms);
  cmd->add_option("--control", args->control,
                  "a command (one string, shell-style words) whose arms must diverge");
  add_arm_options(*cmd, args->options.keep, args->options.timeout_s, args->json,
                  args->options.command);
  cmd->callback([args, cmd, &exit_status] {
    workflow::VerifyOptions options = args->options;
    if (cmd->count("--resume-at") > 0) options.resume_at = args->resume_at;
    if (!args->control.empty()) {
      auto words = replay::split_words(args->control);
      if (!words) throw Failure("--control: " + words.error().message);
      options.control = *words;
    }
    auto certificate = workflow::verify(options, log_arm);
    if (!certificate) throw Failure(certificate.error().message);
    if (args->json) {
      std::cout << report::verify_to_json(*certificate).dump(2) << "\n";
    } else {
      std::cout << report::verify_to_text(*certificate);
    }
    exit_status = certificate->certified() ? kExitSame : kExitDifferent;
  });
}

}  // namespace dtrace::cli
