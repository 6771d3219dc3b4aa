// `dtrace record -- CMD` (man/dtrace.1, RECORD): what the command needs besides
// rendering. The environment it gives CMD (the Python paths that make every
// Python process of CMD load dtrace_torch's automatic recorder, the run
// directory, the replay command), the notes those processes leave, what CMD
// recorded, and running CMD in the foreground with the terminal's signals
// reaching it before dtrace.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/result.hpp"

namespace dtrace::record {

using Variables = std::vector<std::pair<std::string, std::string>>;

// The variables a dtrace-replay request sets (dtrace-fp(5)); any of them in
// dtrace record's environment makes it a replay: `name` is the first found.
struct ReplayRequest {
  std::string name;
};
template <typename Lookup>
std::optional<ReplayRequest> replay_request(Lookup lookup) {
  for (const char* name : {"DTRACE_SESSION", "DTRACE_OUT_DIR", "DTRACE_OUT", "DTRACE_REPLAY_STEP", "DTRACE_ISOLATE"}) {
    // Set but empty is unset, as the recorder reads the request.
    if (const auto value = lookup(name); value && !value->empty()) return ReplayRequest{name};
  }
  return std::nullopt;
}

// Where the dtrace and dtrace_torch Python packages are, and the bootstrap
// directory inside (`<dir>/dtrace_torch/bootstrap`, holding sitecustomize.py).
struct PythonDir {
  std::string dir;
  std::string bootstrap;
  std::string source;  // "DTRACE_PYTHONPATH", "the build tree", "the installation"
};

struct PythonDirChoice {
  std::string self_exe;          // realpath(/proc/self/exe)
  std::string build_exe;         // the build tree's dtrace (known at compile time)
  std::string build_python;      // the build tree's python directory
  std::string installed_python;  // meson's python_dir under the prefix
  std::optional<std::string> override_dir;  // DTRACE_PYTHONPATH, when set and not empty
};

// DTRACE_PYTHONPATH when given (made absolute: CMD may change directory),
// else the build tree's directory when this binary is the build tree's, else
// the installed one. An Error naming the directory and where it came from when
// its bootstrap holds no sitecustomize.py: CMD would run unrecorded, and the
// only news of it would be a misleading "no Python process imported torch".
Result<PythonDir> find_python_dir(const PythonDirChoice& choice);

// PYTHONPATH for CMD: the bootstrap, the package directory, then `old` (the
// caller's PYTHONPATH, unset or empty: nothing) without the entries equal to
// those two, so a replay (which runs under a recording's PYTHONPATH) or a user
// who already names build/python gets each once, in this order.
std::string python_path(const PythonDir& python, const std::optional<std::string>& old);

// What dtrace record adds to CMD's environment (man/dtrace.1, RECORD), in
// that order: PYTHONPATH, DTRACE_RUN_DIR (record mode), DTRACE_RECORD_REPLAY_ARGV
// ([self_exe, "record", "--", command...], JSON), DTRACE_RECORD_CWD,
// DTRACE_RECORD_NOTES (record mode), DTRACE_LEVEL (when given). Empty
// run_dir, notes_dir or level: not set. `unset`: what a replay must not
// inherit (DTRACE_RUN_DIR, DTRACE_RECORD_NOTES), empty in record mode.
struct Environment {
  Variables set;
  std::vector<std::string> unset;
};
struct EnvironmentPlan {
  PythonDir python;
  std::optional<std::string> old_python_path;
  std::string self_exe;
  std::vector<std::string> command;
  std::string cwd;
  std::string run_dir;    // record mode: the absolute --out
  std::string notes_dir;  // record mode
  std::string level;
  bool replay = false;
};
Environment environment(const EnvironmentPlan& plan);

// The rank files (`rank*.jsonl`) in `dir`, sorted; none when `dir` does not exist.
std::vector<std::string> rank_files(const std::string& dir);

// --out DIR made ready: created when missing; an Error naming the file when
// it already holds a rank file (what is recorded is never overwritten), or
// when it cannot be a directory. Returns DIR made absolute.
Result<std::string> prepare_run_dir(const std::string& dir);

// A note a Python process of CMD left in DTRACE_RECORD_NOTES (written by
// dtrace_torch's automatic recorder; format in man/dtrace.1, RECORD). Fields a
// note lacks stay unset; unknown keys are ignored.
struct Note {
  std::string file;  // the note's path
  std::optional<long long> pid;
  std::vector<std::string> argv;
  std::optional<long long> rank;
  std::string torch;
  std::optional<long long> optimizers, forwards, backwards, steps;
  bool recorded = false;
  bool explicit_recorder = false;
  std::string error;  // empty: none
};

// One note's text. An Error (naming `file`) when it is not a JSON object or a
// field has the wrong type.
Result<Note> parse_note(const std::string& text, const std::string& file);

struct Notes {
  std::vector<Note> notes;           // by pid
  std::vector<std::string> damaged;  // "FILE: why", one per note that could not be read
};
// Every `*.json` in `dir`; a damaged one is named in `damaged`, never fatal.
Notes read_notes(const std::string& dir);

// A fresh directory for the notes under $TMPDIR (or /tmp), removed with it.
class NotesDir {
 public:
  static Result<NotesDir> create();
  NotesDir(NotesDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  NotesDir& operator=(NotesDir&&) = delete;
  NotesDir(const NotesDir&) = delete;
  ~NotesDir();
  const std::string& path() const { return path_; }

 private:
  explicit NotesDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// How CMD ended.
struct Exit {
  int code = 0;    // its exit status when it exited
  int signal = 0;  // the signal that ended it, 0 when it exited
  bool ok() const { return signal == 0 && code == 0; }
};

// Runs `argv` (PATH searched as execvp does, no shell) with our environment
// changed by `env`, in our process group with our stdin, stdout and stderr,
// and waits for it. A terminal's Ctrl-C (or Ctrl-\) reaches CMD and dtrace
// alike, so dtrace ignores SIGINT and SIGQUIT while it waits (it must outlive
// CMD to report); SIGTERM and SIGHUP sent to dtrace are passed on to CMD.
// CMD starts with those signals at their defaults. An Error when it cannot
// be started ("cannot run CMD: No such file or directory").
Result<Exit> run_in_foreground(const std::vector<std::string>& argv, const Environment& env);

// Sets and unsets `env` in this process's environment (before it replaces
// itself with CMD in replay mode).
void apply(const Environment& env);

}  // namespace dtrace::record
