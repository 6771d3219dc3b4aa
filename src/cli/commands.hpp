// One function per command (src/cli/<command>.cpp) adds its subcommand to the
// app. A command's callback stores its exit status in `exit_status`; trouble is
// thrown as Failure and turned into `dtrace: error: ...` and status 2 by run().
#pragma once

#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>

namespace dtrace::cli {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void add_bisect(CLI::App& app, int& exit_status);
void add_check(CLI::App& app, int& exit_status);
void add_diff(CLI::App& app, int& exit_status);
void add_hash(CLI::App& app, int& exit_status);
void add_show(CLI::App& app, int& exit_status);

}  // namespace dtrace::cli
