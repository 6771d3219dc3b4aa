// log::certify_run on runs built in a temporary directory: a clean run
// certifies, and each violation kind of `dtrace check` is found where it is.
#include "log/certify.hpp"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "dtrace/recorder.hpp"
#include "log/chain.hpp"
#include "log/writer.hpp"
#include "recorder_support.hpp"

namespace fs = std::filesystem;
using dtrace::log::Certification;
using dtrace::log::certify_run;
using dtrace::log::Violation;
using dtrace::log::ViolationKind;

namespace {

// A fresh directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "dtrace-certify-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

  // Writes lines verbatim, each ended by a newline.
  void write(const std::string& name, const std::vector<std::string>& lines) const {
    std::ofstream out(path_ / name);
    for (const auto& line : lines) out << line << "\n";
  }

 private:
  fs::path path_;
};

std::string header(int world_size = 2, const std::string& extra = "") {
  return R"({"dtrace":"fp/1","run":"t","world_size":)" + std::to_string(world_size) +
         R"(,"hash":"xxh3-64k/1","level":"layer")" + extra + "}";
}

std::string record(int rank, int step, int seq, const std::string& name = "") {
  const std::string n = name.empty() ? "t" + std::to_string(seq) : name;
  return R"({"step":)" + std::to_string(step) + R"(,"rank":)" + std::to_string(rank) +
         R"(,"seq":)" + std::to_string(seq) +
         R"(,"scope":"fwd/layer.0","op":"gemm","io":"out","name":")" + n +
         R"(","dtype":"f32","shape":[4],"hash":"00000000000000)" + std::to_string(10 + seq) + "\"}";
}

std::string end(int rank, int step, int count) {
  return R"({"step":)" + std::to_string(step) + R"(,"rank":)" + std::to_string(rank) +
         R"(,"end":true,"count":)" + std::to_string(count) + "}";
}

// A rank's lines for steps [first, last], three records each.
std::vector<std::string> rank_lines(int rank, int first, int last, int world_size = 2) {
  std::vector<std::string> lines{header(world_size)};
  for (int s = first; s <= last; ++s) {
    for (int q = 0; q < 3; ++q) lines.push_back(record(rank, s, q));
    lines.push_back(end(rank, s, 3));
  }
  return lines;
}

Certification certify(const TempDir& dir) {
  auto result = certify_run(dir.path().string());
  if (!result) FAIL("certify_run failed: " << result.error().message);
  return std::move(*result);
}

std::vector<Violation> of_kind(const Certification& c, ViolationKind kind) {
  std::vector<Violation> out;
  for (const auto& v : c.violations) {
    if (v.kind == kind) out.push_back(v);
  }
  return out;
}

std::uint64_t count(const Certification& c, ViolationKind kind) {
  return c.counts[static_cast<std::size_t>(kind)];
}

// Rank 0's steps [first, last] of a one-rank run, written by the recorder
// (chains from 0 at `first`, line numbers) under `dir`: per step, a tensor and
// the loss 1 + step, so two recordings agree on every step both hold.
// Returns its lines: the header, then each step's records and end record.
std::vector<std::string> recorded(const TempDir& dir, int first, int last) {
  const std::string out = dir.file("recorded-" + std::to_string(first) + "-" + std::to_string(last));
  {
    auto recorder = dtrace::Recorder::open(test_support::options_for(out), dtrace::ReplayRequest{});
    const std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f};
    for (int step = first; step <= last; ++step) {
      recorder->begin_step(step);
      auto layer = recorder->scope("fwd/layer.0");
      recorder->tensor(dtrace::Level::layer, "block", dtrace::RecordIo::out, "y", test_support::view(x, {2, 2}));
      recorder->scalar_f32(dtrace::Level::step, "loss", dtrace::RecordIo::metric, "loss", 1.0f + step);
      recorder->end_step();
    }
  }
  std::ifstream in(out + "/rank0.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  fs::remove_all(out);
  return lines;
}

// The lines of step `step` in recorded() lines: its records and end record.
std::vector<std::string> step_lines(const std::vector<std::string>& lines, int step) {
  std::vector<std::string> out;
  const std::string key = R"({"step":)" + std::to_string(step) + ",";
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].starts_with(key)) out.push_back(lines[i]);
  }
  REQUIRE_FALSE(out.empty());
  return out;
}

// A file of `lines`' header and the given steps in that order (a step may
// repeat), each end record's `line` set to the line it is now on. The header's
// `rank` declaration (one rank in step order, dtrace-fp(5)) is dropped: these
// are other writers' layouts, which the reader would hold to it.
std::vector<std::string> laid_out(const std::vector<std::string>& lines, const std::vector<int>& steps) {
  static const std::regex declared(R"(,"rank":[0-9]+)");
  std::vector<std::string> out{std::regex_replace(lines.front(), declared, "")};
  static const std::regex line_field(R"("line":[0-9]+)");
  for (int s : steps) {
    for (const auto& line : step_lines(lines, s)) {
      out.push_back(std::regex_replace(line, line_field, "\"line\":" + std::to_string(out.size() + 1)));
    }
  }
  return out;
}

// Changes the loss of step `step` in `file_lines`, its chain kept: records that
// are not what the end record's chain digests.
void alter_loss(std::vector<std::string>& file_lines, int step) {
  const std::string key = R"({"step":)" + std::to_string(step) + ",";
  for (auto& line : file_lines) {
    if (line.starts_with(key) && line.find(R"("loss")") != std::string::npos) {
      const auto at = line.find(R"("bits":")");
      REQUIRE(at != std::string::npos);
      char& digit = line[at + 8];
      digit = digit == '0' ? '1' : '0';
      return;
    }
  }
  FAIL("no loss of step " << step);
}

std::uint64_t chain_mismatches(const Certification& c) { return count(c, ViolationKind::chain_mismatch); }

}  // namespace

TEST_CASE("a clean run written by log::Writer certifies") {
  TempDir dir;
  dtrace::log::Header h;
  h.format = "fp/1";
  h.run = "clean";
  h.world_size = 2;
  h.hash = "xxh3-64k/1";
  h.level = "layer";
  for (int rank = 0; rank < 2; ++rank) {
    auto writer = dtrace::log::Writer::create(dir.file("rank" + std::to_string(rank) + ".jsonl"));
    REQUIRE(writer.ok());
    writer->header(h);
    const std::vector<std::int64_t> shape{2, 3};
    for (int step = 0; step < 5; ++step) {
      for (int seq = 0; seq < 4; ++seq) {
        dtrace::log::Record r;
        r.step = step;
        r.rank = rank;
        r.seq = seq;
        r.scope = "fwd/layer.0/mlp";
        r.op = seq % 2 == 0 ? "gemm_fc1" : "gelu";
        r.io = seq < 2 ? dtrace::log::Io::in : dtrace::log::Io::out;
        r.name = "x";
        r.dtype = "bf16";
        r.has_shape = true;
        r.shape = shape;
        r.digest = dtrace::log::Digest::from_u64(0x1234u + static_cast<unsigned>(seq));
        writer->record(r);
      }
      writer->end_step(rank, step, 4);
    }
    REQUIRE(writer->flush().ok());
  }
  const Certification c = certify(dir);
  CHECK(c.certified());
  CHECK(c.violations.empty());
  CHECK(c.ranks_present == 2);
  CHECK(c.world_size == 2);
  CHECK(c.steps.to_string() == "0-4");
  CHECK(c.records == 40);
  CHECK(c.files.size() == 2);
}

TEST_CASE("a rank of world_size with no lines is absent") {
  TempDir dir;
  dir.write("rank0.jsonl", rank_lines(0, 0, 1, 4));
  dir.write("rank2.jsonl", rank_lines(2, 0, 1, 4));
  const Certification c = certify(dir);
  CHECK_FALSE(c.certified());
  const auto absent = of_kind(c, ViolationKind::rank_absent);
  REQUIRE(absent.size() == 2);
  CHECK(absent[0].rank == 1);
  CHECK(absent[1].rank == 3);
  CHECK(c.ranks_present == 2);
}

TEST_CASE("absent ranks of a huge world_size are counted, not all listed") {
  TempDir dir;
  dir.write("rank0.jsonl", rank_lines(0, 0, 0, 1000000));
  const Certification c = certify(dir);
  CHECK(count(c, ViolationKind::rank_absent) == 999999);
  CHECK(of_kind(c, ViolationKind::rank_absent).size() == Certification::kMaxListed);
  CHECK(c.unlisted_violations() == 999999 - Certification::kMaxListed);
}

TEST_CASE("ranks with different step sets name the missing steps per rank") {
  TempDir dir;
  dir.write("rank0.jsonl", rank_lines(0, 0, 9));
  auto lines = rank_lines(1, 0, 3);
  auto tail = rank_lines(1, 7, 9);
  lines.insert(lines.end(), tail.begin() + 1, tail.end());
  dir.write("rank1.jsonl", lines);
  const Certification c = certify(dir);
  const auto differ = of_kind(c, ViolationKind::steps_differ);
  REQUIRE(differ.size() == 1);
  CHECK(differ[0].rank == 1);
  CHECK(differ[0].step == 4);
  CHECK_THAT(differ[0].message, Catch::Contains("3 steps (4-6)"));
  CHECK(c.steps.to_string() == "0-9");
}

TEST_CASE("two different records with one seq break strictly increasing seq") {
  TempDir dir;
  dir.write("rank0.jsonl", rank_lines(0, 0, 1));
  dir.write("rank1.jsonl",
            {header(), record(1, 0, 0), record(1, 0, 1, "a"), record(1, 0, 1, "b"), end(1, 0, 3),
             record(1, 1, 0), record(1, 1, 1), record(1, 1, 2), end(1, 1, 3)});
  const Certification c = certify(dir);
  const auto seq = of_kind(c, ViolationKind::seq_not_increasing);
  REQUIRE(seq.size() == 1);
  CHECK(seq[0].rank == 1);
  CHECK(seq[0].step == 0);
  CHECK(seq[0].location == dir.file("rank1.jsonl") + ":4");
  CHECK(count(c, ViolationKind::duplicate_record) == 0);
}

TEST_CASE("the same record written twice is a duplicate identity") {
  TempDir dir;
  dir.write("rank0.jsonl", {header(), record(0, 0, 0), record(0, 0, 1), record(0, 0, 1),
                            record(0, 0, 2), end(0, 0, 4)});
  dir.write("rank1.jsonl", rank_lines(1, 0, 0));
  const Certification c = certify(dir);
  const auto dup = of_kind(c, ViolationKind::duplicate_record);
  REQUIRE(dup.size() == 1);
  CHECK(dup[0].rank == 0);
  CHECK(dup[0].step == 0);
  CHECK(dup[0].location == dir.file("rank0.jsonl") + ":4");
  CHECK_THAT(dup[0].message, Catch::Contains(dir.file("rank0.jsonl") + ":3"));
  CHECK(count(c, ViolationKind::seq_not_increasing) == 0);
  // The end record counted the duplicate, so the step itself is complete.
  CHECK(count(c, ViolationKind::count_mismatch) == 0);
}

TEST_CASE("a step without its end record is incomplete") {
  TempDir dir;
  dir.write("rank0.jsonl", rank_lines(0, 0, 2));
  auto lines = rank_lines(1, 0, 1);
  lines.push_back(record(1, 2, 0));
  lines.push_back(record(1, 2, 1));
  dir.write("rank1.jsonl", lines);
  const Certification c = certify(dir);
  const auto incomplete = of_kind(c, ViolationKind::incomplete_step);
  REQUIRE(incomplete.size() == 1);
  CHECK(incomplete[0].rank == 1);
  CHECK(incomplete[0].step == 2);
  CHECK(incomplete[0].location == dir.file("rank1.jsonl") + ":11");
  // The step is there on both ranks: the step sets agree.
  CHECK(count(c, ViolationKind::steps_differ) == 0);
  CHECK(c.total_violations() == 1);
}

TEST_CASE("an end record whose count disagrees is a count mismatch") {
  TempDir dir;
  dir.write("rank0.jsonl", {header(), record(0, 0, 0), record(0, 0, 1), end(0, 0, 5)});
  dir.write("rank1.jsonl", {header(), record(1, 0, 0), record(1, 0, 1), record(1, 0, 2),
                            record(1, 0, 3), end(1, 0, 3)});
  const Certification c = certify(dir);
  const auto mismatch = of_kind(c, ViolationKind::count_mismatch);
  REQUIRE(mismatch.size() == 2);
  CHECK(mismatch[0].location == dir.file("rank1.jsonl") + ":2");
  CHECK_THAT(mismatch[0].message, Catch::Contains("counts 3, 4 records"));
  CHECK(mismatch[1].rank == 0);
  CHECK_THAT(mismatch[1].message, Catch::Contains("counts 5, 2 records"));
}

TEST_CASE("records after the step's end record are late") {
  TempDir dir;
  dir.write("rank0.jsonl", rank_lines(0, 0, 1));
  dir.write("rank1.jsonl",
            {header(), record(1, 0, 0), record(1, 0, 1), end(1, 0, 2), record(1, 0, 2),
             record(1, 1, 0), record(1, 1, 1), record(1, 1, 2), end(1, 1, 3)});
  const Certification c = certify(dir);
  const auto late = of_kind(c, ViolationKind::late_records);
  REQUIRE(late.size() == 1);
  CHECK(late[0].rank == 1);
  CHECK(late[0].step == 0);
  CHECK(late[0].location == dir.file("rank1.jsonl") + ":5");
}

TEST_CASE("an end record written twice is a duplicate step") {
  TempDir dir;
  dir.write("rank0.jsonl", {header(1), record(0, 0, 0), end(0, 0, 1), end(0, 0, 1)});
  const Certification c = certify(dir);
  const auto twice = of_kind(c, ViolationKind::duplicate_step);
  REQUIRE(twice.size() == 1);
  CHECK(twice[0].step == 0);
  CHECK_THAT(twice[0].message, Catch::Contains("ended twice"));
  CHECK(c.total_violations() == 1);
}

TEST_CASE("a step written twice, records and end record, is one duplicate step") {
  TempDir rec, dir;
  const auto lines = recorded(rec, 0, 3);
  SECTION("in one file") {
    dir.write("rank0.jsonl", laid_out(lines, {0, 1, 2, 1, 3}));
    const Certification c = certify(dir);
    const auto twice = of_kind(c, ViolationKind::duplicate_step);
    REQUIRE(twice.size() == 1);
    CHECK(twice[0].step == 1);
    CHECK(twice[0].location == dir.file("rank0.jsonl") + ":11");
    CHECK_THAT(twice[0].message, Catch::Contains("written twice"));
    CHECK(c.total_violations() == 1);
  }
  SECTION("a rank file copied: every step twice") {
    dir.write("rank0.jsonl", lines);
    dir.write("rank0-copy.jsonl", lines);
    const Certification c = certify(dir);
    CHECK(count(c, ViolationKind::duplicate_step) == 4);
    CHECK(c.total_violations() == 4);
  }
}

// dtrace-fp(5): chain_prev is the chain of the rank's closest earlier step by
// step number, so any valid layout of a run checks alike.
TEST_CASE("chains are checked in step order: a rank spread over files, out of order, reversed") {
  TempDir rec;
  const auto lines = recorded(rec, 0, 5);
  struct Layout {
    const char* name;
    std::vector<std::vector<int>> files;  // per file, its steps in order
  };
  const std::vector<Layout> layouts{
      {"in order", {{0, 1, 2, 3, 4, 5}}},
      {"a rank spread over two files", {{0, 1, 2}, {3, 4, 5}}},
      {"two files, the later steps first", {{3, 4, 5}, {0, 1, 2}}},
      {"two files, steps alternating", {{0, 2, 4}, {1, 3, 5}}},
      {"steps out of order", {{1, 0, 3, 2, 5, 4}}},
      {"steps out of order, a gap filled last", {{0, 1, 3, 4, 5, 2}}},
      {"steps reversed", {{5, 4, 3, 2, 1, 0}}},
  };
  for (const auto& layout : layouts) {
    for (int altered : {-1, 0, 2, 3, 5}) {
      INFO(layout.name << ", loss altered in step " << altered);
      TempDir dir;
      for (std::size_t f = 0; f < layout.files.size(); ++f) {
        auto file = laid_out(lines, layout.files[f]);
        const auto& steps = layout.files[f];
        if (std::find(steps.begin(), steps.end(), altered) != steps.end()) alter_loss(file, altered);
        dir.write("rank0-" + std::to_string(f) + ".jsonl", file);
      }
      const Certification c = certify(dir);
      if (altered < 0) {
        CHECK(c.certified());
        continue;
      }
      // The altered step only: the next one is chained to its logged chain.
      CHECK(c.total_violations() == 1);
      REQUIRE(chain_mismatches(c) == 1);
      CHECK(c.violations[0].step == altered);
      CHECK_THAT(c.violations[0].message, Catch::Contains("its records give"));
    }
  }
}

TEST_CASE("a chain checked in step order holds no step of a log written in order") {
  TempDir rec, dir;
  dir.write("rank0.jsonl", recorded(rec, 0, 5));
  const auto run = test_support::read_run(dir.path().string());
  dtrace::log::ChainVerifier verifier;
  std::vector<dtrace::log::ChainFinding> found;
  for (const auto& step : run.steps) {
    verifier.add(step, found);
    CHECK(verifier.held() == 0);
  }
  verifier.finish(found);
  CHECK(found.empty());
}

TEST_CASE("a resumed segment's chain starts anew at 0: no mismatch; in one file with the steps before it, a chain gap") {
  TempDir rec, dir;
  const auto stopped = recorded(rec, 0, 5);  // the run that stopped after step 2: its steps 0-2
  const auto resumed = recorded(rec, 3, 5);  // the run resumed at step 3: chains from 0 there
  const auto stopped_part = laid_out(stopped, {0, 1, 2});
  SECTION("the resumed segment in a file of its own: a note, no violation") {
    for (const char* name : {"z-resumed.jsonl", "a-resumed.jsonl"}) {  // read after or before the stopped file
      TempDir run;
      run.write("rank0.jsonl", stopped_part);
      run.write(name, resumed);
      const Certification c = certify(run);
      CHECK(c.certified());
      REQUIRE(c.notes.size() == 1);
      CHECK_THAT(c.notes[0], Catch::Contains("rank 0: the chains start anew at step 3"));
      CHECK_THAT(c.notes[0], Catch::Contains(run.file(name) + ":2"));
    }
  }
  SECTION("a record changed in the resumed segment is still a chain mismatch") {
    auto altered = resumed;
    alter_loss(altered, 4);
    dir.write("rank0.jsonl", stopped_part);
    dir.write("rank0-resumed.jsonl", altered);
    const Certification c = certify(dir);
    CHECK(chain_mismatches(c) == 1);
    CHECK(c.total_violations() == 1);
  }
  SECTION("the resumed steps written on in the stopped segment's file: a chain gap") {
    auto one_file = stopped_part;
    for (std::size_t i = 1; i < resumed.size(); ++i) one_file.push_back(resumed[i]);
    one_file = laid_out(one_file, {0, 1, 2, 3, 4, 5});
    dir.write("rank0.jsonl", one_file);
    const Certification c = certify(dir);
    CHECK(chain_mismatches(c) == 0);
    const auto gaps = of_kind(c, ViolationKind::chain_gap);
    REQUIRE(gaps.size() == 1);
    CHECK(gaps[0].step == 3);
    CHECK_THAT(gaps[0].message, Catch::Contains("starts anew at 0"));
    CHECK(c.total_violations() == 1);
  }
}

TEST_CASE("a wrong count is reported once, not also as the next step's chain mismatch") {
  TempDir rec, dir;
  auto lines = recorded(rec, 0, 3);
  // Step 1's end record is line 7; its count is 2.
  const std::string counted = R"("count":2)";
  REQUIRE(lines[6].find(counted) != std::string::npos);
  for (const char* wrong : {R"("count":3)", R"("count":1)"}) {
    INFO(wrong);
    auto edited = lines;
    edited[6].replace(edited[6].find(counted), counted.size(), wrong);
    dir.write("rank0.jsonl", edited);
    const Certification c = certify(dir);
    CHECK(count(c, ViolationKind::count_mismatch) == 1);
    CHECK(c.total_violations() == 1);
  }
}

TEST_CASE("every end record's line one off is a line mismatch at every step") {
  TempDir rec, dir;
  auto lines = recorded(rec, 0, 3);
  static const std::regex line_field(R"("line":([0-9]+))");
  for (auto& line : lines) {
    std::smatch m;
    if (std::regex_search(line, m, line_field)) {
      line = std::regex_replace(line, line_field, "\"line\":" + std::to_string(std::stoi(m[1]) + 1));
    }
  }
  dir.write("rank0.jsonl", lines);
  const Certification c = certify(dir);
  CHECK(count(c, ViolationKind::line_mismatch) == 4);
  CHECK(c.total_violations() == 4);
}

TEST_CASE("run, level, env and config differences between files are violations") {
  TempDir dir;
  auto a = rank_lines(0, 0, 0);
  a[0] = header(2, R"(,"env":{"NCCL_ALGO":"Ring"},"config":{"lr":1})");
  auto b = rank_lines(1, 0, 0);
  b[0] = R"({"dtrace":"fp/1","run":"u","world_size":2,"hash":"xxh3-64k/1","level":"kernel",)"
         R"("env":{"NCCL_ALGO":"Tree"},"config":{"lr":2}})";
  dir.write("rank0.jsonl", a);
  dir.write("rank1.jsonl", b);
  const Certification c = certify(dir);
  const auto headers = of_kind(c, ViolationKind::header_mismatch);
  REQUIRE(headers.size() == 4);
  for (const auto& v : headers) CHECK(v.location == dir.file("rank1.jsonl") + ":1");
  CHECK_THAT(headers[0].message, Catch::Contains("'run'"));
  CHECK_THAT(headers[1].message, Catch::Contains("'level'"));
  CHECK_THAT(headers[2].message, Catch::Contains("'env'") && Catch::Contains("NCCL_ALGO"));
  CHECK_THAT(headers[3].message, Catch::Contains("'config'") && Catch::Contains("lr"));
}

TEST_CASE("an absent env and an empty env agree") {
  TempDir dir;
  auto a = rank_lines(0, 0, 0);
  a[0] = header(2, R"(,"env":{})");
  dir.write("rank0.jsonl", a);
  dir.write("rank1.jsonl", rank_lines(1, 0, 0));
  CHECK(certify(dir).certified());
}

TEST_CASE("a hash algorithm dtrace does not know is a violation") {
  TempDir dir;
  auto a = rank_lines(0, 0, 0);
  auto b = rank_lines(1, 0, 0);
  a[0] = b[0] = R"({"dtrace":"fp/1","world_size":2,"hash":"md5/1"})";
  dir.write("rank0.jsonl", a);
  dir.write("rank1.jsonl", b);
  const Certification c = certify(dir);
  const auto hash = of_kind(c, ViolationKind::unknown_hash);
  REQUIRE(hash.size() == 1);
  CHECK(hash[0].location == dir.file("rank0.jsonl") + ":1");
  CHECK(c.total_violations() == 1);
  CHECK(dtrace::log::is_known_hash_algorithm("xxh3-64k/1"));
  CHECK_FALSE(dtrace::log::is_known_hash_algorithm("md5/1"));
}

TEST_CASE("many violations of one kind are counted and listed up to the limit") {
  TempDir dir;
  std::vector<std::string> lines{header(1)};
  for (int step = 0; step < 60; ++step) {
    lines.push_back(record(0, step, 0, "a"));
    lines.push_back(record(0, step, 0, "b"));
    lines.push_back(end(0, step, 2));
  }
  dir.write("run.jsonl", lines);
  const Certification c = certify(dir);
  CHECK(count(c, ViolationKind::seq_not_increasing) == 60);
  CHECK(c.violations.size() == Certification::kMaxListed);
  CHECK(c.unlisted_violations() == 10);
}

TEST_CASE("a truncated last line is a note, not a violation") {
  TempDir dir;
  dir.write("rank0.jsonl", rank_lines(0, 0, 1));
  {
    std::ofstream out(dir.path() / "rank1.jsonl");
    for (const auto& line : rank_lines(1, 0, 1)) out << line << "\n";
    out << R"({"step":2,"rank":1,"se)";
  }
  const Certification c = certify(dir);
  CHECK(c.certified());
  REQUIRE(c.notes.size() == 1);
  CHECK_THAT(c.notes[0], Catch::Contains("rank1.jsonl:10"));
}

TEST_CASE("an unreadable run is an error naming file and line, not a certification") {
  TempDir dir;
  dir.write("rank0.jsonl", {header(1), record(0, 0, 0), "{\"step\":0,", end(0, 0, 1)});
  auto result = certify_run(dir.path().string());
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(result.error().message, Catch::StartsWith(dir.file("rank0.jsonl") + ":3:"));

  TempDir sizes;
  sizes.write("rank0.jsonl", rank_lines(0, 0, 0, 2));
  sizes.write("rank1.jsonl", rank_lines(1, 0, 0, 3));
  auto mismatch = certify_run(sizes.path().string());
  REQUIRE_FALSE(mismatch.ok());
  CHECK_THAT(mismatch.error().message, Catch::Contains("world_size"));
}
