#include "cli/cli.hpp"

#include <sys/resource.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "util/closest.hpp"

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

// `dtrace --help` lists one line per command, so the list fits a first screen
// (as git's does); `dtrace COMMAND --help` shows the command's whole
// description. A command missing here is listed with its description's first line.
class CommandListFormatter : public CLI::Formatter {
 public:
  std::string make_subcommand(const CLI::App* sub) const override {
    static const std::map<std::string, std::string, std::less<>> kSummaries{
        {"record", "record a PyTorch program as it is: dtrace record --out DIR -- CMD"},
        {"diff", "name the first step, rank and record where two runs diverge"},
        {"bisect", "replay the divergent step finer and name the kernel that did it"},
        {"show", "summarize a run: header, ranks, steps, records"},
        {"check", "certify a run before trusting a diff of it"},
        {"replicas", "check that one run's data-parallel replicas agree"},
        {"watch", "follow a run as it is written and stop at its first divergence"},
        {"hash", "print the xxh3-64k/1 fingerprint of files"},
        {"env", "show and validate the deterministic environment"},
        {"exec", "run a command in the deterministic environment"},
        {"verify", "certify that a workload is bit-identical run to run or across a resume"},
        {"tax", "measure what the deterministic kernels cost"},
    };
    const auto found = kSummaries.find(sub->get_name());
    const std::string& description = sub->get_description();
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_name(),
                             found != kSummaries.end() ? found->second : description.substr(0, description.find('\n')),
                             get_column_width());
    return out.str();
  }
};

// The first argument names a command (dtrace takes no positional argument of
// its own): a word that is none is answered with the closest commands, as git
// does, before CLI11 would say only that a subcommand is required.
void check_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return;  // options, and no command, are CLI11's to report
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) return;
    names.push_back(sub->get_name());
  }
  std::string message = "unknown command '" + word + "'";
  const std::vector<std::string> closest = dtrace::closest_words(word, names);
  for (std::size_t i = 0; i < closest.size(); ++i)
    message += (i == 0 ? "; did you mean '" : i + 1 == closest.size() ? " or '" : ", '") + closest[i] + "'";
  message += closest.empty() ? " (see dtrace --help)" : "?";
  throw Failure(message);
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
  // In the order of the first screen of `dtrace --help`: the story first.
  add_record(app, exit_status);
  add_diff(app, exit_status);
  add_bisect(app, exit_status);
  add_show(app, exit_status);
  add_check(app, exit_status);
  add_replicas(app, exit_status);
  add_watch(app, exit_status);
  add_hash(app, exit_status);
  add_env(app, exit_status);
  add_exec(app, exit_status);
  add_verify(app, exit_status);
  add_tax(app, exit_status);
  // After the commands, which would inherit them.
  auto formatter = std::make_shared<CommandListFormatter>();
  formatter->column_width(14);
  app.formatter(formatter);
  app.footer("'dtrace COMMAND --help' describes a command and its options; man dtrace has everything.");
  try {
    check_command(app, argc, argv);
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
