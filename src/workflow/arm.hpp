// One arm: a run of the user's workload that `dtrace verify` or `dtrace tax`
// starts. The command runs as given (no shell); dtrace adds only the workflow
// variables of the replay protocol's extension (man/dtrace.1): DTRACE_RUN_DIR
// places the arm's run in dtrace's workspace, DTRACE_CHECKPOINT_DIR keeps its
// checkpoints out of the user's directory, and DTRACE_STOP_AT, DTRACE_RESUME_AT
// and DTRACE_DETERMINISTIC steer it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/result.hpp"

namespace dtrace::workflow {

using Variables = std::vector<std::pair<std::string, std::string>>;

struct ArmPlan {
  std::string label;  // "arm1", "full", "stopped", "resumed", "deterministic.1", ...
  std::vector<std::string> argv;
  Variables env;        // the workflow variables, DTRACE_RUN_DIR first
  std::string run_dir;  // where the arm's log goes (DTRACE_RUN_DIR)
};

struct Arm {
  ArmPlan plan;
  double seconds = 0;
};

// Called before an arm starts (`done` null) and after it ended well.
using Progress = std::function<void(const ArmPlan& plan, const Arm* done)>;

// The directory that holds the arms: a new directory the user asked to keep,
// or a temporary one removed with the Workspace.
class Workspace {
 public:
  // `keep` empty: a fresh directory under $TMPDIR (or /tmp), removed on
  // destruction. Otherwise `keep` is created and kept; it must not exist, so
  // runs of an earlier verify are never mixed in.
  static Result<std::unique_ptr<Workspace>> create(const std::string& keep);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  const std::string& path() const { return path_; }
  bool kept() const { return keep_; }

  // The plan of an arm named `label`: its run directory <workspace>/<label>,
  // its checkpoints in <workspace>/checkpoints/<checkpoints> (arms that hand a
  // checkpoint on share one), and `extra` variables after those two.
  ArmPlan plan(const std::string& label, const std::vector<std::string>& argv,
               const std::string& checkpoints, const Variables& extra = {}) const;

 private:
  Workspace(std::string path, bool keep) : path_(std::move(path)), keep_(keep) {}
  std::string path_;
  bool keep_;
};

// Runs one arm to its end. An Error (naming the arm, how it ended and the last
// line it wrote to stderr) when it cannot start, fails or times out, or leaves
// no log in its run directory (a workload that ignores DTRACE_RUN_DIR).
Result<Arm> run_arm(const ArmPlan& plan, double timeout_s);

// "NAME=VALUE ... argv..." with words quoted where a shell would need it.
std::string command_line(const ArmPlan& plan);

}  // namespace dtrace::workflow
