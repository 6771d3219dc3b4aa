// `dtrace watch RUN [--against REF] [--replicas [GROUPS]] [--keep-going]
// [--idle SECONDS] [--json]` (dtrace(1), watch).
#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "report/watch_report.hpp"
#include "watch/watch.hpp"

namespace dtrace::cli {

void add_watch(CLI::App& app, int& exit_status) {
  struct Options {
    watch::Options watch;
    std::string against;
    std::string groups;
    bool keep_going = false;
    bool json = false;
    bool no_inotify = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "watch",
      "Follow a run while its job writes it and compare each step as soon as it is\n"
      "complete: against a reference run (--against, with diff's semantics), across\n"
      "its replica groups (--replicas), or both. Prints progress; at the first\n"
      "divergence the report dtrace diff gives, then exits 1 (--keep-going: goes on\n"
      "and reports each rank as it diverges). The run has ended when every rank ended\n"
      "a step and nothing grew for --idle seconds, or every rank's end marker is there\n"
      "(dtrace-fp(5)).\n"
      "Exit status: 0 the run ended identical, 1 diverged or departed, 2 trouble.");
  cmd->add_option("RUN", options->watch.run, "the run being written (it may not exist yet)")->required();
  cmd->add_option("--against", options->against, "the reference run (it may still be written too)");
  auto* replicas = cmd->add_option("--replicas", options->groups,
                                   "check replica groups: GROUPS as dtrace replicas --groups takes them\n"
                                   "(0-7, 0,2,4,6:1,3,5,7), or 'header' for the run header's");
  cmd->add_flag("--keep-going", options->keep_going, "do not stop at the first divergence");
  cmd->add_option("--idle", options->watch.idle_seconds,
                  "seconds without growth after which a run whose ranks all ended a step has ended")
      ->capture_default_str();
  cmd->add_option("--progress", options->watch.progress_seconds, "seconds between progress lines")
      ->capture_default_str();
  cmd->add_option("--poll", options->watch.poll_seconds, "seconds between polls where inotify is not used")
      ->capture_default_str();
  cmd->add_flag("--no-inotify", options->no_inotify, "poll even where inotify is available");
  cmd->add_flag("--json", options->json,
                "print one JSON object per line, one per event (its schema: man dtrace, JSON OUTPUT)");
  cmd->callback([options, replicas, &exit_status] {
    allow_many_files();
    watch::Options o = options->watch;
    if (!options->against.empty()) o.against = options->against;
    if (*replicas) {
      o.replicas = true;
      if (options->groups != "header") o.groups = options->groups;
    }
    o.use_inotify = !options->no_inotify;
    auto w = watch::Watch::open(o);
    if (!w) throw Failure(w.error().message);
    bool diverged = false;
    bool said_polling = false;
    while (true) {
      auto event = (*w)->next();
      if (!event) throw Failure(event.error().message);
      if (!said_polling && !(*w)->polling_reason().empty()) {
        said_polling = true;
        std::cerr << "dtrace: note: " << (*w)->polling_reason() << std::endl;
      }
      if (options->json) {
        std::cout << report::watch_event_to_json(*event).dump() << std::endl;
      } else {
        std::cout << report::watch_event_to_text(*event) << std::flush;
      }
      const watch::EventKind kind = event->kind;
      if (kind == watch::EventKind::diverged || kind == watch::EventKind::departed ||
          kind == watch::EventKind::rank_diverged) {
        diverged = true;
        if (!options->keep_going) break;
      }
      if (kind == watch::EventKind::ended) {
        if ((event->diff && event->diff->diverged()) || (event->replicas && event->replicas->departed())) {
          diverged = true;
        }
        break;
      }
    }
    exit_status = diverged ? kExitDifferent : kExitSame;
  });
}

}  // namespace dtrace::cli
