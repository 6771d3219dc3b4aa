#include "record/record.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

extern char** environ;

namespace dtrace::record {

namespace fs = std::filesystem;

namespace {

std::string canonical_or_same(const std::string& path) {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(path, ec);
  return ec ? path : resolved.string();
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

}  // namespace

Result<PythonDir> find_python_dir(const PythonDirChoice& choice) {
  PythonDir python;
  if (choice.override_dir && !choice.override_dir->empty()) {
    std::error_code ec;
    const fs::path absolute = fs::absolute(*choice.override_dir, ec);
    python.dir = (ec ? fs::path(*choice.override_dir) : absolute).lexically_normal().string();
    python.source = "DTRACE_PYTHONPATH";
  } else if (!choice.build_exe.empty() && canonical_or_same(choice.self_exe) == canonical_or_same(choice.build_exe)) {
    python.dir = choice.build_python;
    python.source = "the build tree";
  } else {
    python.dir = choice.installed_python;
    python.source = "the installation";
  }
  // lexically_normal keeps a trailing separator of "dir/": drop it, so the
  // PYTHONPATH entries read as the directory's plain name.
  while (python.dir.size() > 1 && python.dir.back() == '/') python.dir.pop_back();
  python.bootstrap = (fs::path(python.dir) / "dtrace_torch" / "bootstrap").string();
  const fs::path site = fs::path(python.bootstrap) / "sitecustomize.py";
  std::error_code ec;
  if (!fs::is_regular_file(site, ec)) {
    return Error{"no " + site.string() + " (the Python directory of " + python.source +
                 "): dtrace_torch is not built or installed there, and CMD would run unrecorded; "
                 "set DTRACE_PYTHONPATH to the directory that holds the dtrace and dtrace_torch packages"};
  }
  return python;
}

std::string python_path(const PythonDir& python, const std::optional<std::string>& old) {
  std::string path = python.bootstrap + ":" + python.dir;
  if (!old || old->empty()) return path;
  for (const std::string& entry : split(*old, ':')) {
    // An empty entry means the current directory to Python: it stays.
    if (entry == python.bootstrap || entry == python.dir) continue;
    path += ":" + entry;
  }
  return path;
}

Environment environment(const EnvironmentPlan& plan) {
  Environment env;
  env.set.emplace_back("PYTHONPATH", python_path(plan.python, plan.old_python_path));
  if (!plan.replay && !plan.run_dir.empty()) env.set.emplace_back("DTRACE_RUN_DIR", plan.run_dir);
  nlohmann::json argv = nlohmann::json::array({plan.self_exe, "record", "--"});
  for (const std::string& word : plan.command) argv.push_back(word);
  env.set.emplace_back("DTRACE_RECORD_REPLAY_ARGV", argv.dump());
  env.set.emplace_back("DTRACE_RECORD_CWD", plan.cwd);
  if (!plan.replay && !plan.notes_dir.empty()) env.set.emplace_back("DTRACE_RECORD_NOTES", plan.notes_dir);
  if (!plan.level.empty()) env.set.emplace_back("DTRACE_LEVEL", plan.level);
  // A replay writes where its request says (DTRACE_OUT_DIR, DTRACE_OUT), never
  // into a run directory, and leaves no notes: none may come from a recording
  // that started it.
  if (plan.replay) env.unset = {"DTRACE_RUN_DIR", "DTRACE_RECORD_NOTES"};
  return env;
}

std::vector<std::string> rank_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("rank") && name.ends_with(".jsonl")) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Result<std::string> prepare_run_dir(const std::string& dir) {
  std::error_code ec;
  const std::string absolute = fs::absolute(dir, ec).lexically_normal().string();
  if (ec) return Error{"--out " + dir + ": " + ec.message()};
  if (fs::exists(absolute, ec) && !fs::is_directory(absolute, ec)) {
    return Error{"--out " + dir + ": exists and is not a directory"};
  }
  if (const auto existing = rank_files(absolute); !existing.empty()) {
    return Error{"--out " + dir + " already holds a recording (" + existing.front() +
                 "): dtrace record never overwrites one; choose another directory"};
  }
  fs::create_directories(absolute, ec);
  if (ec) return Error{"--out " + dir + ": cannot create it: " + ec.message()};
  return absolute;
}

Result<Note> parse_note(const std::string& text, const std::string& file) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) return Error{file + ": not JSON"};
  if (!doc.is_object()) return Error{file + ": not a JSON object"};
  Note note;
  note.file = file;
  std::string wrong;
  auto integer = [&](const char* key, std::optional<long long>& into) {
    if (!doc.contains(key) || doc[key].is_null()) return;
    if (!doc[key].is_number_integer()) {
      if (wrong.empty()) wrong = key;
      return;
    }
    into = doc[key].get<long long>();
  };
  auto boolean = [&](const char* key, bool& into) {
    if (!doc.contains(key) || doc[key].is_null()) return;
    if (!doc[key].is_boolean()) {
      if (wrong.empty()) wrong = key;
      return;
    }
    into = doc[key].get<bool>();
  };
  auto text_field = [&](const char* key, std::string& into) {
    if (!doc.contains(key) || doc[key].is_null()) return;
    if (!doc[key].is_string()) {
      if (wrong.empty()) wrong = key;
      return;
    }
    into = doc[key].get<std::string>();
  };
  integer("pid", note.pid);
  integer("rank", note.rank);
  integer("optimizers", note.optimizers);
  integer("forwards", note.forwards);
  integer("backwards", note.backwards);
  integer("steps", note.steps);
  boolean("recorded", note.recorded);
  boolean("explicit", note.explicit_recorder);
  text_field("torch", note.torch);
  text_field("error", note.error);
  if (doc.contains("argv") && !doc["argv"].is_null()) {
    if (!doc["argv"].is_array()) {
      if (wrong.empty()) wrong = "argv";
    } else {
      for (const auto& word : doc["argv"]) {
        if (!word.is_string()) {
          if (wrong.empty()) wrong = "argv";
          break;
        }
        note.argv.push_back(word.get<std::string>());
      }
    }
  }
  if (!wrong.empty()) return Error{file + ": field \"" + wrong + "\" has the wrong type"};
  return note;
}

Notes read_notes(const std::string& dir) {
  // A note is a few hundred bytes; more is not a note, and is not read whole.
  constexpr std::uintmax_t kMaxNote = 1 << 20;
  Notes out;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    const std::string file = path.string();
    std::error_code size_ec;
    const std::uintmax_t size = fs::file_size(path, size_ec);
    if (size_ec) {
      out.damaged.push_back(file + ": " + size_ec.message());
      continue;
    }
    if (size > kMaxNote) {
      out.damaged.push_back(file + ": " + std::to_string(size) + " bytes, too large for a note");
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in && !in.eof()) {
      out.damaged.push_back(file + ": cannot be read");
      continue;
    }
    auto note = parse_note(text.str(), file);
    if (!note) {
      out.damaged.push_back(note.error().message);
      continue;
    }
    out.notes.push_back(std::move(*note));
  }
  std::stable_sort(out.notes.begin(), out.notes.end(),
                   [](const Note& a, const Note& b) { return a.pid.value_or(-1) < b.pid.value_or(-1); });
  return out;
}

Result<NotesDir> NotesDir::create() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = (tmp != nullptr && *tmp != '\0' ? std::string(tmp) : std::string("/tmp")) +
                        "/dtrace-record-notes.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Error{"cannot create a directory for the notes (" + pattern + "): " + std::strerror(errno)};
  }
  return NotesDir(pattern);
}

NotesDir::~NotesDir() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

namespace {

// The child CMD runs as while dtrace waits for it: a handler runs only in
// dtrace (CMD starts with the defaults), and kill() is async-signal-safe.
volatile sig_atomic_t g_child = 0;

void forward(int signal_number) {
  const pid_t child = static_cast<pid_t>(g_child);
  if (child > 0) ::kill(child, signal_number);
}

std::vector<std::string> environment_strings(const Environment& env) {
  std::vector<std::string> out;
  auto changed = [&](std::string_view entry) {
    const std::string_view name = entry.substr(0, entry.find('='));
    for (const auto& [key, value] : env.set) {
      if (key == name) return true;
    }
    return std::find(env.unset.begin(), env.unset.end(), name) != env.unset.end();
  };
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (!changed(*entry)) out.emplace_back(*entry);
  }
  for (const auto& [key, value] : env.set) out.push_back(key + "=" + value);
  return out;
}

}  // namespace

Result<Exit> run_in_foreground(const std::vector<std::string>& argv, const Environment& env) {
  if (argv.empty()) return Error{"no command to run"};
  std::vector<std::string> words = argv;
  std::vector<char*> argp;
  for (auto& word : words) argp.push_back(word.data());
  argp.push_back(nullptr);
  std::vector<std::string> strings = environment_strings(env);
  std::vector<char*> envp;
  for (auto& entry : strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  // Our dispositions while CMD runs; SIGTERM and SIGHUP are blocked until
  // the child's pid is known, so one that arrives meanwhile is passed on. A
  // signal dtrace was started ignoring (nohup, a shell's background job)
  // stays ignored, in dtrace and in CMD; the others CMD gets at their default.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction pass_on {};
  pass_on.sa_handler = forward;
  sigemptyset(&pass_on.sa_mask);
  sigset_t forwarded, old_mask, defaults;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGTERM);
  sigaddset(&forwarded, SIGHUP);
  sigemptyset(&defaults);
  ::sigprocmask(SIG_BLOCK, &forwarded, &old_mask);
  struct Changed {
    int signal_number;
    struct sigaction old;
  };
  std::vector<Changed> changed;
  for (int s : {SIGINT, SIGQUIT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    ::sigaction(s, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;
    ::sigaction(s, (s == SIGTERM || s == SIGHUP) ? &pass_on : &ignore, nullptr);
    changed.push_back({s, old});
    sigaddset(&defaults, s);
  }
  auto restore = [&] {
    g_child = 0;
    for (const Changed& c : changed) ::sigaction(c.signal_number, &c.old, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  };

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &old_mask);  // the mask dtrace was started with
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  // posix_spawnp searches PATH as execvp does (our PATH, not the child's).
  const int spawned = ::posix_spawnp(&pid, argp[0], nullptr, &attr, argp.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) {
    restore();
    return Error{"cannot run " + argv[0] + ": " + std::strerror(spawned)};
  }
  g_child = pid;
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);  // a pending SIGTERM/SIGHUP now reaches CMD

  int status = 0;
  pid_t waited = 0;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  const int wait_error = errno;
  restore();
  if (waited < 0) return Error{"waiting for " + argv[0] + ": " + std::strerror(wait_error)};
  Exit exit;
  if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  } else {
    exit.code = WEXITSTATUS(status);
  }
  return exit;
}

void apply(const Environment& env) {
  for (const std::string& name : env.unset) ::unsetenv(name.c_str());
  for (const auto& [name, value] : env.set) ::setenv(name.c_str(), value.c_str(), 1);
}

}  // namespace dtrace::record
