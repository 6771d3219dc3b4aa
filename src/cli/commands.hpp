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

// Raises this process's soft limit on open files to its hard limit (up to
// 65,536), so a run of thousands of rank files is read with every file kept
// open. Called by the commands that read runs and start no other program,
// so no workload inherits the raised limit.
void allow_many_files();

void add_bisect(CLI::App& app, int& exit_status);
void add_check(CLI::App& app, int& exit_status);
void add_diff(CLI::App& app, int& exit_status);
void add_env(CLI::App& app, int& exit_status);
void add_exec(CLI::App& app, int& exit_status);
void add_hash(CLI::App& app, int& exit_status);
void add_record(CLI::App& app, int& exit_status);
void add_replicas(CLI::App& app, int& exit_status);
void add_show(CLI::App& app, int& exit_status);
void add_tax(CLI::App& app, int& exit_status);
void add_watch(CLI::App& app, int& exit_status);
void add_verify(CLI::App& app, int& exit_status);

}  // namespace dtrace::cli
