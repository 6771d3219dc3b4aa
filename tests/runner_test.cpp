#include "replay/runner.hpp"

#include <catch2/catch.hpp>

using dtrace::replay::Command;
using dtrace::replay::run;
using dtrace::replay::split_words;

TEST_CASE("runner reports the exit status and the tail of stderr") {
  auto outcome = run(Command{{"/bin/sh", "-c", "echo oops >&2; exit 3"}, {}, "", 10});
  REQUIRE(outcome.ok());
  CHECK(outcome->exit_code == 3);
  CHECK_FALSE(outcome->ok());
  CHECK(outcome->stderr_tail == "oops\n");
  CHECK(outcome->describe() == "exit 3");
}

TEST_CASE("runner passes extra variables and runs in the given directory") {
  auto outcome = run(Command{{"/bin/sh", "-c", "test \"$DTRACE_OUT\" = /x && test \"$(pwd)\" = /tmp"},
                             {{"DTRACE_OUT", "/x"}}, "/tmp", 10});
  REQUIRE(outcome.ok());
  CHECK(outcome->ok());
}

TEST_CASE("runner kills a command that outlives its timeout, with its children") {
  auto outcome = run(Command{{"/bin/sh", "-c", "sleep 30 & sleep 30"}, {}, "", 0.3});
  REQUIRE(outcome.ok());
  CHECK(outcome->timed_out);
  CHECK(outcome->seconds < 5);
}

TEST_CASE("runner names the signal that ended a crash") {
  auto outcome = run(Command{{"/bin/sh", "-c", "kill -SEGV $$"}, {}, "", 10});
  REQUIRE(outcome.ok());
  CHECK(outcome->signal == 11);
  CHECK(outcome->describe().find("signal 11") != std::string::npos);
}

TEST_CASE("runner reports a program that cannot be started") {
  auto outcome = run(Command{{"/nonexistent/minitrain"}, {}, "", 10});
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.error().message.find("/nonexistent/minitrain") != std::string::npos);
}

TEST_CASE("split_words splits like a shell without expanding") {
  auto words = split_words("minitrain --out 'a b' \"c \\\"d\\\"\" e\\ f $HOME");
  REQUIRE(words.ok());
  CHECK(*words == std::vector<std::string>{"minitrain", "--out", "a b", "c \"d\"", "e f", "$HOME"});
  CHECK_FALSE(split_words("x 'unterminated").ok());
  CHECK_FALSE(split_words("   ").ok());
}
