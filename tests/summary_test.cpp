// log::summarize_run (`dtrace show`): per-rank steps and counts, unfinished
// steps, absent ranks, and records kept only for the selection.
#include "log/summary.hpp"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "report/show_report.hpp"

namespace fs = std::filesystem;
using dtrace::log::RunSummary;
using dtrace::log::Selection;
using dtrace::log::StepStatus;
using dtrace::log::summarize_run;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "dtrace-summary-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  void write(const std::string& name, const std::vector<std::string>& lines) const {
    std::ofstream out(path_ / name);
    for (const auto& line : lines) out << line << "\n";
  }

 private:
  fs::path path_;
};

const std::string kHeader =
    R"({"dtrace":"fp/1","run":"s","world_size":4,"hash":"xxh3-64k/1","level":"step"})";

std::string loss(int rank, int step) {
  return R"({"step":)" + std::to_string(step) + R"(,"rank":)" + std::to_string(rank) +
         R"(,"seq":0,"scope":"step","op":"loss","io":"metric","name":"loss","dtype":"f32","bits":"3f800000","value":1})";
}

std::string grad(int rank, int step) {
  return R"({"step":)" + std::to_string(step) + R"(,"rank":)" + std::to_string(rank) +
         R"(,"seq":1,"scope":"bwd/layer.0","op":"gemm","io":"out","name":"dw","dtype":"bf16","shape":[2,3],"hash":"0123456789abcdef"})";
}

std::string end(int rank, int step, int count) {
  return R"({"step":)" + std::to_string(step) + R"(,"rank":)" + std::to_string(rank) +
         R"(,"end":true,"count":)" + std::to_string(count) + "}";
}

// Ranks 0 and 2 of 4; rank 2 crashed in step 3.
void write_run(const TempDir& dir) {
  std::vector<std::string> r0{kHeader}, r2{kHeader};
  for (int s = 0; s < 4; ++s) {
    r0.insert(r0.end(), {loss(0, s), grad(0, s), end(0, s, 2)});
    r2.insert(r2.end(), {loss(2, s), grad(2, s)});
    if (s < 3) r2.push_back(end(2, s, 2));
  }
  dir.write("rank0.jsonl", r0);
  dir.write("rank2.jsonl", r2);
}

RunSummary summarize(const TempDir& dir, Selection selection = {}) {
  auto result = summarize_run(dir.str(), selection);
  if (!result) FAIL(result.error().message);
  return std::move(*result);
}

}  // namespace

TEST_CASE("a summary counts steps and records per rank and names what is unfinished") {
  TempDir dir;
  write_run(dir);
  const RunSummary s = summarize(dir);
  REQUIRE(s.ranks.size() == 2);
  CHECK(s.ranks[0].rank == 0);
  CHECK(s.ranks[0].steps.to_string() == "0-3");
  CHECK(s.ranks[0].records == 8);
  CHECK(s.ranks[0].unfinished_count == 0);
  CHECK(s.ranks[1].rank == 2);
  CHECK(s.ranks[1].steps.to_string() == "0-3");
  CHECK(s.ranks[1].complete_steps.to_string() == "0-2");
  REQUIRE(s.ranks[1].unfinished.size() == 1);
  CHECK(s.ranks[1].unfinished[0].step == 3);
  CHECK(s.ranks[1].unfinished[0].status == StepStatus::incomplete);
  CHECK(s.ranks[1].unfinished[0].records == 2);
  CHECK(s.records == 16);
  CHECK(s.absent_ranks() == "1,3");
  CHECK_FALSE(s.complete());
  CHECK(s.selected.empty());
}

TEST_CASE("records are kept only for the selected step and rank, in seq order") {
  TempDir dir;
  write_run(dir);
  const RunSummary by_step = summarize(dir, Selection{3, std::nullopt, {}});
  REQUIRE(by_step.selected.size() == 2);
  CHECK(by_step.selected[0].rank == 0);
  CHECK(by_step.selected[1].rank == 2);
  CHECK(by_step.selected[1].status == StepStatus::incomplete);
  REQUIRE(by_step.selected[0].records.size() == 2);
  CHECK(by_step.selected[0].records[0].seq == 0);
  CHECK(by_step.selected[0].records[1].seq == 1);

  const RunSummary by_rank = summarize(dir, Selection{std::nullopt, 2, {}});
  REQUIRE(by_rank.selected.size() == 4);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(by_rank.selected[i].step == static_cast<std::int64_t>(i));

  const RunSummary both = summarize(dir, Selection{1, 0, {}});
  REQUIRE(both.selected.size() == 1);
  CHECK(both.location(both.selected[0].records[1]) == dir.str() + "/rank0.jsonl:6");
  CHECK(dtrace::report::record_line(both.selected[0].records[0]) ==
        "0 step loss metric loss f32 - 3f800000 1");
  CHECK(dtrace::report::record_line(both.selected[0].records[1]) ==
        "1 bwd/layer.0 gemm out dw bf16 [2,3] 0123456789abcdef");

  const nlohmann::json j = dtrace::report::show_to_json(both);
  REQUIRE(j.at("selected").size() == 2);
  CHECK(j.at("selected")[1].at("hash") == "0123456789abcdef");
  CHECK(j.at("ranks_absent") == "1,3");
}

TEST_CASE("a selection that matches nothing keeps nothing") {
  TempDir dir;
  write_run(dir);
  const RunSummary s = summarize(dir, Selection{99, std::nullopt, {}});
  CHECK(s.selected.empty());
  CHECK(dtrace::report::show_to_text(s).find("records (step 99): none") != std::string::npos);
}
