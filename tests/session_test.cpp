// dtrace::ReplaySession (dtrace-replay/1.2, man/dtrace-fp.5 "Replay sessions"):
// request files written by hand, as dtrace's runner writes them (another name,
// then a rename), from a test thread or before the call.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "dtrace/recorder.h"
#include "dtrace/recorder.hpp"
#include "recorder/session_watch.hpp"
#include "recorder_support.hpp"

using dtrace::Level;
using dtrace::Recorder;
using dtrace::RecorderError;
using dtrace::RecordIo;
using dtrace::ReplayRequest;
using dtrace::ReplaySession;
using test_support::file_text;
using test_support::TempDir;
namespace fs = std::filesystem;

namespace {

using Variables = std::map<std::string, std::string>;

// Request K with these variables, complete once it exists (written, then renamed).
void write_request(const std::string& session, std::int64_t k, const nlohmann::json& body) {
  nlohmann::json request = body;
  request["request"] = k;
  const std::string final_path = session + "/request." + std::to_string(k) + ".json";
  dtrace::test::write_text(final_path + ".tmp", request.dump());
  fs::rename(final_path + ".tmp", final_path);
}

void write_env_request(const std::string& session, std::int64_t k, const Variables& env) {
  write_request(session, k, {{"env", env}});
}

void write_end(const std::string& session, std::int64_t k) {
  write_request(session, k, {{"end", true}});
}

std::unique_ptr<ReplaySession> open_session(const std::string& dir, std::vector<int> ranks = {0},
                                            const std::string& step = "3") {
  fs::create_directories(dir);
  return ReplaySession::from_variables({{"DTRACE_SESSION", dir}, {"DTRACE_REPLAY_STEP", step}},
                                       std::move(ranks));
}

Variables step_replay(const std::string& out_dir, const std::string& level = "layer") {
  return {{"DTRACE_REPLAY_STEP", "3"},
          {"DTRACE_LEVEL", level},
          {"DTRACE_OUT_DIR", out_dir},
          {"DTRACE_OUT", out_dir + "/replay.jsonl"}};
}

std::string status_of(const std::string& out_dir, int rank = 0) {
  return file_text(out_dir + "/rank" + std::to_string(rank) + ".status");
}

// One replayed step, as a program serving the request records it.
void serve(const dtrace::RunOptions& options, const ReplayRequest& request, float value) {
  auto recorder = Recorder::open(options, request);
  recorder->begin_step(3);
  {
    auto layer = recorder->scope("fwd");
    const std::vector<float> x(4, value);
    recorder->tensor(Level::layer, "fwd", RecordIo::out, "x", test_support::view(x, {4}));
  }
  recorder->end_step();
}

}  // namespace

TEST_CASE("a session serves its requests in order, each answered in its own directory, done last") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  auto session = open_session(session_dir, {0, 1});
  REQUIRE(session);
  CHECK(session->step() == 3);
  CHECK(session->request_number() == -1);
  auto options = test_support::options_for(dir / "run", 0, 2);
  options.serves_sessions = true;
  options.replay_argv = {"train", "--steps", "9"};

  // dtrace writes each request only after the previous one is done: the
  // writer thread waits for both ranks' done before it writes the next.
  std::thread dtrace_side([&] {
    for (int k = 0; k < 3; ++k) {
      const std::string out_dir = dir / ("answer-" + std::to_string(k));
      write_env_request(session_dir, k, step_replay(out_dir));
      for (int rank = 0; rank < 2; ++rank) {
        while (!fs::exists(out_dir + "/rank" + std::to_string(rank) + ".status") ||
               !status_of(out_dir, rank).starts_with("done ")) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      }
    }
    write_end(session_dir, 3);
  });
  int served = 0;
  while (auto request = session->next(std::chrono::seconds(30))) {
    const std::string out_dir = dir / ("answer-" + std::to_string(served));
    CHECK(session->request_number() == served);
    CHECK(request->out_dir == out_dir);
    // From the moment the request is read, each rank's status says running.
    for (int rank = 0; rank < 2; ++rank) {
      CHECK(status_of(out_dir, rank).starts_with("running " + std::to_string(::getpid())));
    }
    for (int rank = 0; rank < 2; ++rank) {
      options.rank = rank;
      serve(options, *request, static_cast<float>(served));
    }
    CHECK(status_of(out_dir, 1).starts_with("running "));  // not done before done()
    session->done();
    // "done PID TIME": the pid keeps this process watched between requests.
    CHECK(status_of(out_dir, 0).starts_with("done " + std::to_string(::getpid()) + " "));
    ++served;
  }
  dtrace_side.join();
  CHECK(served == 3);
  CHECK_FALSE(session->next());  // the end stays the end
  for (int k = 0; k < 3; ++k) {
    const std::string out_dir = dir / ("answer-" + std::to_string(k));
    const auto run = test_support::read_run(out_dir);
    REQUIRE(run.steps.size() == 2);
    CHECK(run.reader->header().replay["protocol"] == "dtrace-replay/1.2");
    for (int rank = 0; rank < 2; ++rank) CHECK(status_of(out_dir, rank).starts_with("done "));
  }
}

// How next() waits (issue 41): a request renamed into the directory wakes it
// through inotify, not at its next look. The look here is an hour and the
// writer posts from another thread: a wait that missed the rename would come
// back timed out (after 30 s), never with Found::look.
TEST_CASE("a request renamed into the session's directory wakes the wait at once") {
  using dtrace::recording::DirectoryWatch;
  TempDir dir;
  const std::string session_dir = dir / "session";
  fs::create_directories(session_dir);
  DirectoryWatch watch(session_dir);
  REQUIRE(watch.watching());
  for (int k = 0; k < 3; ++k) {
    std::thread dtrace_side([&] {
      // Not a timing assertion: gives the wait a moment to be asleep in its poll
      // (a request already there is found as present, which passes too).
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      write_env_request(session_dir, k, step_replay(dir / "answer"));
    });
    const auto found = watch.wait_for("request." + std::to_string(k) + ".json", std::chrono::seconds(30),
                                      std::chrono::hours(1));
    dtrace_side.join();
    CHECK((found == DirectoryWatch::Found::event || found == DirectoryWatch::Found::present));
  }
  // Nothing posted: the wait ends at its timeout, saying so.
  CHECK(watch.wait_for("request.3.json", std::chrono::milliseconds(20), std::chrono::hours(1)) ==
        DirectoryWatch::Found::timed_out);
  // The directory's earlier changes queued in between do not count for the next wait.
  write_env_request(session_dir, 3, step_replay(dir / "answer"));
  CHECK(watch.wait_for("request.3.json", std::nullopt, std::chrono::hours(1)) == DirectoryWatch::Found::present);
}

TEST_CASE("next() returns a request posted while it waits") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  auto session = open_session(session_dir);
  std::thread dtrace_side([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // next() asleep by then, most likely
    write_env_request(session_dir, 0, step_replay(dir / "answer-0"));
  });
  const auto request = session->next();
  dtrace_side.join();
  REQUIRE(request);
  CHECK(request->out_dir == dir / "answer-0");
  CHECK(session->request_number() == 0);
  session->done();
  write_end(session_dir, 1);
  CHECK_FALSE(session->next());
}

TEST_CASE("a request's variables replace the process environment's") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  auto session = open_session(session_dir);
  ::setenv("DTRACE_SCOPE", "fwd/layer.9", 1);
  ::setenv("DTRACE_LEVEL", "kernel", 1);
  write_env_request(session_dir, 0, step_replay(dir / "a", "step"));
  const auto request = session->next(std::chrono::seconds(5));
  ::unsetenv("DTRACE_SCOPE");
  ::unsetenv("DTRACE_LEVEL");
  REQUIRE(request);
  CHECK(request->level == Level::step);
  CHECK(request->scope.empty());
  CHECK(request->step == 3);
  CHECK(request->record_fast_forward == false);
  CHECK(session->variables().count("DTRACE_LEVEL") == 1);
  CHECK(session->variables().count("DTRACE_SCOPE") == 0);
  session->done();
  CHECK(session->variables().empty());
  // The next request's variables, not the last one's.
  write_env_request(session_dir, 1,
                    {{"DTRACE_REPLAY_STEP", "3"}, {"DTRACE_OUT_DIR", dir / "b"},
                     {"DTRACE_FAST_FORWARD", "step"}, {"DTRACE_CAPTURE", dir / "cap"},
                     {"DTRACE_SCOPE", "fwd/layer.1"}});
  const auto second = session->next(std::chrono::seconds(5));
  REQUIRE(second);
  CHECK_FALSE(second->level);
  CHECK(second->scope == "fwd/layer.1");
  CHECK(second->capture == dir / "cap");
  CHECK(second->record_fast_forward);
}

TEST_CASE("the first step replay of a session is the one that restores from the checkpoint") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  auto session = open_session(session_dir);
  const Variables isolate{{"DTRACE_REPLAY_STEP", "3"}, {"DTRACE_OUT_DIR", dir / "i"},
                          {"DTRACE_ISOLATE", "fwd/layer.1"}, {"DTRACE_INPUTS", dir / "cap"},
                          {"DTRACE_REPEAT", "2"}};
  write_env_request(session_dir, 0, isolate);
  write_env_request(session_dir, 1, step_replay(dir / "s1"));
  write_env_request(session_dir, 2, step_replay(dir / "s2"));
  std::vector<bool> first;
  for (int k = 0; k < 3; ++k) {
    REQUIRE(session->next(std::chrono::seconds(5)));
    first.push_back(session->first_step_request());
    session->done();
  }
  CHECK(first == std::vector<bool>{false, true, false});
  CHECK_FALSE(session->first_step_request());  // nothing being served
}

TEST_CASE("a request that is not one is refused, naming its file") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  const std::string file = session_dir + "/request.0.json";
  auto refused = [&](const std::string& text, const std::string& why,
                     RecorderError::Kind kind = RecorderError::Kind::io) {
    auto session = open_session(session_dir);
    dtrace::test::write_text(file, text);
    try {
      session->next(std::chrono::seconds(5));
      FAIL("accepted " << text);
    } catch (const RecorderError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).starts_with(file + ": "));
      CHECK(std::string(e.what()).find(why) != std::string::npos);
      CHECK(e.kind() == kind);
    }
    fs::remove(file);
  };
  refused("{\"request\":0,\"env\":", "not a JSON object");
  refused("[0]", "not a JSON object");
  refused("{\"request\":1,\"env\":{}}", "\"request\" is not 0");
  refused("{\"request\":0}", "no \"env\" object");
  refused("{\"request\":0,\"env\":{\"DTRACE_LEVEL\":2}}", "DTRACE_LEVEL is not a string");
  refused("{\"request\":0,\"env\":{\"DTRACE_REPLAY_STEP\":\"3\"}}", "no DTRACE_OUT_DIR");
  const std::string out = "\"DTRACE_OUT_DIR\":\"" + (dir / "x") + "\"";
  refused("{\"request\":0,\"env\":{\"DTRACE_REPLAY_STEP\":\"3\"," + out + ","
          "\"DTRACE_LEVEL\":\"fine\"}}",
          "DTRACE_LEVEL=fine: not one of", RecorderError::Kind::environment);
  refused("{\"request\":0,\"env\":{\"DTRACE_REPLAY_STEP\":\"4\"," + out + "}}",
          "DTRACE_REPLAY_STEP=4: this session replays step 3", RecorderError::Kind::environment);
  refused("{\"request\":0,\"env\":{" + out + "}}",
          "DTRACE_REPLAY_STEP=(unset)", RecorderError::Kind::environment);
}

TEST_CASE("a session is opened only under DTRACE_SESSION, with its step") {
  TempDir dir;
  CHECK_FALSE(ReplaySession::from_variables({{"DTRACE_REPLAY_STEP", "3"}}, {0}));
  CHECK_FALSE(ReplaySession::from_variables({{"DTRACE_SESSION", ""}}, {0}));
  auto kind_of = [](const Variables& variables, std::vector<int> ranks = {0}) {
    try {
      ReplaySession::from_variables(variables, std::move(ranks));
    } catch (const RecorderError& e) {
      return e.kind();
    }
    FAIL("accepted");
    return RecorderError::Kind::io;
  };
  CHECK(kind_of({{"DTRACE_SESSION", dir / "none"}, {"DTRACE_REPLAY_STEP", "3"}}) ==
        RecorderError::Kind::environment);
  CHECK(kind_of({{"DTRACE_SESSION", dir.root()}}) == RecorderError::Kind::environment);
  CHECK(kind_of({{"DTRACE_SESSION", dir.root()}, {"DTRACE_REPLAY_STEP", "x"}}) ==
        RecorderError::Kind::environment);
  CHECK(kind_of({{"DTRACE_SESSION", dir.root()}, {"DTRACE_REPLAY_STEP", "3"}}, {}) ==
        RecorderError::Kind::argument);
}

TEST_CASE("requests and done must alternate") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  auto session = open_session(session_dir);
  CHECK_THROWS_AS(session->done(), RecorderError);
  write_env_request(session_dir, 0, step_replay(dir / "a"));
  REQUIRE(session->next(std::chrono::seconds(5)));
  try {
    session->next(std::chrono::seconds(1));
    FAIL("a second request before done");
  } catch (const RecorderError& e) {
    CHECK(e.kind() == RecorderError::Kind::order);
  }
  session->done();
  CHECK_THROWS_AS(session->next(std::chrono::milliseconds(30)), RecorderError);  // none came
}

TEST_CASE("a process that fails in a request leaves its exit code in that request's directory") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  fs::create_directories(session_dir);
  write_env_request(session_dir, 0, step_replay(dir / "a"));
  write_env_request(session_dir, 1, step_replay(dir / "b"));
  write_env_request(session_dir, 2, step_replay(dir / "c"));
  pid_t child = 0;
  auto run_child = [&](int fail_in) {
    std::fflush(nullptr);
    child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      auto session = open_session(session_dir, {1});
      auto options = test_support::options_for(dir / "run", 1, 2);
      for (int k = 0; k < 3; ++k) {
        auto request = session->next(std::chrono::seconds(5));
        if (k == fail_in) std::exit(7);  // before its recorder opens
        serve(options, *request, 1.0f);
        session->done();
      }
      std::exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
  };
  CHECK(run_child(1) == 7);
  CHECK(status_of(dir / "a", 1).starts_with("done "));
  CHECK(status_of(dir / "b", 1).starts_with("exit 7 "));
  // "exit CODE TIME PID": whose exit it is, for a reader that never saw its "running" line.
  std::istringstream exit_line(status_of(dir / "b", 1));
  std::string word, code, time, pid;
  exit_line >> word >> code >> time >> pid;
  CHECK(pid == std::to_string(child));
  CHECK_FALSE(fs::exists(dir / "c"));

  // Served to the end, the exit 0 reaches no request's status: done stays.
  write_end(session_dir, 3);
  for (const char* d : {"a", "b"}) fs::remove_all(dir / d);
  CHECK(run_child(-1) == 0);
  for (const char* d : {"a", "b", "c"}) CHECK(status_of(dir / d, 1).starts_with("done "));
}

TEST_CASE("a request refused for its variables fails in its own directory") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  fs::create_directories(session_dir);
  auto variables = step_replay(dir / "a");
  variables["DTRACE_LEVEL"] = "fine";
  write_env_request(session_dir, 0, variables);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      open_session(session_dir, {0, 1})->next(std::chrono::seconds(5));
    } catch (const RecorderError&) {
      std::exit(2);  // as a program's main does
    }
    std::exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(status_of(dir / "a", 0).starts_with("exit 2 "));
  CHECK(status_of(dir / "a", 1).starts_with("exit 2 "));
}

TEST_CASE("a declined request leaves each rank's declined status, and the session goes on") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  fs::create_directories(session_dir);
  write_env_request(session_dir, 0, step_replay(dir / "a"));
  write_env_request(session_dir, 1, step_replay(dir / "b"));
  write_env_request(session_dir, 2, step_replay(dir / "c"));
  write_end(session_dir, 3);
  // In a child, so that its exit handler runs: the exit 0 after the end
  // request must not reach a declined request's status either.
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    try {
      auto session = open_session(session_dir, {0, 1});
      auto options = test_support::options_for(dir / "run", 0, 2);
      options.serves_sessions = true;
      std::vector<bool> first;
      for (int k = 0; auto request = session->next(std::chrono::seconds(5)); ++k) {
        first.push_back(session->first_step_request());
        if (k == 1) {
          // Before the declining, its recorder opened and closed: what it
          // wrote stays as it is, the status says declined.
          serve(options, *request, 1.0f);
        }
        if (k < 2) {
          session->decline("step " + std::to_string(k) + " needs a fresh process");
        } else {
          serve(options, *request, 2.0f);
          session->done();
        }
        if (session->variables().size() != 0) code = 4;
      }
      // A declined first step replay restored nothing: the next step request
      // is the first again.
      if (first != std::vector<bool>{true, true, true}) code = 3;
    } catch (const RecorderError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      code = 2;
    }
    std::exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (int rank = 0; rank < 2; ++rank) {
    // "declined PID REASON", the whole line, once.
    CHECK(file_text(dir / ("a/rank" + std::to_string(rank) + ".status")) ==
          "declined " + std::to_string(child) + " step 0 needs a fresh process\n");
    CHECK(file_text(dir / ("b/rank" + std::to_string(rank) + ".status")) ==
          "declined " + std::to_string(child) + " step 1 needs a fresh process\n");
    CHECK(status_of(dir / "c", rank).starts_with("done " + std::to_string(child) + " "));
  }
  // No temporary file of the rename left beside the statuses.
  for (const char* d : {"a", "b"}) {
    for (const auto& entry : fs::directory_iterator(dir / d)) {
      CHECK_FALSE(entry.path().filename().string().starts_with("."));
    }
  }
}

TEST_CASE("decline needs a request being served and a one-line reason") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  auto session = open_session(session_dir);
  try {
    session->decline("no request");
    FAIL("a decline without a request");
  } catch (const RecorderError& e) {
    CHECK(e.kind() == RecorderError::Kind::order);
  }
  write_env_request(session_dir, 0, step_replay(dir / "a"));
  REQUIRE(session->next(std::chrono::seconds(5)));
  for (const char* reason : {"", "  ", "two\nlines"}) {
    try {
      session->decline(reason);
      FAIL("a decline for a reason of \"" << reason << "\"");
    } catch (const RecorderError& e) {
      CHECK(e.kind() == RecorderError::Kind::argument);
    }
  }
  // Still serving: the request can be answered after a refused decline.
  CHECK(status_of(dir / "a").starts_with("running "));
  session->done();
  CHECK(status_of(dir / "a").starts_with("done "));
  CHECK_THROWS_AS(session->decline("after done"), RecorderError);
}

// The process environment the C API reads, set for one test and restored.
struct SessionEnvironment {
  SessionEnvironment(const std::string& dir, const char* step) {
    fs::create_directories(dir);
    ::setenv("DTRACE_SESSION", dir.c_str(), 1);
    ::setenv("DTRACE_REPLAY_STEP", step, 1);
  }
  ~SessionEnvironment() {
    ::unsetenv("DTRACE_SESSION");
    ::unsetenv("DTRACE_REPLAY_STEP");
  }
};

TEST_CASE("C API: a session serves requests through dtrace_recorder_open_session") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  const int32_t ranks[] = {0};
  dtrace_session* none = nullptr;
  CHECK(dtrace_session_open(ranks, 1, &none) == DTRACE_OK);  // no DTRACE_SESSION
  CHECK(none == nullptr);

  SessionEnvironment environment(session_dir, "3");
  write_env_request(session_dir, 0, step_replay(dir / "a"));
  write_request(session_dir, 1, {{"env", {{"DTRACE_OUT_DIR", dir / "b"}}}});  // no step
  dtrace_session* session = nullptr;
  REQUIRE(dtrace_session_open(ranks, 1, &session) == DTRACE_OK);
  REQUIRE(session != nullptr);
  int64_t step = -1;
  CHECK(dtrace_session_step(session, &step) == DTRACE_OK);
  CHECK(step == 3);
  dtrace_run_options options;
  dtrace_run_options_init(&options);
  const char* argv[] = {"ctrain"};
  options.replay_argv = argv;
  options.replay_argc = 1;
  dtrace_recorder* early = nullptr;
  CHECK(dtrace_recorder_open_session(&options, session, &early) == DTRACE_ERROR_ORDER);
  dtrace_recorder_close(early);

  int32_t more = -1, first = -1;
  REQUIRE(dtrace_session_next(session, 5000, &more) == DTRACE_OK);
  CHECK(more == 1);
  CHECK(dtrace_session_first_step_request(session, &first) == DTRACE_OK);
  CHECK(first == 1);
  const char* value = nullptr;
  CHECK(dtrace_session_variable(session, "DTRACE_LEVEL", &value) == DTRACE_OK);
  CHECK(std::string(value) == "layer");
  CHECK(dtrace_session_variable(session, "DTRACE_SCOPE", &value) == DTRACE_OK);
  CHECK(value == nullptr);
  dtrace_recorder* recorder = nullptr;
  REQUIRE(dtrace_recorder_open_session(&options, session, &recorder) == DTRACE_OK);
  int64_t replay_step = -1;
  CHECK(dtrace_recorder_replay_step(recorder, &replay_step) == DTRACE_OK);
  CHECK(replay_step == 3);
  REQUIRE(dtrace_recorder_begin_step(recorder, 3) == DTRACE_OK);
  REQUIRE(dtrace_recorder_end_step(recorder) == DTRACE_OK);
  REQUIRE(dtrace_recorder_close(recorder) == DTRACE_OK);
  REQUIRE(dtrace_session_done(session) == DTRACE_OK);
  CHECK(status_of(dir / "a").starts_with("done "));
  CHECK(test_support::first_line(dir / "a/rank0.jsonl").find("\"protocol\":\"dtrace-replay/1.2\"") !=
        std::string::npos);
  CHECK(dtrace_session_done(session) == DTRACE_ERROR_ORDER);

  // A request this session cannot serve: the code, and the message names the file.
  CHECK(dtrace_session_next(session, 5000, &more) == DTRACE_ERROR_ENVIRONMENT);
  CHECK(std::string(dtrace_session_last_error(session)).starts_with(session_dir + "/request.1.json: "));
  CHECK(dtrace_session_close(session) == DTRACE_OK);

  // Without a session, a program that serves them still announces 1.2.
  options.run_dir = nullptr;
  const std::string run_dir = dir / "run";
  options.run_dir = run_dir.c_str();
  ::unsetenv("DTRACE_REPLAY_STEP");
  REQUIRE(dtrace_recorder_open_session(&options, nullptr, &recorder) == DTRACE_OK);
  REQUIRE(dtrace_recorder_close(recorder) == DTRACE_OK);
  CHECK(test_support::first_line(run_dir + "/rank0.jsonl").find("\"protocol\":\"dtrace-replay/1.2\"") !=
        std::string::npos);
}

TEST_CASE("C API: a session that cannot open says why, the end request ends it") {
  TempDir dir;
  const int32_t ranks[] = {0, 1};
  {
    SessionEnvironment environment(dir / "session", "x");
    dtrace_session* session = nullptr;
    CHECK(dtrace_session_open(ranks, 2, &session) == DTRACE_ERROR_ENVIRONMENT);
    REQUIRE(session != nullptr);
    CHECK(std::string(dtrace_session_last_error(session)).starts_with("DTRACE_REPLAY_STEP=x"));
    int32_t more = 0;
    CHECK(dtrace_session_next(session, 0, &more) == DTRACE_ERROR_ORDER);
    dtrace_session_close(session);
  }
  SessionEnvironment environment(dir / "session", "2");
  write_end(dir / "session", 0);
  dtrace_session* session = nullptr;
  REQUIRE(dtrace_session_open(ranks, 2, &session) == DTRACE_OK);
  int32_t more = -1;
  CHECK(dtrace_session_next(session, 5000, &more) == DTRACE_OK);
  CHECK(more == 0);
  CHECK(dtrace_session_next(session, 5000, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
  dtrace_session_close(session);
}

TEST_CASE("C API: dtrace_session_decline declines the request, and the next is served") {
  TempDir dir;
  const std::string session_dir = dir / "session";
  SessionEnvironment environment(session_dir, "3");
  write_env_request(session_dir, 0, step_replay(dir / "a"));
  write_env_request(session_dir, 1, step_replay(dir / "b"));
  const int32_t ranks[] = {0};
  dtrace_session* session = nullptr;
  REQUIRE(dtrace_session_open(ranks, 1, &session) == DTRACE_OK);
  REQUIRE(session != nullptr);
  CHECK(dtrace_session_decline(nullptr, "x") == DTRACE_ERROR_INVALID_ARGUMENT);
  CHECK(dtrace_session_decline(session, "between requests") == DTRACE_ERROR_ORDER);
  int32_t more = 0, first = 0;
  REQUIRE(dtrace_session_next(session, 5000, &more) == DTRACE_OK);
  CHECK(dtrace_session_decline(session, nullptr) == DTRACE_ERROR_INVALID_ARGUMENT);
  CHECK(dtrace_session_decline(session, "") == DTRACE_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(dtrace_session_last_error(session)).find("the reason is empty") != std::string::npos);
  REQUIRE(dtrace_session_decline(session, "a fresh process, please") == DTRACE_OK);
  CHECK(status_of(dir / "a") == "declined " + std::to_string(::getpid()) + " a fresh process, please\n");
  REQUIRE(dtrace_session_next(session, 5000, &more) == DTRACE_OK);
  CHECK(more == 1);
  CHECK(dtrace_session_first_step_request(session, &first) == DTRACE_OK);
  CHECK(first == 1);
  REQUIRE(dtrace_session_done(session) == DTRACE_OK);
  CHECK(status_of(dir / "b").starts_with("done "));
  dtrace_session_close(session);
}
