#include "cli/cli.hpp"

#include <sys/resource.h>

#include <algorithm>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace dtrace::cli {

namespace {

void setup_logging() {
  auto logger = spdlog::stderr_color_mt("dtrace");
  logger->set_pattern("dtrace: %^%l%$: %v");
  spdlog::set_default_logger(logger);
}

}  // namespace

void allow_many_files() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t want = std::min<rlim_t>(limit.rlim_max, 65536);
  if (limit.rlim_cur >= want) return;
  limit.rlim_cur = want;
  ::setrlimit(RLIMIT_NOFILE, &limit);  // failing leaves the reader to close and reopen files
}

int run(int argc, char** argv) {
  setup_logging();
  CLI::App app{
      "dtrace: find where two deterministic training runs first diverge, and which kernel did it.\n"
      "Exit status: 0 same / named, 1 different / not found, 2 trouble."};
  app.set_version_flag("--version", "dtrace 0.1.0");
  app.require_subcommand(1);
  int exit_status = kExitSame;
  add_diff(app, exit_status);
  add_bisect(app, exit_status);
  add_hash(app, exit_status);
  add_replicas(app, exit_status);
  add_watch(app, exit_status);
  add_show(app, exit_status);
  add_check(app, exit_status);
  add_env(app, exit_status);
  add_exec(app, exit_status);
  add_verify(app, exit_status);
  add_tax(app, exit_status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A usage error is trouble like any other: one line, exit 2.
    spdlog::error("{} (see dtrace --help)", e.what());
    return kExitTrouble;
  } catch (const Failure& e) {
    spdlog::error("{}", e.what());
    return kExitTrouble;
  } catch (const std::exception& e) {
    // Not expected: the library reports trouble as results. Still no crash.
    spdlog::error("internal error: {}", e.what());
    return kExitTrouble;
  }
  return exit_status;
}

}  // namespace dtrace::cli
