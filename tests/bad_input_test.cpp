// Bad input across the reading layers (log::RunReader, log::certify_run,
// diff::diff_runs): a run cut by a crash at every byte offset of its last
// 4 KiB, and files no recorder writes. Each must give a note or an Error that
// names the file (and line), never a crash; the CLI side of the same inputs is
// in tests/e2e/bad_*.sh and docs/bad-input.md lists them all.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "diff/diff.hpp"
#include "log/certify.hpp"
#include "log/reader.hpp"
#include "support.hpp"

using dtrace::log::certify_run;
using dtrace::log::RunReader;
using dtrace::log::ViolationKind;
using dtrace::test::TempDir;
using dtrace::test::write_text;

namespace {

constexpr int kSteps = 40;
constexpr int kRecordsPerStep = 6;

// One rank's log as a recorder writes it: header, then per step its records in
// seq order and its end record, every line canonical.
std::string rank_log(int rank) {
  std::ostringstream out;
  out << R"({"dtrace":"fp/1","run":"cut","world_size":2,"hash":"xxh3-64k/1","level":"layer"})"
      << "\n";
  for (int step = 0; step < kSteps; ++step) {
    for (int seq = 0; seq < kRecordsPerStep; ++seq) {
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016llx",
                    static_cast<unsigned long long>(step * 1000003ull + seq * 7919ull + 1));
      out << R"({"step":)" << step << R"(,"rank":)" << rank << R"(,"seq":)" << seq
          << R"(,"scope":"fwd/layer.)" << seq / 2 << R"(/mlp","op":"gemm_fc)" << seq % 2
          << R"(","io":"out","name":"y","dtype":"bf16","shape":[8,64],"hash":")" << hash
          << "\"}\n";
    }
    out << R"({"step":)" << step << R"(,"rank":)" << rank << R"(,"end":true,"count":)"
        << kRecordsPerStep << "}\n";
  }
  return out.str();
}

// What a reader must make of `text` (a log cut short): the steps begun but not
// ended, judged line by line with an independent JSON parser. A line counts
// when it is whole: ended by a newline, or the last one and valid JSON.
struct Expected {
  std::set<std::int64_t> incomplete;
  bool partial_last_line = false;
  bool header_cut = false;
};

Expected expect(const std::string& text) {
  Expected e;
  std::set<std::int64_t> begun, ended;
  std::size_t at = 0;
  bool first = true;
  while (at < text.size()) {
    const std::size_t newline = text.find('\n', at);
    const std::string line = text.substr(at, newline == std::string::npos ? std::string::npos : newline - at);
    at = newline == std::string::npos ? text.size() : newline + 1;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      REQUIRE(newline == std::string::npos);  // only the last line may be cut
      (first ? e.header_cut : e.partial_last_line) = true;
      break;
    }
    if (first) {
      first = false;
      continue;
    }
    (j.contains("end") ? ended : begun).insert(j["step"].get<std::int64_t>());
  }
  for (auto s : begun) {
    if (!ended.contains(s)) e.incomplete.insert(s);
  }
  return e;
}

bool has_note_with(const std::vector<std::string>& notes, const std::string& text) {
  for (const auto& n : notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a run cut at every byte offset of its last 4 KiB reads back, naming the incomplete step",
          "[bad-input]") {
  TempDir dir;
  const std::string whole = dir.path("whole/rank0.jsonl");
  write_text(whole, rank_log(0));
  write_text(dir.path("whole/rank1.jsonl"), rank_log(1));
  const std::string cut_file = dir.path("cut/rank1.jsonl");
  write_text(dir.path("cut/rank0.jsonl"), rank_log(0));
  const std::string full = rank_log(1);
  REQUIRE(full.size() > 4096);

  for (std::size_t size = full.size() - 4096; size <= full.size(); ++size) {
    INFO("rank1.jsonl cut to " << size << " of " << full.size() << " bytes");
    const std::string text = full.substr(0, size);
    write_text(cut_file, text);
    const Expected e = expect(text);

    auto c = certify_run(dir.path("cut"));
    REQUIRE(c.ok());
    std::set<std::int64_t> named;
    for (const auto& v : c->violations) {
      if (v.kind != ViolationKind::incomplete_step) continue;
      CHECK(v.rank == 1);
      named.insert(v.step.value_or(-1));
    }
    CHECK(named == e.incomplete);
    CHECK(e.incomplete.size() <= 1);
    CHECK(has_note_with(c->notes, cut_file + ":") == e.partial_last_line);

    // A diff against the whole run is identical over what both have complete.
    if (size % 17 == 0 || size == full.size()) {
      auto report = dtrace::diff::diff_runs(dir.path("whole"), dir.path("cut"));
      REQUIRE(report.ok());
      CHECK(!report->diverged());
    }
  }
}

TEST_CASE("files no recorder writes give an Error naming file and line, or a note", "[bad-input]") {
  TempDir dir;
  const std::string header =
      R"({"dtrace":"fp/1","run":"x","world_size":1,"hash":"xxh3-64k/1"})";
  const std::string record =
      R"({"step":0,"rank":0,"seq":0,"scope":"s","op":"o","io":"out","name":"n","hash":"0123456789abcdef"})";
  const std::string end = R"({"step":0,"rank":0,"end":true,"count":1})";
  auto read_error = [&](const std::string& text) -> std::string {
    const std::string file = dir.path("run.jsonl");
    write_text(file, text);
    auto reader = RunReader::open(file);
    if (!reader) return reader.error().message;
    while (true) {
      auto step = (*reader)->next();
      if (!step) return step.error().message;
      if (!*step) return "";
    }
  };
  const std::string file = dir.path("run.jsonl");

  SECTION("a NUL byte inside a record") {
    std::string bad = record;
    bad[20] = '\0';
    CHECK(read_error(header + "\n" + bad + "\n" + end + "\n") == file + ":2: not valid JSON");
  }
  SECTION("a NUL byte between lines") {
    CHECK(read_error(header + "\n" + std::string(1, '\0') + "\n" + record + "\n" + end + "\n") ==
          file + ":2: not valid JSON");
  }
  SECTION("nesting deeper than any parser allows") {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    std::string bad = record;
    bad.insert(1, R"("extra":)" + deep + ",");
    CHECK(read_error(header + "\n" + bad + "\n" + end + "\n") == file + ":2: not valid JSON");
  }
  SECTION("nesting in the header") {
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += R"({"a":)";
    deep += "1" + std::string(100000, '}');
    CHECK(read_error(R"({"dtrace":"fp/1","world_size":1,"hash":"xxh3-64k/1","config":)" + deep + "}\n") ==
          file + ":1: header nested deeper than 1024 levels (a log's first line must be its dtrace-fp/1 header)");
  }
  SECTION("numbers too large for their field") {
    CHECK(read_error(header + "\n" + R"({"step":99999999999999999999,"rank":0,"seq":0,"scope":"s","op":"o","io":"out","name":"n","hash":"0123456789abcdef"})" + "\n") ==
          file + ":2: field 'step' must be an integer");
    CHECK(read_error(header + "\n" + R"({"step":0,"rank":4294967296,"seq":0,"scope":"s","op":"o","io":"out","name":"n","hash":"0123456789abcdef"})" + "\n") ==
          file + ":2: field 'rank' out of range");
    CHECK(read_error(R"({"dtrace":"fp/1","world_size":1.5,"hash":"xxh3-64k/1"})" "\n") ==
          file + ":1: header field 'world_size' must be a positive integer (a log's first line must be its dtrace-fp/1 header)");
    CHECK(read_error(R"({"dtrace":"fp/1","world_size":1,"hash":"xxh3-64k/1","config":{"lr":1e400}})" "\n") ==
          file + ":1: header has a number beyond the range of a double: this reader cannot hold it "
                 "(a log's first line must be its dtrace-fp/1 header)");
  }
  SECTION("huge numbers in ignored fields are read past") {
    CHECK(read_error(header + "\n" + R"({"step":0,"rank":0,"seq":0,"scope":"s","op":"o","io":"out","name":"n","hash":"0123456789abcdef","x":1e99999,"y":-123456789012345678901234567890})" + "\n" + end + "\n") == "");
  }
  SECTION("a header twice") {
    CHECK(read_error(header + "\n" + header + "\n" + record + "\n") == file + ":2: a second header in one file");
  }
  SECTION("no header") {
    CHECK(read_error(record + "\n" + end + "\n") ==
          file + ":1: header without field 'dtrace' (a log's first line must be its dtrace-fp/1 header)");
  }
  SECTION("a byte-order mark and CRLF line ends are read") {
    CHECK(read_error("\xEF\xBB\xBF" + header + "\r\n" + record + "\r\n" + end + "\r\n") == "");
  }
  SECTION("a byte-order mark on a later line is not valid JSON") {
    CHECK(read_error(header + "\n\xEF\xBB\xBF" + record + "\n") == file + ":2: not valid JSON");
  }
}
