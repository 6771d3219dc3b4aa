#include "cli/cli.hpp"

#include <sys/resource.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

// Process-wide allocation policy, set before any thread starts. Diff reads
// each run on a thread of its own and hands steps over in batches of about
// 0.7 MB, freed on the comparing thread. With glibc's default trim threshold
// (128 KiB) each freed batch handed its pages back to the kernel and the next
// batch faulted them in again: on a layer-level diff (tools/bench/diff.sh)
// about 44,000 page faults instead of 9,000 and a third of the system time.
// Keeping up to 32 MiB of freed memory per arena ends that. Set here, not in
// the library: the library also runs inside training processes (the
// recorder), whose allocation policy is theirs.
void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, 32 << 20);
#endif
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
  keep_freed_memory();
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
  add_record(app, exit_status);
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
