// The chained step digest (dtrace-fp(5)): its known answer, how readers take
// the end record's field, and how a chain that its records do not give (a
// buggy recorder) is found and reported by certification instead of trusted.
#include "log/chain.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "dtrace/recorder.hpp"
#include "log/certify.hpp"
#include "log/reader.hpp"
#include "recorder_support.hpp"

using dtrace::Level;
using dtrace::Recorder;
using dtrace::RecordIo;
using dtrace::ReplayRequest;
using dtrace::log::ViolationKind;
using test_support::options_for;
using test_support::TempDir;
using test_support::view;

namespace {

// A run of one rank and `steps` steps written by the recorder.
void record_run(const std::string& dir, int steps) {
  auto recorder = Recorder::open(options_for(dir), ReplayRequest{});
  const std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f};
  for (int step = 0; step < steps; ++step) {
    recorder->begin_step(step);
    auto layer = recorder->scope("fwd/layer.0");
    recorder->tensor(Level::layer, "block", RecordIo::out, "y", view(x, {2, 2}));
    recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 1.0f + step);
    recorder->end_step();
  }
}

std::vector<std::string> lines_of(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void write_lines(const std::string& file, const std::vector<std::string>& lines) {
  std::ofstream out(file, std::ios::trunc);
  for (const auto& line : lines) out << line << '\n';
}

// Replaces the first occurrence of `from` in line `index`.
void edit_line(std::vector<std::string>& lines, std::size_t index, const std::string& from,
               const std::string& to) {
  const auto at = lines.at(index).find(from);
  REQUIRE(at != std::string::npos);
  lines[index].replace(at, from.size(), to);
}

dtrace::log::Certification certify(const std::string& path) {
  auto result = dtrace::log::certify_run(path);
  INFO((result ? std::string() : result.error().message));
  REQUIRE(result.ok());
  return std::move(*result);
}

std::uint64_t chain_mismatches(const dtrace::log::Certification& c) {
  return c.counts[static_cast<std::size_t>(ViolationKind::chain_mismatch)];
}

}  // namespace

TEST_CASE("chain known answer: step 0, no compared record, chained to 0") {
  dtrace::log::ChainHasher hasher;
  hasher.begin(0, 0);
  CHECK(dtrace::log::chain_hex(hasher.finish()) == "d0a66a65c7528968");
}

TEST_CASE("a run written by the recorder certifies with every chain verified") {
  TempDir dir;
  record_run(dir / "run", 4);
  const auto c = certify(dir / "run");
  CHECK(c.certified());
  // Lines: header, then per step two records and the end record.
  const auto lines = lines_of(dir / "run/rank0.jsonl");
  REQUIRE(lines.size() == 1 + 4 * 3);
  CHECK_THAT(lines[3], Catch::Contains("\"chain\":\""));
}

TEST_CASE("the recorder writes each end record's own line number; check verifies it") {
  TempDir dir;
  record_run(dir / "run", 3);
  const std::string file = dir / "run/rank0.jsonl";
  auto lines = lines_of(file);
  REQUIRE(lines.size() == 1 + 3 * 3);
  for (std::size_t i : {3u, 6u, 9u}) CHECK_THAT(lines[i], Catch::EndsWith(",\"line\":" + std::to_string(i + 1) + "}"));
  {
    auto reader = dtrace::log::RunReader::open(dir / "run");
    REQUIRE(reader.ok());
    auto step = (*reader)->next();
    REQUIRE((step.ok() && *step));
    CHECK((**step).logged_line == 4);
    CHECK((**step).end_line == 4);
  }
  edit_line(lines, 6, "\"line\":7", "\"line\":8");
  write_lines(file, lines);
  const auto c = certify(dir / "run");
  CHECK_FALSE(c.certified());
  CHECK(c.counts[static_cast<std::size_t>(ViolationKind::line_mismatch)] == 1);
  REQUIRE(c.violations.size() == 1);
  CHECK(c.violations[0].step == 1);
  CHECK_THAT(c.violations[0].message, Catch::Contains("end record says it is line 8, it is line 7"));
  CHECK_THAT(c.violations[0].location, Catch::Contains("rank0.jsonl:7"));
  SECTION("a line number that is not an integer of 2 or more: a malformed end record") {
    for (const std::string& bad : std::vector<std::string>{"1", "\"7\"", "-3"}) {
      auto broken = lines;
      edit_line(broken, 6, "\"line\":8", "\"line\":" + bad);
      write_lines(file, broken);
      auto result = dtrace::log::certify_run(dir / "run");
      REQUIRE_FALSE(result.ok());
      CHECK_THAT(result.error().message, Catch::Contains("rank0.jsonl:7"));
      CHECK_THAT(result.error().message, Catch::Contains("line"));
    }
  }
}

TEST_CASE("a chain its records do not give (a buggy recorder) is a chain-mismatch, once") {
  TempDir dir;
  record_run(dir / "run", 4);
  const std::string file = dir / "run/rank0.jsonl";
  auto lines = lines_of(file);
  // Step 1's loss record says 2.0 (bits 40000000); make it 2.5 while its end
  // record keeps the chain of 2.0: what a recorder that chained other bits writes.
  edit_line(lines, 1 + 3 + 1, "\"bits\":\"40000000\"", "\"bits\":\"40200000\"");
  write_lines(file, lines);
  const auto c = certify(dir / "run");
  CHECK_FALSE(c.certified());
  CHECK(chain_mismatches(c) == 1);  // step 2 chains to step 1's logged chain: still right
  REQUIRE(c.violations.size() == 1);
  CHECK(c.violations[0].step == 1);
  CHECK(c.violations[0].rank == 0);
  CHECK_THAT(c.violations[0].message, Catch::Contains("its records give"));
  CHECK_THAT(c.violations[0].location, Catch::Contains("rank0.jsonl:5"));
}

TEST_CASE("a chain changed in the end record itself is a chain-mismatch") {
  TempDir dir;
  record_run(dir / "run", 3);
  const std::string file = dir / "run/rank0.jsonl";
  auto lines = lines_of(file);
  const auto at = lines[6].find("\"chain\":\"");
  REQUIRE(at != std::string::npos);
  char& digit = lines[6][at + 9];
  digit = digit == '0' ? '1' : '0';
  write_lines(file, lines);
  // Step 1's records do not give the logged chain, and step 2, chained to
  // step 1's logged chain, no longer gives its own: both are reported.
  const auto c = certify(dir / "run");
  CHECK(chain_mismatches(c) == 2);
  REQUIRE(c.violations.size() == 2);
  CHECK(c.violations[0].step == 1);
  CHECK(c.violations[1].step == 2);
}

TEST_CASE("logs mixing steps with and without chains: absent is no violation, chains restart at 0") {
  TempDir dir;
  record_run(dir / "run", 2);
  const std::string file = dir / "run/rank0.jsonl";
  auto lines = lines_of(file);
  // Step 0 loses its chain. Step 1 was chained to it, so by dtrace-fp(5)
  // (chain_prev 0 after an end record without chain) it no longer matches;
  // give step 1 the chain a writer that starts over at 0 writes.
  auto reread = dtrace::log::RunReader::open(dir / "run");
  REQUIRE(reread.ok());
  auto step0 = (*reread)->next();
  auto step1 = (*reread)->next();
  REQUIRE((step0.ok() && step1.ok() && *step0 && *step1));
  const std::string old_chain = dtrace::log::chain_hex(*(**step1).chain);
  const std::string restarted = dtrace::log::chain_hex(dtrace::log::step_chain(0, **step1));
  const std::string step0_chain = dtrace::log::chain_hex(*(**step0).chain);
  edit_line(lines, 3, ",\"chain\":\"" + step0_chain + "\"", "");
  edit_line(lines, 6, old_chain, restarted);
  write_lines(file, lines);
  const auto c = certify(dir / "run");
  CHECK(c.certified());

  // And the recorder's own step 1 chain, after a chainless step 0, is reported.
  edit_line(lines, 6, restarted, old_chain);
  write_lines(file, lines);
  CHECK(chain_mismatches(certify(dir / "run")) == 1);
}

TEST_CASE("a step without a chain between chained steps is a chain-gap, once per gap") {
  TempDir dir;
  record_run(dir / "run", 6);
  const std::string file = dir / "run/rank0.jsonl";
  auto lines = lines_of(file);
  // Steps 2 and 3 lose their chains (end records on lines 10 and 13); step 4,
  // chained to step 3's end record, then starts anew at 0, as dtrace-fp(5)
  // says: equal chains from step 4 on would say nothing of steps 2 and 3.
  {
    // The steps' strings belong to the reader: chains are computed while it lives.
    auto reader = dtrace::log::RunReader::open(dir / "run");
    REQUIRE(reader.ok());
    std::uint64_t previous = 0;
    for (std::size_t s = 0; s < 6; ++s) {
      auto step = (*reader)->next();
      REQUIRE((step.ok() && *step));
      const std::string logged = dtrace::log::chain_hex(*(**step).chain);
      if (s == 2 || s == 3) edit_line(lines, 3 * s + 3, ",\"chain\":\"" + logged + "\"", "");
      if (s >= 4) {
        previous = dtrace::log::step_chain(previous, **step);
        edit_line(lines, 3 * s + 3, logged, dtrace::log::chain_hex(previous));
      }
    }
  }
  write_lines(file, lines);
  const auto c = certify(dir / "run");
  CHECK(chain_mismatches(c) == 0);
  CHECK(c.counts[static_cast<std::size_t>(ViolationKind::chain_gap)] == 1);
  REQUIRE(c.violations.size() == 1);
  CHECK(c.violations[0].step == 2);
  CHECK(c.violations[0].rank == 0);
  CHECK_THAT(c.violations[0].message, Catch::Contains("carries no chain, after chained steps"));
  CHECK_THAT(c.violations[0].location, Catch::Contains("rank0.jsonl:8"));
}

TEST_CASE("the chain field reads alike on the fast path and the full parser; bad ones are errors") {
  TempDir dir;
  record_run(dir / "run", 2);
  const std::string file = dir / "run/rank0.jsonl";
  auto lines = lines_of(file);
  std::string chain1;
  {
    auto reader = dtrace::log::RunReader::open(dir / "run");
    REQUIRE(reader.ok());
    (void)(*reader)->next();
    auto step = (*reader)->next();
    REQUIRE((step.ok() && *step && (**step).chain));
    chain1 = dtrace::log::chain_hex(*(**step).chain);
  }
  SECTION("spaces and another field order: the full parser") {
    lines[6] = "{ \"line\": 7, \"chain\" : \"" + chain1 + "\", \"end\": true, \"count\": 2, \"rank\": 0, \"step\": 1 }";
    write_lines(file, lines);
    CHECK(certify(dir / "run").certified());
    auto reader = dtrace::log::RunReader::open(dir / "run");
    (void)(*reader)->next();
    auto step = (*reader)->next();
    REQUIRE((step.ok() && *step && (**step).chain));
    CHECK(dtrace::log::chain_hex(*(**step).chain) == chain1);
    CHECK((**step).logged_line == 7);
  }
  SECTION("not 16 hex digits: a malformed end record, named by file and line") {
    for (const std::string& bad : std::vector<std::string>{"\"" + chain1.substr(1) + "\"", "\"zz" + chain1.substr(2) + "\"", std::string("17")}) {
      auto broken = lines;
      edit_line(broken, 6, "\"" + chain1 + "\"", bad);
      broken.push_back(lines[1]);  // not the last line: a cut-short last line is a truncation
      write_lines(file, broken);
      auto result = dtrace::log::certify_run(dir / "run");
      REQUIRE_FALSE(result.ok());
      CHECK_THAT(result.error().message, Catch::Contains("rank0.jsonl:7"));
      CHECK_THAT(result.error().message, Catch::Contains("chain"));
    }
  }
}
