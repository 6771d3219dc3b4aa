// dtrace record's library (src/record/record.hpp): the Python directory it
// picks, the environment it gives CMD, the run directory's refusal, the notes.
// Running CMD is the e2e tests' (tests/e2e/record_*.sh).
#include "record/record.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "report/record_report.hpp"

#include "support.hpp"

namespace fs = std::filesystem;
using namespace dtrace;

namespace {

using test::TempDir;

// A file of the test's directory with `text` in it (directories above it made).
void write(const TempDir& dir, const std::string& name, const std::string& text) {
  test::write_text(dir.path(name), text);
}

// A package directory whose bootstrap holds a sitecustomize.py.
void make_python_dir(const TempDir& dir, const std::string& name) {
  write(dir, name + "/dtrace_torch/bootstrap/sitecustomize.py", "\n");
}

std::string value_of(const record::Variables& env, const std::string& name) {
  for (const auto& [key, value] : env) {
    if (key == name) return value;
  }
  return "<unset>";
}

}  // namespace

TEST_CASE("record: any replay request variable makes a replay, an empty one does not", "[record]") {
  std::map<std::string, std::string> env{{"DTRACE_RUN_DIR", "/r"}, {"DTRACE_LEVEL", "layer"}};
  auto lookup = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  CHECK_FALSE(record::replay_request(lookup));
  for (const char* name : {"DTRACE_SESSION", "DTRACE_OUT_DIR", "DTRACE_OUT", "DTRACE_REPLAY_STEP", "DTRACE_ISOLATE"}) {
    env[name] = "";
    CHECK_FALSE(record::replay_request(lookup));
    env[name] = "x";
    const auto request = record::replay_request(lookup);
    REQUIRE(request);
    CHECK(request->name == name);
    env.erase(name);
  }
}

TEST_CASE("record: the Python directory: DTRACE_PYTHONPATH, else the build tree's for its binary, else installed",
          "[record]") {
  TempDir dir;
  for (const char* name : {"build/python", "installed", "override"}) make_python_dir(dir, name);
  write(dir, "build/dtrace", "");
  write(dir, "bin/dtrace", "");
  record::PythonDirChoice choice;
  choice.build_exe = dir.path("build/dtrace");
  choice.build_python = dir.path("build/python");
  choice.installed_python = dir.path("installed");

  choice.self_exe = dir.path("build/dtrace");
  auto python = record::find_python_dir(choice);
  REQUIRE(python);
  CHECK(python->dir == dir.path("build/python"));
  CHECK(python->bootstrap == dir.path("build/python/dtrace_torch/bootstrap"));
  CHECK(python->source == "the build tree");

  // The build tree's binary named through a link is still the build tree's.
  fs::create_symlink(dir.path("build"), dir.path("link"));
  choice.self_exe = dir.path("link/dtrace");
  python = record::find_python_dir(choice);
  REQUIRE(python);
  CHECK(python->dir == dir.path("build/python"));

  choice.self_exe = dir.path("bin/dtrace");
  python = record::find_python_dir(choice);
  REQUIRE(python);
  CHECK(python->dir == dir.path("installed"));
  CHECK(python->source == "the installation");

  choice.override_dir = dir.path("override") + "/";
  python = record::find_python_dir(choice);
  REQUIRE(python);
  CHECK(python->dir == dir.path("override"));
  CHECK(python->source == "DTRACE_PYTHONPATH");
}

TEST_CASE("record: a relative DTRACE_PYTHONPATH is made absolute, since CMD may change directory", "[record]") {
  TempDir dir;
  make_python_dir(dir, "py");
  const fs::path before = fs::current_path();
  fs::current_path(dir.root());
  record::PythonDirChoice choice;
  choice.override_dir = "py";
  auto python = record::find_python_dir(choice);
  fs::current_path(before);
  REQUIRE(python);
  CHECK(python->dir == fs::path(dir.path("py")).lexically_normal().string());
}

TEST_CASE("record: a Python directory without the bootstrap's sitecustomize.py is refused, named", "[record]") {
  TempDir dir;
  record::PythonDirChoice choice;
  choice.override_dir = dir.root();
  auto python = record::find_python_dir(choice);
  REQUIRE_FALSE(python);
  CHECK(python.error().message.find(dir.root() + "/dtrace_torch/bootstrap/sitecustomize.py") != std::string::npos);
  CHECK(python.error().message.find("DTRACE_PYTHONPATH") != std::string::npos);
}

TEST_CASE("record: PYTHONPATH is the bootstrap, the packages, then the caller's, ours once", "[record]") {
  const record::PythonDir python{"/p", "/p/dtrace_torch/bootstrap", "x"};
  CHECK(record::python_path(python, std::nullopt) == "/p/dtrace_torch/bootstrap:/p");
  CHECK(record::python_path(python, "") == "/p/dtrace_torch/bootstrap:/p");
  CHECK(record::python_path(python, "/a:/b") == "/p/dtrace_torch/bootstrap:/p:/a:/b");
  // A replay runs under the recording's PYTHONPATH: applied again, it is the same.
  const std::string once = record::python_path(python, "/a");
  CHECK(record::python_path(python, once) == once);
  CHECK(record::python_path(python, "/a:/p:/b") == "/p/dtrace_torch/bootstrap:/p:/a:/b");
  // An empty entry is the current directory to Python: it stays where it was.
  CHECK(record::python_path(python, "/a::/b") == "/p/dtrace_torch/bootstrap:/p:/a::/b");
}

TEST_CASE("record: the environment of a recording and of a replay", "[record]") {
  record::EnvironmentPlan plan;
  plan.python = {"/p", "/p/dtrace_torch/bootstrap", "x"};
  plan.old_python_path = "/a";
  plan.self_exe = "/bin/dtrace";
  plan.command = {"python", "train.py", "--name", "a b"};
  plan.cwd = "/work";
  plan.run_dir = "/runs/a";
  plan.notes_dir = "/tmp/notes";

  auto env = record::environment(plan);
  CHECK(value_of(env.set, "PYTHONPATH") == "/p/dtrace_torch/bootstrap:/p:/a");
  CHECK(value_of(env.set, "DTRACE_RUN_DIR") == "/runs/a");
  CHECK(nlohmann::json::parse(value_of(env.set, "DTRACE_RECORD_REPLAY_ARGV")) ==
        nlohmann::json({"/bin/dtrace", "record", "--", "python", "train.py", "--name", "a b"}));
  CHECK(value_of(env.set, "DTRACE_RECORD_CWD") == "/work");
  CHECK(value_of(env.set, "DTRACE_RECORD_NOTES") == "/tmp/notes");
  CHECK(value_of(env.set, "DTRACE_LEVEL") == "<unset>");
  CHECK(env.unset.empty());

  plan.level = "layer";
  CHECK(value_of(record::environment(plan).set, "DTRACE_LEVEL") == "layer");

  plan.level.clear();
  plan.replay = true;
  env = record::environment(plan);
  CHECK(value_of(env.set, "DTRACE_RUN_DIR") == "<unset>");
  CHECK(value_of(env.set, "DTRACE_RECORD_NOTES") == "<unset>");
  CHECK(value_of(env.set, "DTRACE_RECORD_CWD") == "/work");
  CHECK(value_of(env.set, "PYTHONPATH") == "/p/dtrace_torch/bootstrap:/p:/a");
  CHECK(std::find(env.unset.begin(), env.unset.end(), "DTRACE_RUN_DIR") != env.unset.end());
  CHECK(std::find(env.unset.begin(), env.unset.end(), "DTRACE_RECORD_NOTES") != env.unset.end());
}

TEST_CASE("record: --out is created, and refused when it holds a rank file", "[record]") {
  TempDir dir;
  auto made = record::prepare_run_dir(dir.path("runs/a"));
  REQUIRE(made);
  CHECK(*made == dir.path("runs/a"));
  CHECK(fs::is_directory(dir.path("runs/a")));
  // Other files do not count as a recording.
  write(dir, "runs/a/notes.txt", "x");
  CHECK(record::prepare_run_dir(dir.path("runs/a")));

  write(dir, "runs/a/rank1.jsonl", "kept");
  auto refused = record::prepare_run_dir(dir.path("runs/a"));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find(dir.path("runs/a/rank1.jsonl")) != std::string::npos);

  write(dir, "file", "");
  CHECK_FALSE(record::prepare_run_dir(dir.path("file")));
}

TEST_CASE("record: a note is read with every field; unknown keys ignored", "[record]") {
  const auto note = record::parse_note(
      R"({"pid": 123, "argv": ["train.py", "--steps", "8"], "rank": 0, "torch": "1.13.0",
          "optimizers": 1, "forwards": 8, "backwards": 8, "steps": 8, "recorded": true,
          "explicit": false, "error": null, "later": {"x": 1}})",
      "n/123.json");
  REQUIRE(note);
  CHECK(note->pid == 123);
  CHECK(note->argv == std::vector<std::string>{"train.py", "--steps", "8"});
  CHECK(note->rank == 0);
  CHECK(note->torch == "1.13.0");
  CHECK(note->optimizers == 1);
  CHECK(note->steps == 8);
  CHECK(note->recorded);
  CHECK_FALSE(note->explicit_recorder);
  CHECK(note->error.empty());
  CHECK(report::note_text(*note) ==
        "process 123 (train.py --steps 8), rank 0, torch 1.13.0: 1 optimizer, 8 forwards, 8 backwards, 8 steps, "
        "recorded");
}

TEST_CASE("record: a damaged note is an error naming it", "[record]") {
  for (const char* text : {"{\"pid\": 1,", "[1]", R"({"pid": "one"})", R"({"argv": ["a", 2]})",
                           R"({"steps": 1.5})", R"({"recorded": "yes"})", R"({"error": 3})"}) {
    const auto note = record::parse_note(text, "n/1.json");
    REQUIRE_FALSE(note);
    CHECK(note.error().message.starts_with("n/1.json: "));
  }
}

TEST_CASE("record: the notes of a directory, damaged ones named and skipped", "[record]") {
  TempDir dir;
  write(dir, "20.json", R"({"pid": 20, "steps": 0, "error": "no backward"})");
  write(dir, "3.json", R"({"pid": 3, "steps": 2})");
  write(dir, "7.json", "{truncated");
  write(dir, "ignored.txt", "x");
  const record::Notes notes = record::read_notes(dir.root());
  REQUIRE(notes.notes.size() == 2);
  CHECK(notes.notes[0].pid == 3);
  CHECK(notes.notes[1].pid == 20);
  CHECK(report::note_error_text(notes.notes[1]) == "process 20: no backward");
  REQUIRE(notes.damaged.size() == 1);
  CHECK(notes.damaged[0] == dir.path("7.json") + ": not JSON");
  CHECK(record::read_notes(dir.path("absent")).notes.empty());
}

TEST_CASE("record: nothing recorded names what it looked for and each process", "[record]") {
  const std::vector<std::string> command{"python", "train.py"};
  auto lines = report::nothing_recorded(command, "runs/a", {});
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("torch.optim optimizer's step()") != std::string::npos);
  CHECK(lines[0].find("backward()") != std::string::npos);
  CHECK(lines[1].starts_with("no Python process of python train.py imported torch"));

  record::Note note;
  note.pid = 9;
  note.optimizers = 0;
  note.forwards = 3;
  note.backwards = 3;
  note.steps = 0;
  lines = report::nothing_recorded(command, "runs/a", {{note}, {}});
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == "process 9: 0 optimizers, 3 forwards, 3 backwards, 0 steps, recorded nothing");
}

TEST_CASE("record: how CMD ended", "[record]") {
  CHECK(report::exit_text({"sh", "-c", "exit 3"}, {3, 0}) == "sh -c exit 3 exited with status 3");
  CHECK(report::exit_text({"x"}, {0, 9}).starts_with("x was killed by signal 9 ("));
}
