#include "report/html_report.hpp"

#include <catch2/catch.hpp>
#include <regex>
#include <string>

using dtrace::bisect::Evidence;
using dtrace::diff::Match;
using dtrace::diff::Mismatch;
using dtrace::diff::Role;
using dtrace::report::divergence_html;

namespace {

// A diff of `ranks` ranks over steps 0..steps-1 in which every rank diverged:
// `origin` first, as the origin, the others later, as receivers.
dtrace::diff::Report wide_diff(int ranks, std::int64_t steps, int origin) {
  dtrace::diff::Report d;
  d.run_a = "runs/a";
  d.run_b = "runs/b";
  d.compared = {0, steps - 1, steps, ranks, 1000};
  for (int r = 0; r < ranks; ++r) {
    Mismatch m;
    m.rank = r;
    m.step = r == origin ? steps / 2 : steps / 2 + 1 + (r * 7919) % (steps / 2 - 1);
    m.seq = 3;
    m.scope = r == origin ? "fwd/layer.1/mlp" : "comm/grad_allreduce";
    m.op = r == origin ? "gemm_fc2" : "all_reduce";
    m.io = "out";
    m.name = "y";
    m.role = r == origin ? Role::origin : Role::receiver;
    m.detail = "hash 0 in A, 1 in B";
    m.a_location = "runs/a/rank" + std::to_string(r) + ".jsonl:" + std::to_string(r + 2);
    d.ranks.push_back(m);
  }
  d.first = d.ranks[static_cast<std::size_t>(origin)];
  for (int i = 0; i < 6; ++i) {
    dtrace::diff::StepRecord s;
    s.seq = i;
    s.scope = i < 3 ? "fwd/layer.0/attn" : "fwd/layer.1/mlp";
    s.op = "op" + std::to_string(i);
    s.io = "out";
    s.name = "y";
    s.match = i < 3 ? Match::matched : Match::differs;
    s.location = "runs/a/rank" + std::to_string(origin) + ".jsonl:" + std::to_string(10 + i);
    d.first_step.push_back(s);
  }
  return d;
}

// The map cell that holds `rank`: its role.
std::string role_of_rank_cell(const std::string& html, int rank) {
  static const std::regex cell(
      R"re(<rect class="cell[^"]*" id="cell-\d+" data-role="(\w+)" data-rank-lo="(\d+)" data-rank-hi="(\d+)")re");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), cell); it != std::sregex_iterator();
       ++it) {
    if (std::stoi((*it)[2]) <= rank && rank <= std::stoi((*it)[3])) return (*it)[1];
  }
  return "";
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("4,096 ranks by 1,000,000 steps: a binned map of a few hundred KB", "[report][html]") {
  const auto d = wide_diff(4096, 1'000'000, 1234);
  const std::string html = divergence_html(&d, nullptr);
  INFO("size " << html.size());
  CHECK(html.size() < 2'000'000);
  CHECK(count(html, "<rect class=\"cell ") == 512);  // 8 ranks a row
  CHECK(role_of_rank_cell(html, 1234) == "origin");
  CHECK(role_of_rank_cell(html, 4095) == "receiver");
  CHECK(html.find("runs/a/rank1234.jsonl:1236") != std::string::npos);
}

TEST_CASE("a small run gets one row per rank and one column per step", "[report][html]") {
  const auto d = wide_diff(4, 20, 2);
  const std::string html = divergence_html(&d, nullptr);
  CHECK(count(html, "<rect class=\"cell ") == 4);
  CHECK(role_of_rank_cell(html, 2) == "origin");
  CHECK(role_of_rank_cell(html, 1) == "receiver");
  // The strip: six records, the first mismatch (seq 3) outlined and named origin.
  CHECK(count(html, "<rect class=\"rec ") == 6);
  CHECK(html.find("data-seq=\"3\" data-match=\"differs\" data-role=\"origin\"") !=
        std::string::npos);
  CHECK(html.find("class=\"origin-mark\"") != std::string::npos);
  CHECK(html.find("runs/a/rank2.jsonl:13") != std::string::npos);
}

TEST_CASE("the page refers to nothing outside itself", "[report][html]") {
  auto d = wide_diff(4, 20, 2);
  d.run_a = "runs/<b>a</b>";  // a run's name is text, never markup
  dtrace::bisect::Report b;
  b.verdict = dtrace::bisect::Verdict::named;
  const std::string html = divergence_html(&d, &b);
  CHECK(html.find("://") == std::string::npos);
  CHECK(html.find("<a ") == std::string::npos);
  CHECK(html.find(" src=") == std::string::npos);
  CHECK(html.find("url(") == std::string::npos);
  CHECK(html.find("runs/&lt;b&gt;a&lt;/b&gt;") != std::string::npos);
  CHECK(html.find("<b>") == std::string::npos);
}

TEST_CASE("a bisect's ladder and evidence", "[report][html]") {
  dtrace::bisect::Report b;
  b.verdict = dtrace::bisect::Verdict::named;
  b.step = 5;
  b.rank = 1;
  b.op = "gemm_splitk";
  b.scope = "fwd/layer.0/mlp";
  b.role = "origin";
  b.layer = "fwd/layer.0/mlp";
  b.replays.push_back({"layer",
                       'A',
                       {"minitrain", "--steps", "20"},
                       {{"DTRACE_REPLAY_STEP", "5"}},
                       1.5,
                       0,
                       "exit 0"});
  b.replays.push_back(
      {"confirm", 'B', {"minitrain", "a b"}, {{"DTRACE_ISOLATE", "x"}}, 0.25, 0, "exit 0"});
  Evidence e;
  e.output = "y";
  e.dtype = "f32";
  e.repetitions = 2;
  e.distinct_outputs = 2;
  e.ulp_histogram = {5, 0, 3};
  e.ulp_undefined = 1;
  e.nan_b = 1;
  e.outputs = {{'A', 0, "00000000000000aa"},
               {'A', 1, "00000000000000bb"},
               {'B', 0, "00000000000000aa"},
               {'B', 1, "00000000000000aa"}};
  b.evidence = e;
  const std::string html = divergence_html(nullptr, &b);
  for (const char* stage : {"restore", "layer", "kernel", "confirm"}) {
    CHECK(html.find(std::string("id=\"stage-") + stage + "\"") != std::string::npos);
  }
  CHECK(html.find("DTRACE_REPLAY_STEP=5 minitrain --steps 20") != std::string::npos);
  CHECK(html.find("DTRACE_ISOLATE=x minitrain &#39;a b&#39;") !=
        std::string::npos);  // quoted for a shell
  CHECK(html.find("1.50 s") != std::string::npos);
  // Buckets 1, 4-7 and NaN (the empty 2-3 bucket is drawn as no bar).
  CHECK(html.find("5 elements 1 ulp apart") != std::string::npos);
  CHECK(html.find("3 elements 4-7 ulp apart") != std::string::npos);
  CHECK(html.find("1 element with a NaN on either side") != std::string::npos);
  CHECK(html.find("2-3 ulp apart") == std::string::npos);
  CHECK(count(html, "<i class=\"chip\"") == 4);
  CHECK(count(html, "</i> #2<") == 1);  // one repetition gave the second output
}

TEST_CASE("the title names what was found, and the page's counts agree with their nouns", "[report][html]") {
  dtrace::bisect::Report b;
  b.verdict = dtrace::bisect::Verdict::named;
  b.step = 5;
  b.rank = 1;
  b.op = "gemm_splitk";
  b.scope = "fwd/layer.0/mlp";
  b.occurrence = 1;
  b.calls = 2;
  b.role = "origin";
  CHECK(divergence_html(nullptr, &b).find(
            "<h1>dtrace bisect: named fwd/layer.0/mlp gemm_splitk, call 2 of 2 at step 5, rank 1</h1>") !=
        std::string::npos);
  b.verdict = dtrace::bisect::Verdict::restore;
  b.state_scope = "step";
  b.state_op = "momentum";
  b.state = "b1";
  CHECK(divergence_html(nullptr, &b).find("<h1>dtrace bisect: restore step momentum b1 at step 5, rank 1</h1>") !=
        std::string::npos);
  b.verdict = dtrace::bisect::Verdict::data;
  b.input = dtrace::bisect::DataDifference{"step", "batch", "batch.0", 0};
  CHECK(divergence_html(nullptr, &b).find("<h1>dtrace bisect: data step batch in batch.0 at step 5, rank 1</h1>") !=
        std::string::npos);
  b.input.reset();
  b.verdict = dtrace::bisect::Verdict::fast_forward;
  b.departed = dtrace::bisect::EarlierDivergence{3, 1, "step grads out w", "dtrace bisect --trust --step 3 a b"};
  b.departed_side = 'B';
  CHECK(divergence_html(nullptr, &b).find(
            "<h1>dtrace bisect: fast-forward at step 5, rank 1: step 3 departed from run B</h1>") != std::string::npos);
  b.departed.reset();
  b.nothing_to_bisect = true;
  b.verdict = dtrace::bisect::Verdict::not_reproduced;
  CHECK(divergence_html(nullptr, &b).find("<h1>dtrace bisect: nothing to bisect, the runs are identical</h1>") !=
        std::string::npos);
  // One rank: its map's rank axis has one label, and no count says "1 ranks".
  const auto d = wide_diff(1, 4, 0);
  const std::string html = divergence_html(&d, nullptr);
  CHECK(html.find("<h1>dtrace diff: diverged at step 2, rank 0: fwd/layer.1/mlp gemm_fc2 out y</h1>") !=
        std::string::npos);
  CHECK(count(html, ">rank 0</text>") == 1);
  CHECK(count(html, "text-anchor=\"end\">0</text>") == 0);
  CHECK(html.find("on 1 rank,") != std::string::npos);
  CHECK(html.find("1 ranks") == std::string::npos);
}

TEST_CASE("a bisect's every culprit: the ladder is the first's, a table lists them all", "[report][html]") {
  dtrace::bisect::Report b;
  b.verdict = dtrace::bisect::Verdict::named;
  b.step = 0;
  b.op = "matmul";
  b.scope = "fwd/layer.0";
  b.role = "origin";
  b.layer = "fwd/layer.0";
  b.replays.push_back({"layer", 'A', {"tinytrain"}, {{"DTRACE_LEVEL", "layer"}}, 1.0, 0, "exit 0"});
  b.replays.push_back({"layer", 'A', {"tinytrain"}, {{"DTRACE_PIN", "/w/r1-pins"}}, 2.0, 0, "exit 0"});
  b.replays.push_back({"confirm", 'A', {"tinytrain"}, {{"DTRACE_ISOLATE", "fwd/layer.1::matmul"}}, 0.5, 0, "exit 0"});
  dtrace::bisect::Culprit first;
  first.op = "matmul";
  first.scope = "fwd/layer.0";
  first.role = "origin";
  first.layer = "fwd/layer.0";
  first.end_replay = 1;
  dtrace::bisect::Culprit second = first;
  second.scope = second.layer = "fwd/layer.1";
  second.first_replay = 1;
  second.end_replay = 3;
  second.pinned = {"fwd/layer.0 matmul"};
  second.region = dtrace::bisect::Region{"fwd/layer.1", "torch.compile", "eager", "its graph run op by op"};
  b.culprits = {first, second};
  b.search_end = "with fwd/layer.0 matmul, fwd/layer.1 matmul pinned, the replays of step 0 agree over 3 attempts";
  const std::string html = divergence_html(nullptr, &b);
  CHECK(html.find("Every culprit at step 0: 2 ops") != std::string::npos);
  CHECK(count(html, "<tr class=\"culprit\">") == 2);
  CHECK(html.find("<code>fwd/layer.1 matmul</code> (rank 0)") != std::string::npos);
  CHECK(html.find("<td>fwd/layer.0 matmul</td>") != std::string::npos);  // what the second was searched with
  CHECK(html.find("<td>2, 2.50 s</td>") != std::string::npos);           // its two replays
  // The second lies in a compiled region; the first in none.
  CHECK(html.find("<code>fwd/layer.1</code> (torch.compile region, part eager)</td>") != std::string::npos);
  CHECK(html.find("<code>fwd/layer.0</code></td>") != std::string::npos);
  CHECK(html.find(b.search_end) != std::string::npos);
  // The ladder lists the first culprit's replay only.
  CHECK(html.find("DTRACE_PIN=/w/r1-pins") == std::string::npos);
}
