#include "cli/cli.hpp"

#include <CLI/CLI.hpp>

namespace dtrace::cli {

int run(int argc, char** argv) {
  CLI::App app{"dtrace: divergence tracer for bitwise-deterministic training"};
  app.set_version_flag("--version", "dtrace 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitSame : kExitTrouble;
  }
  return kExitSame;
}

}  // namespace dtrace::cli
