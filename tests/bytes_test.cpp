// diff's byte stage (src/diff/bytes.cpp) against reading every record: on
// every diff fixture, the minitrain runs, each run against itself, and
// generated runs with a difference planted where the stage must stop (the
// line across a block's end, the line before it, a timing record whose
// identity differs, a compared record after timing records that differ, the
// header, a truncated last line, a bad line both runs share, an end record
// miscounting its step, a rank in two files, steps out of order), the
// streaming diff gives the same report, or the same error, with and without
// skipping the shared prefixes.
#include "diff/bytes.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "diff/diff.hpp"
#include "log/reader.hpp"
#include "report/diff_report.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using dtrace::diff::DiffOptions;
using dtrace::diff::diff_runs;
using dtrace::diff::StepWindow;
using dtrace::test::TempDir;
using dtrace::test::write_text;

namespace {

const std::string kTestdata = DTRACE_TESTDATA;

// The streaming diff's answer, report or error, as text to compare.
std::string answer(const std::string& a, const std::string& b, bool read_shared, StepWindow steps = {}) {
  DiffOptions options;
  options.stream = true;
  options.read_shared = read_shared;
  options.steps = steps;
  auto report = diff_runs(a, b, options);
  if (!report) return "error: " + report.error().message;
  return dtrace::report::diff_to_json(*report).dump(1);
}

void same_answer(const std::string& a, const std::string& b, StepWindow steps = {}) {
  INFO(a << " against " << b);
  const std::string skipped = answer(a, b, false, steps);
  const std::string read = answer(a, b, true, steps);
  CHECK(skipped == read);
}

// Steps the byte stage vouches for, all file pairs together.
std::int64_t shared_steps(const std::string& a, const std::string& b) {
  auto ra = dtrace::log::RunReader::open(a);
  auto rb = dtrace::log::RunReader::open(b);
  REQUIRE(ra);
  REQUIRE(rb);
  std::int64_t steps = 0;
  for (const auto& p : dtrace::diff::shared_prefixes(**ra, **rb, {})) steps += p.steps.size();
  return steps;
}

// A generated run: `ranks` files of `steps` steps of `records` tensor records
// and one timing record, canonical as a recorder writes them (about 3 MB a
// file at the defaults, so a file spans several of the stage's 1 MiB blocks).
struct Plan {
  int ranks = 2;
  int steps = 1000;
  int records = 20;
  std::string env = "{}";
  std::uint64_t timing_salt = 0;    // differs between two runs of one job
  std::string timing_value = "0.5";  // so may its length
  bool chain_and_line = false;       // end records as a recorder of fp/1 with chains writes them
  // Changes a file's text after it is written in full (rank, text).
  std::function<void(int, std::string&)> edit;
};

std::string header(const Plan& plan) {
  return "{\"dtrace\":\"fp/1\",\"run\":\"gen\",\"world_size\":" + std::to_string(plan.ranks) +
         ",\"hash\":\"xxh3-64k/1\",\"level\":\"step\",\"env\":" + plan.env + ",\"config\":{}}\n";
}

std::string hex16(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

std::string rank_text(const Plan& plan, int rank) {
  std::string text = header(plan);
  for (int s = 0; s < plan.steps; ++s) {
    const std::string head = "{\"step\":" + std::to_string(s) + ",\"rank\":" + std::to_string(rank);
    for (int q = 0; q < plan.records; ++q) {
      text += head + ",\"seq\":" + std::to_string(q) + ",\"scope\":\"layer." + std::to_string(q) +
              "\",\"op\":\"linear\",\"io\":\"out\",\"name\":\"y\",\"dtype\":\"f32\",\"shape\":[4,8],\"hash\":\"" +
              hex16((static_cast<std::uint64_t>(s) * 1000003u + q) * 0x9e3779b97f4a7c15ull) + "\"}\n";
    }
    text += head + ",\"seq\":" + std::to_string(plan.records) +
            ",\"scope\":\"step\",\"op\":\"time\",\"io\":\"timing\",\"name\":\"step_seconds\",\"dtype\":\"f64\",\"bits\":\"" +
            hex16(0x3f80000000000000ull + plan.timing_salt + static_cast<std::uint64_t>(s)) + "\",\"value\":" + plan.timing_value + "}\n";
    text += head + ",\"end\":true,\"count\":" + std::to_string(plan.records + 1);
    if (plan.chain_and_line) {
      text += ",\"chain\":\"" + hex16(static_cast<std::uint64_t>(s) * 0x9e3779b97f4a7c15ull) + "\",\"line\":" +
              std::to_string(2 + s * (plan.records + 2) + plan.records + 1);
    }
    text += "}\n";
  }
  if (plan.edit) plan.edit(rank, text);
  return text;
}

std::string write_run(const TempDir& dir, const std::string& name, const Plan& plan) {
  for (int r = 0; r < plan.ranks; ++r) {
    write_text(dir.path(name + "/rank" + std::to_string(r) + ".jsonl"), rank_text(plan, r));
  }
  return dir / name;
}

// Where a file's records begin (after its header line).
std::size_t records_begin(const std::string& text) { return text.find('\n') + 1; }

// Changes one hex digit of the hash of the line holding byte `at`.
void change_hash_at(std::string& text, std::size_t at) {
  const std::size_t line_end = text.find('\n', at);
  const std::size_t hash = text.rfind("\"hash\":\"", line_end);
  REQUIRE(hash != std::string::npos);
  char& digit = text[hash + 8 + 5];
  digit = digit == '0' ? '1' : '0';
}

}  // namespace

TEST_CASE("byte stage: every diff fixture and minitrain pair, and each run against itself") {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& entry : fs::directory_iterator(kTestdata + "/diff")) {
    if (!fs::exists(entry.path() / "a") || !fs::exists(entry.path() / "b")) continue;
    pairs.emplace_back((entry.path() / "a").string(), (entry.path() / "b").string());
  }
  for (const char* job : {"same", "splitk", "fused-ce"}) {
    pairs.emplace_back(kTestdata + "/minitrain/" + job + "-a", kTestdata + "/minitrain/" + job + "-b");
  }
  REQUIRE(pairs.size() > 20);
  // minitrain writes step_seconds and record_seconds each step, different in
  // each run: every step of both ranks is still skipped.
  CHECK(shared_steps(kTestdata + "/minitrain/same-a", kTestdata + "/minitrain/same-b") == 2 * 3);
  for (const auto& [a, b] : pairs) {
    same_answer(a, b);
    same_answer(b, a);
    same_answer(a, a);
    same_answer(a, b, StepWindow{1, 1});
  }
}

TEST_CASE("byte stage: identical generated runs are skipped whole, and so are runs whose timing values differ") {
  TempDir dir;
  Plan plan;
  const std::string a = write_run(dir, "a", plan);
  const std::string b = write_run(dir, "b", plan);
  // Every step of both files: the stage did skip (else this test compares
  // the full path with itself).
  CHECK(shared_steps(a, b) == 2 * plan.steps);
  same_answer(a, b);
  same_answer(a, b, StepWindow{10, 500});
  // Another run of the job: every step's timing record differs, in value and
  // in length, which the diff never compares.
  plan.timing_salt = 7;
  plan.timing_value = "0.123456";
  const std::string c = write_run(dir, "c", plan);
  CHECK(shared_steps(a, c) == 2 * plan.steps);
  same_answer(a, c);
  same_answer(c, a);
  same_answer(a, c, StepWindow{10, 500});
  CHECK(answer(a, c, false).find("\"first\": null") != std::string::npos);
}

TEST_CASE("byte stage: after timing records that differ, a compared difference is found where the full read finds it") {
  TempDir dir;
  Plan plan;
  const std::string a = write_run(dir, "a", plan);
  Plan other = plan;
  other.timing_salt = 3;
  other.timing_value = "0.25";
  other.edit = [](int rank, std::string& text) {
    if (rank == 1) change_hash_at(text, text.find("{\"step\":700,\"rank\":1,\"seq\":3,"));
  };
  const std::string b = write_run(dir, "b", other);
  CHECK(shared_steps(a, b) == plan.steps + 700);
  same_answer(a, b);
  same_answer(b, a);
  const std::string report = answer(a, b, false);
  INFO(report);
  CHECK(report.find("rank1.jsonl:" + std::to_string(2 + 700 * (plan.records + 2) + 3)) != std::string::npos);
}

TEST_CASE("byte stage: a timing record whose identity differs ends the prefix") {
  TempDir dir;
  Plan plan;
  plan.steps = 100;
  const std::string a = write_run(dir, "a", plan);
  const std::vector<std::pair<std::string, std::string>> changes = {
      {"\"name\":\"step_seconds\"", "\"name\":\"step_secondz\""},
      {",\"seq\":20,\"scope\":\"step\"", ",\"seq\":21,\"scope\":\"step\""},
      {"\"io\":\"timing\"", "\"io\":\"other\""},
  };
  for (std::size_t k = 0; k < changes.size(); ++k) {
    Plan other = plan;
    other.timing_salt = 5;
    other.edit = [&](int rank, std::string& text) {
      if (rank != 0) return;
      const std::size_t at = text.find(changes[k].first, text.find("{\"step\":40,"));
      text.replace(at, changes[k].first.size(), changes[k].second);
    };
    const std::string b = write_run(dir, "b" + std::to_string(k), other);
    INFO(changes[k].second);
    // Rank 0 up to step 40's, rank 1 whole (its timing values alone differ).
    CHECK(shared_steps(a, b) == 40 + plan.steps);
    same_answer(a, b);
    same_answer(b, a);
  }
}

TEST_CASE("byte stage: a difference at a block's end or just before it") {
  TempDir dir;
  Plan plan;
  const std::string a = write_run(dir, "a", plan);
  for (std::size_t back : {0, 1, 200}) {
    Plan planted = plan;
    planted.edit = [&](int rank, std::string& text) {
      if (rank == 1) change_hash_at(text, records_begin(text) + (1u << 20) - 1 - back);
    };
    const std::string name = "b" + std::to_string(back);
    const std::string b = write_run(dir, name, planted);
    const std::int64_t shared = shared_steps(a, b);
    CHECK(shared > plan.steps);      // rank 0 whole, rank 1 up to the difference
    CHECK(shared < 2 * plan.steps);
    same_answer(a, b);
    same_answer(b, a);
  }
}

TEST_CASE("byte stage: headers that differ, a truncated last line, a bad line both runs share") {
  TempDir dir;
  Plan plan;
  plan.steps = 50;
  const std::string a = write_run(dir, "a", plan);
  Plan env = plan;
  env.env = R"({"NCCL_ALGO":"Tree"})";
  const std::string b = write_run(dir, "b", env);
  CHECK(shared_steps(a, b) == 2 * plan.steps);
  same_answer(a, b);

  Plan cut = plan;
  cut.edit = [](int rank, std::string& text) {
    if (rank == 0) text.resize(text.size() - 30);  // a crash mid-line
  };
  const std::string c = write_run(dir, "c", cut);
  const std::string d = write_run(dir, "d", cut);
  same_answer(a, c);
  same_answer(c, d);

  Plan bad = plan;
  bad.edit = [](int rank, std::string& text) {
    if (rank != 1) return;
    const std::size_t at = text.find("{\"step\":20,\"rank\":1,\"seq\":3,");
    text.replace(text.find("\"hash\":\"", at) + 8, 2, "zz");
  };
  const std::string e = write_run(dir, "e", bad);
  const std::string f = write_run(dir, "f", bad);
  const std::string error = answer(e, f, false);
  INFO(error);
  CHECK(error.rfind("error: " + e + "/rank1.jsonl:", 0) == 0);
  CHECK(error.find("rank1.jsonl:" + std::to_string(2 + 20 * (plan.records + 2) + 3) + ":") != std::string::npos);
  same_answer(e, f);
}

TEST_CASE("byte stage: the largest step numbers") {
  TempDir dir;
  Plan plan;
  plan.ranks = 1;
  plan.steps = 2;
  plan.edit = [](int, std::string& text) {
    for (auto [from, to] : {std::pair{"\"step\":0,", "\"step\":9223372036854775806,"},
                            std::pair{"\"step\":1,", "\"step\":9223372036854775807,"}}) {
      for (std::size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, std::strlen(from), to);
    }
  };
  const std::string a = write_run(dir, "a", plan);
  const std::string b = write_run(dir, "b", plan);
  CHECK(shared_steps(a, b) == 2);
  same_answer(a, b);
}

TEST_CASE("byte stage: a rank in two files, and steps out of order after a shared prefix") {
  TempDir dir;
  Plan plan;
  plan.steps = 40;
  const std::string a = write_run(dir, "a", plan);
  const std::string b = write_run(dir, "b", plan);
  // A copy of rank 0's file under another name in both runs: rank 0's steps
  // there come after the skipped ones, late.
  for (const std::string& run : {a, b}) {
    fs::copy_file(run + "/rank0.jsonl", run + "/rank0-copy.jsonl");
  }
  same_answer(a, b);

  Plan shuffled = plan;
  shuffled.edit = [](int rank, std::string& text) {
    if (rank != 0) return;
    // Steps 30 and 31 swapped.
    const std::size_t s30 = text.find("{\"step\":30,");
    const std::size_t s31 = text.find("{\"step\":31,");
    const std::size_t s32 = text.find("{\"step\":32,");
    text = text.substr(0, s30) + text.substr(s31, s32 - s31) + text.substr(s30, s31 - s30) + text.substr(s32);
  };
  const std::string c = write_run(dir, "c", shuffled);
  const std::string d = write_run(dir, "d", shuffled);
  same_answer(c, d);
  same_answer(a, c);
  same_answer(c, a);
}

TEST_CASE("byte stage: end records with a chain and a line number, and ones the parser refuses") {
  TempDir dir;
  Plan plan;
  plan.steps = 60;
  plan.chain_and_line = true;
  const std::string a = write_run(dir, "a", plan);
  plan.timing_salt = 9;
  const std::string b = write_run(dir, "b", plan);
  CHECK(shared_steps(a, b) == 2 * plan.steps);
  same_answer(a, b);
  // Step 30's end record of rank 0, made bad the same way in both runs (a
  // line number before the header's end, a leading zero, a chain digit not
  // hex): the stage must not vouch for it, and the error is the full read's.
  const std::vector<std::function<void(std::string&, std::size_t)>> breaks = {
      [](std::string& t, std::size_t at) { t.replace(at + 8, t.find('}', at) - at - 8, "1"); },
      [](std::string& t, std::size_t at) { t.insert(at + 8, "0"); },
      [](std::string& t, std::size_t at) { t[t.rfind("\"chain\":\"", at) + 9] = 'g'; },
  };
  for (std::size_t k = 0; k < breaks.size(); ++k) {
    Plan bad = plan;
    bad.edit = [&](int rank, std::string& text) {
      if (rank == 0) breaks[k](text, text.find(",\"line\":", text.find("{\"step\":30,\"rank\":0,\"end\"")));
    };
    const std::string c = write_run(dir, "c" + std::to_string(k), bad);
    bad.timing_salt = 11;
    const std::string d = write_run(dir, "d" + std::to_string(k), bad);
    INFO(k);
    CHECK(shared_steps(c, d) == 30 + plan.steps);
    same_answer(c, d);
    CHECK(answer(c, d, false).rfind("error: ", 0) == 0);
  }
}

TEST_CASE("byte stage: a step whose end record miscounts its records is excluded, never skipped") {
  TempDir dir;
  Plan plan;
  plan.steps = 60;
  // Rank 0's step 30 counts one record too many, in the writer's layout (the
  // stage's own check) and with its fields in another order (the parser's);
  // step 40 says its count in that order too, rightly, which the stage reads.
  const std::string good = "\"end\":true,\"count\":" + std::to_string(plan.records + 1);
  const std::string bad = "\"end\":true,\"count\":" + std::to_string(plan.records + 2);
  const std::vector<std::pair<std::string, std::string>> ends = {
      {good, bad}, {good + "}", "\"count\":" + std::to_string(plan.records + 2) + ",\"end\":true}"}};
  for (std::size_t k = 0; k < ends.size(); ++k) {
    Plan miscounted = plan;
    miscounted.edit = [&](int rank, std::string& text) {
      if (rank != 0) return;
      const std::size_t s30 = text.find(good, text.find("{\"step\":30,\"rank\":0,\"end\""));
      text.replace(s30, ends[k].first.size(), ends[k].second);
      const std::size_t s40 = text.find(good + "}", text.find("{\"step\":40,\"rank\":0,\"end\""));
      text.replace(s40, good.size() + 1, "\"count\":" + std::to_string(plan.records + 1) + ",\"end\":true}");
    };
    const std::string a = write_run(dir, "a" + std::to_string(k), miscounted);
    miscounted.timing_salt = 13;
    const std::string b = write_run(dir, "b" + std::to_string(k), miscounted);
    INFO(ends[k].second);
    // Rank 0 up to step 30, rank 1 whole.
    CHECK(shared_steps(a, b) == 30 + plan.steps);
    same_answer(a, b);
    const std::string report = answer(a, b, false);
    INFO(report);
    for (const char* run : {"A", "B"}) {
      CHECK(report.find(std::string("step 30 incomplete in run ") + run +
                        " (no end record or a wrong count), excluded (rank 0)") != std::string::npos);
    }
  }
}
