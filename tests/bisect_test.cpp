// Bisect's engine below the CLI (issue 17): every stage runs through the
// replay runner seam (bisect::Options::runner) on a fake workload that writes
// what a dtrace-replay/1 workload would (DESIGN.md §5), so each verdict, the
// restore check's cases, the per-process search and the evidence numbers are
// checked on outputs built here, where the right answer is known exactly.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "bisect/bisect.hpp"
#include "bisect/session.hpp"
#include "log/record.hpp"
#include "report/bisect_report.hpp"
#include "support.hpp"

using dtrace::Result;
using dtrace::bisect::Evidence;
using dtrace::bisect::Options;
using dtrace::bisect::Report;
using dtrace::bisect::Verdict;
using dtrace::test::TempDir;

namespace {

namespace fs = std::filesystem;

std::string hex(std::uint64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

// One record of the fake model. A metric or a timing carries f32 bits, the
// rest a hash.
struct Line {
  std::string scope, op, io, name;
  std::uint64_t digest = 0;
};

void append_step(std::string& out, std::int64_t step, const std::vector<Line>& lines) {
  int seq = 0;
  for (const Line& l : lines) {
    out += "{\"step\":" + std::to_string(step) + ",\"rank\":0,\"seq\":" + std::to_string(seq++) +
           ",\"scope\":\"" + l.scope + "\",\"op\":\"" + l.op + "\",\"io\":\"" + l.io + "\",\"name\":\"" + l.name +
           "\",\"dtype\":\"f32\",";
    out += l.io == "metric" || l.io == "timing" ? "\"bits\":\"" + hex(l.digest, 8) + "\"}\n"
                            : "\"shape\":[4],\"hash\":\"" + hex(l.digest, 16) + "\"}\n";
  }
  out += "{\"step\":" + std::to_string(step) + ",\"rank\":0,\"end\":true,\"count\":" + std::to_string(seq) + "}\n";
}

std::string header(const std::string& run, const std::string& level, const std::string& argv_json,
                   const std::string& config_json, const std::string& env_json = "{}",
                   const std::string& protocol = "dtrace-replay/1") {
  return "{\"dtrace\":\"fp/1\",\"run\":\"" + run + "\",\"world_size\":1,\"hash\":\"xxh3-64k/1\",\"level\":\"" +
         level + "\",\"env\":" + env_json + ",\"config\":" + config_json + ",\"replay\":{\"argv\":" + argv_json +
         ",\"protocol\":\"" + protocol + "\"}}\n";
}

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  dtrace::test::write_text(path, text);
}

std::vector<std::byte> f32_bytes(const std::vector<std::uint32_t>& bits) {
  std::vector<std::byte> out(bits.size() * 4);
  std::memcpy(out.data(), bits.data(), out.size());
  return out;
}

std::uint32_t f32(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

// The fake model: the layer fwd/layer.0 runs gemm (x -> t), then add (t -> y);
// add is the nondeterministic kernel: its output y, and so the step's loss,
// take one of a few outcomes, which the scenario picks per replay.
constexpr std::uint64_t kX = 0x11, kT = 0x77;
std::uint64_t y_digest(int outcome) { return 0x100 + static_cast<std::uint64_t>(outcome); }
std::uint32_t loss_bits(int outcome) { return 0x3f800000u + static_cast<std::uint32_t>(outcome); }

struct Workload {
  // The state each side's replay restores (the runs record theirs separately).
  std::map<char, std::uint64_t> restored = {{'A', 0x5a}, {'B', 0x5a}};
  // What the whole-step replay of this number (counted over both sides, as
  // step_outcome's `call`) restores instead: a workload whose later replays
  // (a session's later requests) start from other state than its first.
  std::map<int, std::uint64_t> restored_on_call;
  // Outcome of a whole-step replay (layer and capture stages); `call` counts
  // the whole-step replays before it, of both sides.
  std::function<int(char side, int call)> step_outcome = [](char side, int) { return side == 'A' ? 0 : 1; };
  // Outcome of an isolated repetition (kernel and confirm stages).
  std::function<int(char side, int rep)> isolated_outcome = [](char, int rep) { return rep % 2; };
  // The layer's recorded input follows the outcome too: no layer is an origin.
  bool layer_input_follows = false;
  // The layer records no input at layer level: its differing output's role is unknown.
  bool layer_input_unrecorded = false;
  // The layer records the generator it draws from (in rng) first, and its
  // state follows the outcome: a generator each process seeds otherwise.
  bool layer_generator_follows = false;
  // The step-end state record of a generator the step drew from (step rng
  // numpy), as each side's replay has it; none when empty.
  std::map<char, std::uint64_t> restored_rng;
  // Inside the layer the kernel records never show the difference (a blind spot).
  bool kernels_blind = false;
  // t as captured (gemm's output, add's input): what add sums.
  std::vector<std::uint32_t> t_bits = {f32(1), f32(2), f32(3), f32(4)};
  // add's output y, as captured, for each outcome.
  std::map<int, std::vector<std::uint32_t>> y_bits = {
      {0, {f32(1), f32(2), f32(3), f32(4)}},
      {1, {f32(1), f32(2), f32(3), f32(4) + 1}},
      {2, {f32(1), f32(2), f32(3), f32(4) + 3}},
  };

  // dtrace-replay/1.3: a pinned step replay takes its pins (add's output,
  // the one cause) and acknowledges them, so both sides agree; false: the
  // pins are ignored (nothing acknowledged), as a workload that only says 1.3.
  bool honours_pins = false;

  // regions.rank0.json as a kernel-level capture holds it (dtrace-fp(5),
  // Compiled regions); none when empty.
  std::string regions;

  int step_calls = 0;
  std::vector<std::pair<char, std::map<std::string, std::string>>> calls;

  // The records a pin capture holds for rank 0 (its capture.jsonl's record lines).
  static int pinned_records(const std::string& dir) {
    std::ifstream in(dir + "/capture.jsonl");
    int count = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"seq\"") != std::string::npos && line.find("\"rank\":0") != std::string::npos) ++count;
    }
    return count;
  }

  std::vector<Line> kernel_lines(int outcome) const {
    const int shown = kernels_blind ? 0 : outcome;
    return {{"fwd/layer.0", "gemm", "in", "x", kX},
            {"fwd/layer.0", "gemm", "out", "t", kT},
            {"fwd/layer.0", "add", "in", "t", kT},
            {"fwd/layer.0", "add", "out", "y", y_digest(shown)}};
  }

  // The layer's own records (op "layer") around its kernels, as a kernel-level
  // recorder writes them; its output is the last kernel's.
  std::vector<Line> layer_with_kernels(int outcome) const {
    std::vector<Line> lines = {{"fwd/layer.0", "layer", "in", "x", kX}};
    for (const Line& l : kernel_lines(outcome)) lines.push_back(l);
    lines.push_back({"fwd/layer.0", "layer", "out", "y", lines.back().digest});
    return lines;
  }

  // A capture directory (dtrace-fp(5)): capture.jsonl and each record's
  // bytes (t's are t_bits; the others' are never read as numbers).
  void write_capture(const std::string& dir, std::int64_t step, const std::vector<Line>& lines) const {
    std::string index = header("capture", "kernel", "[\"fake\"]", "{}");
    append_step(index, step, lines);
    write_file(dir + "/capture.jsonl", index);
    const auto t = f32_bytes(t_bits);
    for (std::size_t seq = 0; seq < lines.size(); ++seq) {
      dtrace::test::write_text(dir + "/" + dtrace::log::capture_file_name(0, step, static_cast<std::int64_t>(seq)),
                               lines[seq].name == "t" ? std::string(reinterpret_cast<const char*>(t.data()), t.size())
                                                      : std::string("0123456789abcdef"));
    }
  }

  Result<dtrace::replay::Outcome> run(const dtrace::replay::Command& c) {
    // Which run's command this is: its argv, or FAKE_SIDE from its header's
    // env when --replay gave both runs one command.
    std::map<std::string, std::string> v;
    for (const auto& [key, value] : c.env) v[key] = value;
    const char side = v.count("FAKE_SIDE") ? v.at("FAKE_SIDE").at(0) : c.argv.at(1).at(0);
    calls.emplace_back(side, v);
    const std::int64_t step = std::stoll(v.at("DTRACE_REPLAY_STEP"));
    std::string log = header("replay", v.at("DTRACE_LEVEL"), "[\"fake\"]", "{}");
    if (v.count("DTRACE_ISOLATE")) {
      const std::string target = v.at("DTRACE_ISOLATE");
      const int k = std::stoi(v.at("DTRACE_REPEAT"));
      for (int rep = 0; rep < k; ++rep) {
        const int outcome = isolated_outcome(side, rep);
        std::vector<Line> lines = kernel_lines(outcome);
        if (target == "fwd/layer.0") lines = layer_with_kernels(outcome);
        if (target == "fwd/layer.0::add") {
          lines.erase(lines.begin(), lines.begin() + 2);  // add alone: in t (seq 0), out y (seq 1)
          const std::string dir = v.at("DTRACE_CAPTURE");
          fs::create_directories(dir);
          const auto bytes = f32_bytes(y_bits.at(kernels_blind ? 0 : outcome));
          std::string raw(reinterpret_cast<const char*>(bytes.data()), bytes.size());
          dtrace::test::write_text(dir + "/" + dtrace::log::capture_file_name(0, rep, 1), raw);
        }
        append_step(log, rep, lines);
      }
    } else {
      const int call = step_calls++;
      const bool pinned = honours_pins && v.count("DTRACE_PIN");
      const int outcome = pinned ? 0 : step_outcome(side, call);
      if (pinned) {
        write_file(v.at("DTRACE_OUT_DIR") + "/rank0.pins",
                   "{\"step\":" + std::to_string(step) + ",\"pinned\":" +
                       std::to_string(pinned_records(v.at("DTRACE_PIN"))) + "}\n");
      }
      const std::uint64_t state =
          restored_on_call.count(call) ? restored_on_call.at(call) : restored.at(side);
      std::vector<Line> lines = {{"opt", "adamw", "state", "w", state}};
      const std::string level = v.at("DTRACE_LEVEL");
      if (level == "kernel") {
        // Inside DTRACE_SCOPE, the layer's records around its kernels; all
        // of them captured (the layer's inputs are what isolating it reads).
        auto inner = layer_with_kernels(outcome);
        lines.insert(lines.end(), inner.begin(), inner.end());
        if (v.count("DTRACE_CAPTURE")) write_capture(v.at("DTRACE_CAPTURE"), step, inner);
        if (v.count("DTRACE_CAPTURE") && !regions.empty()) {
          write_file(v.at("DTRACE_CAPTURE") + "/regions.rank0.json", regions);
        }
      } else {
        if (layer_generator_follows) lines.push_back({"fwd/layer.0", "layer", "in", "rng", 0x900u + outcome});
        if (!layer_input_unrecorded) {
          lines.push_back({"fwd/layer.0", "layer", "in", "x", layer_input_follows ? kX + outcome : kX});
        }
        lines.push_back({"fwd/layer.0", "layer", "out", "y", y_digest(outcome)});
      }
      lines.push_back({"step", "loss", "metric", "loss", loss_bits(outcome)});
      // Seconds the step took: different in every process, replays included.
      lines.push_back({"step", "time", "timing", "step_seconds", 0x3c000000u + static_cast<std::uint64_t>(step_calls)});
      if (restored_rng.count(side)) lines.push_back({"step", "rng", "state", "numpy", restored_rng.at(side)});
      append_step(log, step, lines);
    }
    write_file(v.at("DTRACE_OUT"), log);
    dtrace::replay::Outcome outcome;
    outcome.exit_code = 0;
    outcome.seconds = 0.01;
    return outcome;
  }
};

// A recorded run at step level: per step, the state it recorded and its loss.
struct RunSteps {
  RunSteps(std::vector<std::uint64_t> state_, std::vector<int> loss_outcome_, std::vector<std::uint64_t> batch_ = {},
           std::string batch_scope_ = "step", std::vector<std::uint64_t> rng_ = {}, std::int64_t first_ = 0)
      : state(std::move(state_)), loss_outcome(std::move(loss_outcome_)), batch(std::move(batch_)),
        batch_scope(std::move(batch_scope_)), rng(std::move(rng_)), first(first_) {}
  std::vector<std::uint64_t> state;
  std::vector<int> loss_outcome;
  std::vector<std::uint64_t> batch;  // what each step consumed (batch in batch.0); empty: none recorded
  std::string batch_scope;           // where that record is: "step", or a layer's scope
  std::vector<std::uint64_t> rng;    // each step's drawn generator (step rng numpy, at its end); empty: none
  std::int64_t first = 0;            // the first step's number (a resumed run begins later)
  // The loss recorded twice per step (two micro-batches' losses, as one op
  // called twice): the first of outcome 0 always, the second of loss_outcome.
  bool loss_twice = false;
};

std::string write_run(const TempDir& dir, char side, const RunSteps& steps, const std::string& config,
                      const std::string& env = "{}", const std::string& protocol = "dtrace-replay/1") {
  const std::string run = dir / std::string("run-") + side;
  std::string log = header(std::string(1, side), "step", "[\"fake-workload\",\"" + std::string(1, side) + "\"]",
                           config, env, protocol);
  for (std::size_t s = 0; s < steps.state.size(); ++s) {
    std::vector<Line> lines{{"opt", "adamw", "state", "w", steps.state[s]}};
    if (!steps.batch.empty()) lines.push_back({steps.batch_scope, "batch", "in", "batch.0", steps.batch[s]});
    if (steps.loss_twice) lines.push_back({"step", "loss", "metric", "loss", loss_bits(0)});
    lines.push_back({"step", "loss", "metric", "loss", loss_bits(steps.loss_outcome[s])});
    lines.push_back({"step", "time", "timing", "step_seconds", 0x3d000000u + s});
    if (!steps.rng.empty()) lines.push_back({"step", "rng", "state", "numpy", steps.rng[s]});
    append_step(log, steps.first + static_cast<std::int64_t>(s), lines);
  }
  write_file(run + "/rank0.jsonl", log);
  return run;
}

struct Bisect {
  TempDir dir;
  Workload workload;
  std::string run_a, run_b;
  Options options;
  std::vector<std::string> notes;

  // Runs A and B of one step each by default: same state, losses of outcomes 0 and 1.
  Bisect(RunSteps a = {{0x5a}, {0}}, RunSteps b = {{0x5a}, {1}}, const std::string& config_a = "{\"seed\":1}",
         const std::string& config_b = "{\"seed\":1}") {
    run_a = write_run(dir, 'A', a, config_a);
    run_b = write_run(dir, 'B', b, config_b);
    options.run_a = run_a;
    options.run_b = run_b;
    options.step = 0;
    options.rank = 0;
    options.trust = true;
    options.runner = [this](const dtrace::replay::Command& c) { return workload.run(c); };
  }

  Report run() {
    auto report = dtrace::bisect::run(
        options, {}, [this](const std::string& stage, const std::string& m) { notes.push_back(stage + ": " + m); });
    if (!report) FAIL(report.error().message);
    return *report;
  }

  std::vector<std::string> stages(const Report& r) const {
    std::vector<std::string> out;
    for (const auto& p : r.replays) out.push_back(p.stage + " " + std::string(1, p.side));
    return out;
  }
};

bool has_note(const std::vector<std::string>& notes, const std::string& text) {
  for (const auto& n : notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("bisect names the kernel whose output differs from the same inputs", "[bisect]") {
  Bisect b;
  const Report r = b.run();
  CHECK(r.verdict == Verdict::named);
  CHECK(r.scope == "fwd/layer.0");
  CHECK(r.op == "add");
  CHECK(r.role == "origin");
  CHECK(r.layer == "fwd/layer.0");
  CHECK(r.shared_configuration);
  CHECK(r.ranks_replayed == std::vector<std::int32_t>{0});
  CHECK(!r.earlier);
  CHECK(!r.outcomes);  // the first attempt's replays differed
  CHECK(b.stages(r) == std::vector<std::string>{"layer A", "layer B", "capture A", "capture B", "kernel A",
                                                "kernel B", "confirm A", "confirm B"});
  // The stages asked the workload for what DESIGN.md §5 says.
  const auto& confirm = b.workload.calls.at(6).second;
  CHECK(confirm.at("DTRACE_ISOLATE") == "fwd/layer.0::add");
  CHECK(confirm.at("DTRACE_REPEAT") == "3");
  CHECK(fs::path(confirm.at("DTRACE_INPUTS")).filename() == "capture-A");
  REQUIRE(r.evidence);
  // Repetitions 0, 1, 2 gave outcomes 0, 1, 0 on each side: two distinct
  // outputs; the first differing pair is A's repetition 0 against A's 1,
  // whose y differ in the last element by one ulp of 4.0f.
  const Evidence& e = *r.evidence;
  CHECK(e.output == "y");
  CHECK(e.dtype == "f32");
  CHECK(e.repetitions == 3);
  CHECK(e.distinct_outputs == 2);
  CHECK(e.elements == 4);
  CHECK(e.elements_differing == 1);
  CHECK(e.max_ulp == std::optional<std::uint64_t>(1));
  CHECK(e.max_abs_difference == std::ldexp(1.0, -21));
  CHECK(e.nan_a == 0);
  CHECK(e.nan_b == 0);
  CHECK(e.inf_a == 0);
  CHECK(e.inf_b == 0);
  CHECK(e.reading.rfind("repetition 0 of A against repetition 1 of A: 1 of 4 elements differ, by at most 1 ulp", 0) ==
        0);
  CHECK(e.reading.find("reduction order") != std::string::npos);
  // Judged against the output's magnitude: add's captured input t is no larger.
  CHECK(e.output_magnitude == std::optional<double>(4.0));
  CHECK(e.input_magnitude == std::optional<double>(4.0));
  CHECK(e.magnitude == "output");
  CHECK(e.ulp_histogram == std::vector<std::uint64_t>{1});
  // Every repetition's fingerprint, A's first: outcomes 0, 1, 0 on each side.
  REQUIRE(e.outputs.size() == 6);
  CHECK(e.outputs[0].side == 'A');
  CHECK(e.outputs[3].side == 'B');
  CHECK(e.outputs[0].fingerprint == e.outputs[2].fingerprint);
  CHECK(e.outputs[0].fingerprint != e.outputs[1].fingerprint);
  CHECK(e.outputs[1].fingerprint == e.outputs[4].fingerprint);
}

TEST_CASE("bisect reports the compiled region a named op lies in, as the workload declared it", "[bisect]") {
  SECTION("an op in a part of the region: the region, its kind and the part with what it means") {
    Bisect b;
    b.workload.regions = R"({"regions":[{"scope":"fwd/layer","kind":"torch.compile"},
        {"scope":"fwd/layer.0","kind":"torch.compile","parts":{"layer.0":"wrong level"}},
        {"scope":"bwd/layer.0","kind":"torch.compile"}]})";
    // The fake's add is recorded in fwd/layer.0 itself: that region, no part.
    Report r = b.run();
    REQUIRE(r.verdict == Verdict::named);
    REQUIRE(r.region);
    CHECK(r.region->scope == "fwd/layer.0");  // not fwd/layer, a prefix of the name only
    CHECK(r.region->kind == "torch.compile");
    CHECK(r.region->part.empty());
    REQUIRE(r.culprits.size() == 1);
    REQUIRE(r.culprits[0].region);
    CHECK(r.culprits[0].region->scope == "fwd/layer.0");
    const auto json = dtrace::report::bisect_to_json(r);
    CHECK(json["culprit"]["region"]["scope"] == "fwd/layer.0");
    CHECK(json["culprit"]["region"]["part"].is_null());
    CHECK(json["culprits"][0]["region"]["kind"] == "torch.compile");
    const std::string text = dtrace::report::bisect_to_text(r);
    CHECK(text.find("  region:   fwd/layer.0 (torch.compile)\n") != std::string::npos);
  }
  SECTION("the innermost declared region, and the part below it") {
    TempDir dir;
    std::vector<std::string> notes;
    dtrace::test::write_text(dir / std::string("regions.rank3.json"),
                             R"({"regions":[{"scope":"fwd/GPT","kind":"torch.compile"},
                                 {"scope":"fwd/GPT/blocks.0","kind":"torch.compile",
                                  "parts":{"eager":"its graph run op by op"}}]})");
    auto region = dtrace::bisect::region_of(dir.path(), 3, "fwd/GPT/blocks.0/eager/x", notes);
    REQUIRE(region);
    CHECK(region->scope == "fwd/GPT/blocks.0");
    CHECK(region->part == "eager");
    CHECK(region->part_means == "its graph run op by op");
    region = dtrace::bisect::region_of(dir.path(), 3, "fwd/GPT/inductor", notes);
    REQUIRE(region);
    CHECK(region->scope == "fwd/GPT");
    CHECK(region->part == "inductor");
    CHECK(region->part_means.empty());
    CHECK(!dtrace::bisect::region_of(dir.path(), 3, "fwd/GPTX", notes));
    CHECK(!dtrace::bisect::region_of(dir.path(), 0, "fwd/GPT", notes));  // rank 0 declared nothing
    CHECK(notes.empty());
  }
  SECTION("a declaration that does not parse: a note naming the file, and no region") {
    Bisect b;
    b.workload.regions = R"({"regions":[{"scope":"fwd/layer.0"}]})";
    const Report r = b.run();
    REQUIRE(r.verdict == Verdict::named);
    CHECK(!r.region);
    CHECK(has_note(r.notes, "regions.rank0.json: a region without string \"scope\" and \"kind\""));
    CHECK(dtrace::report::bisect_to_json(r)["culprit"]["region"].is_null());
  }
  SECTION("a workload's file is read as its word: absent, not a regular file, not an object") {
    TempDir dir;
    std::vector<std::string> notes;
    CHECK(!dtrace::bisect::workload_json(dir / std::string("absent.json"), "X is not shown", notes));
    CHECK(notes.empty());
    fs::create_directories(dir / std::string("d.json"));
    CHECK(!dtrace::bisect::workload_json(dir / std::string("d.json"), "X is not shown", notes));
    dtrace::test::write_text(dir / std::string("list.json"), "[1]");
    CHECK(!dtrace::bisect::workload_json(dir / std::string("list.json"), "X is not shown", notes));
    dtrace::test::write_text(dir / std::string("ok.json"), R"({"a":1})");
    const auto ok = dtrace::bisect::workload_json(dir / std::string("ok.json"), "X is not shown", notes);
    REQUIRE(ok);
    CHECK((*ok)["a"] == 1);
    REQUIRE(notes.size() == 2);
    CHECK(notes[0] == dir / std::string("d.json: not a regular file; X is not shown"));
    CHECK(notes[1] == dir / std::string("list.json: not a JSON object; X is not shown"));
  }
  SECTION("a workload that declares no region: none") {
    Bisect b;
    const Report r = b.run();
    CHECK(!r.region);
    CHECK(!has_note(r.notes, "regions.rank0.json"));
    CHECK(dtrace::report::bisect_to_text(r).find("region:") == std::string::npos);
  }
}

TEST_CASE("bisect's evidence: distinct outputs and the pair compared", "[bisect]") {
  SECTION("three outcomes over both sides, first difference against B") {
    Bisect b;
    b.workload.isolated_outcome = [](char side, int rep) { return side == 'A' ? 0 : 1 + rep % 2; };
    const Report r = b.run();
    REQUIRE(r.verdict == Verdict::named);
    REQUIRE(r.evidence);
    CHECK(r.evidence->distinct_outputs == 3);
    CHECK(r.evidence->max_ulp == std::optional<std::uint64_t>(1));
    CHECK(r.evidence->reading.rfind("repetition 0 of A against repetition 0 of B: ", 0) == 0);
  }
  SECTION("one output alone: named from the per-kernel replays, and said so") {
    Bisect b;
    b.workload.isolated_outcome = [](char, int) { return 0; };
    const Report r = b.run();
    REQUIRE(r.verdict == Verdict::named);
    CHECK(r.op == "add");
    CHECK(has_note(r.notes, "gave identical outputs; the kernel is named from the per-kernel replays of step 0"));
    REQUIRE(r.evidence);
    CHECK(r.evidence->distinct_outputs == 1);
    CHECK(r.evidence->elements_differing == 0);
    CHECK(r.evidence->reading ==
          "alone, from the same inputs, the kernel gave one output in 3 repetitions on each side: its "
          "nondeterminism did not show in isolation");
  }
}

// A sum whose terms cancel: add's input t holds terms of magnitude 1000, its
// output y values of 1e-3, and a reordered sum's result differs by a rounding
// of the terms (one ulp of 1000.0f, 2^-14), which is a tenth of the output
// itself. Judged against the output that is "unrelated to magnitude"; against
// what was summed it is rounding. A value unrelated to either is still memory
// nothing wrote.
TEST_CASE("bisect's evidence judges a difference against what the op summed", "[bisect]") {
  const std::vector<std::uint32_t> small = {f32(0.001f), f32(0.002f), f32(0.003f), f32(0.004f)};
  Bisect b;
  b.workload.t_bits = {f32(1000), f32(-1000), f32(0.5f), f32(-0.25f)};
  SECTION("a cancelling sum reads as reduction order, against the inputs") {
    auto rounded = small;
    rounded[3] = f32(0.004f + std::ldexp(1.0f, -14));
    b.workload.y_bits = {{0, small}, {1, rounded}};
    const Report r = b.run();
    REQUIRE(r.evidence);
    const Evidence& e = *r.evidence;
    CHECK(e.elements_differing == 1);
    CHECK(e.magnitude == "inputs");
    CHECK(e.input_magnitude == std::optional<double>(1000.0));
    CHECK(e.output_magnitude == std::optional<double>(static_cast<double>(0.004f)));
    CHECK(e.reading.find("reduction order") != std::string::npos);
    CHECK(e.reading.find("of the op's inputs' largest value 1e+03; the output's is 0.004)") != std::string::npos);
    CHECK(e.reading.find("nothing wrote") == std::string::npos);
  }
  SECTION("a value unrelated to the inputs' magnitude still reads as memory nothing wrote") {
    auto garbage = small;
    garbage[3] = f32(37.5f);
    b.workload.y_bits = {{0, small}, {1, garbage}};
    const Report r = b.run();
    REQUIRE(r.evidence);
    CHECK(r.evidence->magnitude == "inputs");
    CHECK(r.evidence->reading.find("nothing wrote") != std::string::npos);
    CHECK(r.evidence->reading.find("against the op's inputs' largest value 1e+03; the output's is 0.004;") !=
          std::string::npos);
  }
}

TEST_CASE("compare_outputs counts exactly what differs", "[bisect]") {
  using dtrace::bisect::compare_outputs;
  SECTION("f32 with signed zero, NaN and Inf") {
    const std::uint32_t nan = 0x7fc00000u, inf = 0x7f800000u;
    const auto a = f32_bytes({f32(1), 0x80000000u, nan, f32(3), inf, f32(100)});
    const auto b = f32_bytes({f32(1), 0x00000000u, nan, f32(3) + 2, inf, nan});
    const Evidence e = compare_outputs(a, b, "f32");
    CHECK(e.elements == 6);
    CHECK(e.elements_differing == 3);     // -0 vs +0, 3 vs 3+2ulp, 100 vs NaN
    CHECK(e.max_ulp == std::optional<std::uint64_t>(2));  // -0 and +0 are 1 apart, 3 and its +2 are 2
    CHECK(e.max_abs_difference == std::ldexp(1.0, -21));  // 2 ulp of 3.0f
    CHECK(e.nan_a == 1);
    CHECK(e.nan_b == 2);
    CHECK(e.inf_a == 1);
    CHECK(e.inf_b == 1);
    CHECK(e.reading.find("NaN 1 vs 2, Inf 1 vs 1") != std::string::npos);
    // -0/+0 are 1 ulp apart (bucket 1), 3 and 3+2ulp are 2 (bucket 2-3); 100 vs NaN has no distance.
    CHECK(e.ulp_histogram == std::vector<std::uint64_t>{1, 1});
    CHECK(e.ulp_undefined == 1);
    CHECK(e.reading.find("nothing wrote") != std::string::npos);
  }
  SECTION("rounding-sized f32 differences read as reduction order") {
    const Evidence e = compare_outputs(f32_bytes({f32(1), f32(2), f32(3), f32(4)}),
                                       f32_bytes({f32(1), f32(2) - 1, f32(3), f32(4) + 1}), "f32");
    CHECK(e.elements == 4);
    CHECK(e.elements_differing == 2);
    CHECK(e.max_ulp == std::optional<std::uint64_t>(1));
    CHECK(e.max_abs_difference == std::ldexp(1.0, -21));  // one ulp of 4.0f (2.0f's is half that)
    CHECK(e.reading.rfind("2 of 4 elements differ, by at most 1 ulp", 0) == 0);
    CHECK(e.reading.find("reduction order") != std::string::npos);
  }
  SECTION("values unrelated to the magnitudes read as unwritten memory") {
    const Evidence e = compare_outputs(f32_bytes({f32(1), f32(2)}), f32_bytes({f32(1), f32(-7.5f)}), "f32");
    CHECK(e.elements_differing == 1);
    CHECK(e.max_abs_difference == 9.5);
    CHECK(e.reading.find("nothing wrote") != std::string::npos);
    CHECK(e.magnitude == "output");
    CHECK(!e.input_magnitude);
  }
  SECTION("the larger magnitude is the scale: the inputs' when the output cancels, else the output's") {
    // 2 ulp of 1.0f against an output of 1e-4: a fifth of the output, a
    // millionth of inputs up to 1.
    const auto a = f32_bytes({f32(1e-4f)}), b = f32_bytes({f32(1e-4f + std::ldexp(1.0f, -22))});
    const Evidence by_output = compare_outputs(a, b, "f32");
    CHECK(by_output.magnitude == "output");
    CHECK(by_output.reading.find("nothing wrote") != std::string::npos);
    const Evidence by_inputs = compare_outputs(a, b, "f32", 1.0);
    CHECK(by_inputs.magnitude == "inputs");
    CHECK(by_inputs.input_magnitude == std::optional<double>(1.0));
    CHECK(by_inputs.reading.find("reduction order") != std::string::npos);
    // Inputs smaller than the output (many terms of one sign): the output's.
    const Evidence small_inputs = compare_outputs(a, b, "f32", 1e-6);
    CHECK(small_inputs.magnitude == "output");
    CHECK(small_inputs.reading.find("against the output's largest value 0.0001; the inputs' is 1e-06;") !=
          std::string::npos);
  }
  SECTION("largest_magnitude: finite values of a float dtype only") {
    using dtrace::bisect::largest_magnitude;
    const auto bytes = f32_bytes({f32(-3), 0x7f800000u, 0x7fc00000u, f32(2)});
    CHECK(largest_magnitude(bytes.data(), bytes.size(), "f32") == std::optional<double>(3.0));
    CHECK(!largest_magnitude(bytes.data(), bytes.size(), "i32"));
  }
  SECTION("bf16 and f64") {
    const std::vector<std::byte> a = {std::byte{0x80}, std::byte{0x3f}}, b = {std::byte{0x81}, std::byte{0x3f}};
    const Evidence e = compare_outputs(a, b, "bf16");  // 1.0 against 1.0078125
    CHECK(e.elements == 1);
    CHECK(e.elements_differing == 1);
    CHECK(e.max_ulp == std::optional<std::uint64_t>(1));
    CHECK(e.max_abs_difference == 0.0078125);
    double x = 1.0, y = std::nextafter(std::nextafter(1.0, 2.0), 2.0);
    std::vector<std::byte> da(8), db(8);
    std::memcpy(da.data(), &x, 8);
    std::memcpy(db.data(), &y, 8);
    const Evidence d = compare_outputs(da, db, "f64");
    CHECK(d.max_ulp == std::optional<std::uint64_t>(2));
    CHECK(d.max_abs_difference == std::ldexp(1.0, -51));
  }
  SECTION("not a float, or sizes differ: bytes counted") {
    const std::vector<std::byte> a = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
    const std::vector<std::byte> b = {std::byte{1}, std::byte{9}, std::byte{3}, std::byte{8}};
    const Evidence e = compare_outputs(a, b, "i32");
    CHECK(e.elements == 4);
    CHECK(e.elements_differing == 2);
    CHECK(!e.max_ulp);
    CHECK(e.reading == "2 of 4 bytes differ (dtype i32 is not a float)");
    const std::vector<std::byte> shorter = {std::byte{1}, std::byte{2}};
    const Evidence s = compare_outputs(a, shorter, "f32");
    CHECK(s.elements == 4);
    CHECK(s.elements_differing == 2);
    CHECK(s.reading == "2 of 4 bytes differ (sizes differ)");
  }
}

TEST_CASE("bisect's restore check: a replay that does not restore its run's state", "[bisect]") {
  Bisect b;
  b.workload.restored['B'] = 0x5b;  // B's replay loads something else than B recorded
  const Report r = b.run();
  CHECK(r.verdict == Verdict::restore);
  CHECK(r.state == "w");
  CHECK(r.state_scope == "opt");
  CHECK(r.state_op == "adamw");
  // Named by scope, op and name: "opt w" would not tell "opt adamw w" from
  // "opt sgd w" where a workload records both.
  CHECK(r.reached ==
        "restore check: replaying run B at step 0 does not restore the state the run recorded: opt adamw w");
  CHECK(!r.earlier);
  CHECK(b.stages(r) == std::vector<std::string>{"layer A", "layer B"});
}

TEST_CASE("bisect holds every later step replay to the run's state, by value", "[bisect]") {
  // Replays 0 and 1 (layer A, layer B) pass the restore check; then the
  // capture replay of one side restores other values than its run recorded
  // (and than its own first replay): a kernel named from it would rest on a
  // replay that did not start where the run started.
  for (const auto& [call, side] : {std::pair{2, 'A'}, std::pair{3, 'B'}}) {
    DYNAMIC_SECTION("the capture replay of run " << side) {
      Bisect b;
      b.workload.restored_on_call[call] = 0x5b;
      auto r = dtrace::bisect::run(b.options, {});
      REQUIRE(!r);
      const std::string& m = r.error().message;
      INFO(m);
      // The kernel stage's errors say what the layer pass had localized first.
      CHECK(m.starts_with("the layer pass localized step 0, rank 0 to layer fwd/layer.0"));
      CHECK(m.find(std::string("then replay of run ") + side + " (capture): it did not start step 0 from the state the run started it from: opt adamw w (rank 0) "
                          "is 000000000000005b in this replay, 000000000000005a as run " + side + " recorded it. ") !=
            std::string::npos);
      CHECK(m.find("otherwise here than at its first replay (the layer stage's), which the restore check held to "
                   "the run") != std::string::npos);
      // No stage went on from it.
      CHECK(b.workload.calls.size() == static_cast<std::size_t>(call + 1));
    }
  }
  SECTION("a later layer-pass attempt is held too") {
    Bisect b;
    b.workload.step_outcome = [](char, int) { return 0; };  // attempt 1's replays agree: attempt 2 replays again
    b.workload.restored_on_call[2] = 0x5b;
    auto r = dtrace::bisect::run(b.options, {});
    REQUIRE(!r);
    CHECK(r.error().message.starts_with("replay of run A (layer): it did not start step 0"));
  }
  SECTION("a run without the step: later replays are held to the first one") {
    // Run A resumed after step 0 (it holds step 1 only); its replays' state
    // can only be held to its first replay's.
    Bisect b;
    b.options.step = 1;
    write_run(b.dir, 'A', RunSteps{{0x5a}, {0}}, "{\"seed\":1}");
    write_run(b.dir, 'B', RunSteps{{0x5a, 0x5a}, {0, 1}}, "{\"seed\":1}");
    b.workload.restored_on_call[2] = 0x5b;
    auto r = dtrace::bisect::run(b.options, {});
    REQUIRE(!r);
    INFO(r.error().message);
    CHECK(r.error().message.find("000000000000005b in this replay, 000000000000005a as its first replay (the "
                                 "layer stage's) restored it. The workload restores step 1 otherwise here than at "
                                 "its first replay (the layer stage's); a replay") != std::string::npos);
  }
  SECTION("replays that restore what the run recorded go on to name the kernel") {
    Bisect b;
    b.workload.restored_on_call[2] = 0x5a;
    CHECK(b.run().verdict == Verdict::named);
  }
}

TEST_CASE("bisect's data check: what the step consumed", "[bisect]") {
  SECTION("the batch differs first: verdict data, read from the logs without a replay") {
    Bisect b(RunSteps{{0x5a}, {0}, {0xb0}}, RunSteps{{0x5a}, {1}, {0xb1}});
    const Report r = b.run();
    CHECK(r.verdict == Verdict::data);
    CHECK(dtrace::bisect::verdict_name(r.verdict) == "data");
    REQUIRE(r.input);
    CHECK(r.input->scope == "step");
    CHECK(r.input->op == "batch");
    CHECK(r.input->name == "batch.0");
    CHECK(r.input->occurrence == 0);
    CHECK(r.replays.empty());
    CHECK(b.workload.calls.empty());
    CHECK(has_note(b.notes, "data: data check: runs A and B first differ at step 0 in what the step consumed "
                            "(step batch in batch.0)"));
  }
  SECTION("the state differs before the batch: not the data, the restore check decides") {
    Bisect b(RunSteps{{0x5a}, {0}, {0xb0}}, RunSteps{{0x5b}, {1}, {0xb1}});
    const Report r = b.run();
    CHECK(r.verdict == Verdict::restore);
    CHECK(!r.input);
  }
  SECTION("an in record of a layer differs first: what a layer received, not what the step consumed") {
    Bisect b(RunSteps{{0x5a}, {0}, {0xb0}, "fwd/embed"}, RunSteps{{0x5a}, {1}, {0xb1}, "fwd/embed"});
    const Report r = b.run();
    CHECK(r.verdict == Verdict::named);
    CHECK(!r.input);
  }
  SECTION("the same batch in both runs; replays that consume none: a note, the kernel still named") {
    Bisect b(RunSteps{{0x5a}, {0}, {0xb0}}, RunSteps{{0x5a}, {1}, {0xb0}});
    const Report r = b.run();
    CHECK(r.verdict == Verdict::named);
    CHECK(!r.input);
    CHECK(has_note(r.notes, "data: replaying run A at step 0 does not feed the step what the run consumed there "
                            "(step batch in batch.0)"));
  }
}

TEST_CASE("bisect's restore check: runs that diverged before the step", "[bisect]") {
  // Three steps; the runs' losses differ from step 0 and their states from
  // step 1 on; each replay restores exactly its own run's state at step 2.
  const RunSteps a{{0x5a, 0x60, 0x61}, {0, 0, 0}};
  const RunSteps b{{0x5a, 0x70, 0x71}, {1, 1, 1}};
  SECTION("different configurations: diverged-earlier, carrying step 0") {
    Bisect x(a, b, "{\"seed\":1}", "{\"seed\":2}");
    x.options.step = 2;
    x.workload.restored = {{'A', 0x61}, {'B', 0x71}};
    const Report r = x.run();
    CHECK(r.verdict == Verdict::diverged_earlier);
    CHECK(dtrace::bisect::verdict_name(r.verdict) == "diverged-earlier");
    CHECK(!r.shared_configuration);
    REQUIRE(r.earlier);
    CHECK(r.earlier->step == 0);
    CHECK(r.earlier->rank == 0);
    CHECK(r.earlier->record == "step loss metric loss");
    CHECK(r.earlier->command == "dtrace bisect --trust --step 0 " + x.run_a + " " + x.run_b);
    CHECK(r.state.empty());
    CHECK(r.reached.find("differ in configuration") != std::string::npos);
    CHECK(x.stages(r) == std::vector<std::string>{"layer A", "layer B"});
    CHECK(has_note(x.notes, "restore: the runs diverged before step 2"));
  }
  SECTION("the earlier record names its call when the step repeats it") {
    RunSteps a2 = a, b2 = b;
    a2.loss_twice = b2.loss_twice = true;
    Bisect x(a2, b2, "{\"seed\":1}", "{\"seed\":2}");
    x.options.step = 2;
    x.workload.restored = {{'A', 0x61}, {'B', 0x71}};
    const Report r = x.run();
    REQUIRE(r.earlier);
    CHECK(r.earlier->record == "step loss metric loss, call 2 of 2");
  }
  SECTION("with --replay the command to bisect there replays the same way") {
    Bisect x(a, b);
    x.run_a = write_run(x.dir, 'A', a, "{}", "{\"FAKE_SIDE\":\"A\"}");
    x.run_b = write_run(x.dir, 'B', b, "{}", "{\"FAKE_SIDE\":\"B\"}");
    x.options.step = 2;
    x.options.trust = false;
    const std::vector<std::string> argv = {"fake-workload", "A", "it's here"};
    x.options.replay = argv;
    x.workload.restored = {{'A', 0x61}, {'B', 0x71}};
    const Report r = x.run();
    CHECK(r.verdict == Verdict::diverged_earlier);
    REQUIRE(r.earlier);
    // The command reads back, word for word, as the same bisect at step 0.
    auto words = dtrace::replay::split_words(r.earlier->command);
    REQUIRE(words);
    REQUIRE(words->size() == 8u);
    CHECK(std::vector<std::string>(words->begin(), words->begin() + 3) ==
          std::vector<std::string>{"dtrace", "bisect", "--replay"});
    CHECK(dtrace::replay::split_words((*words)[3]).value() == argv);
    CHECK(std::vector<std::string>(words->begin() + 4, words->end()) ==
          std::vector<std::string>{"--step", "0", x.run_a, x.run_b});
  }
  SECTION("one configuration: localized at the step by repeating A's replay") {
    Bisect x(a, b);
    x.options.step = 2;
    x.workload.restored = {{'A', 0x61}, {'B', 0x71}};
    // A's second replay (the first of the repetition) comes out differently.
    x.workload.step_outcome = [](char, int call) { return call == 2 ? 1 : 0; };
    const Report r = x.run();
    CHECK(r.verdict == Verdict::named);
    CHECK(r.op == "add");
    CHECK(r.scope == "fwd/layer.0");
    CHECK(r.shared_configuration);
    REQUIRE(r.earlier);
    CHECK(r.earlier->step == 0);
    // B is replayed once, for the restore check; everything after is A's.
    CHECK(x.stages(r) == std::vector<std::string>{"layer A", "layer B", "layer A", "capture A", "capture A",
                                                  "kernel A", "kernel A", "confirm A", "confirm A"});
    CHECK(has_note(r.notes, "localized from A's state by repetition"));
    CHECK(!r.outcomes);
    REQUIRE(r.evidence);
    CHECK(r.evidence->distinct_outputs == 2);
  }
  SECTION("nothing earlier differs: the runs' own restore is the divergence") {
    Bisect x(RunSteps{{0x5a, 0x60, 0x61}, {0, 0, 0}}, RunSteps{{0x5a, 0x60, 0x71}, {0, 0, 0}}, "{\"seed\":1}",
             "{\"seed\":2}");
    x.options.step = 2;
    x.workload.restored = {{'A', 0x61}, {'B', 0x71}};
    const Report r = x.run();
    CHECK(r.verdict == Verdict::restore);
    CHECK(r.state == "w");
    CHECK(!r.earlier);
    CHECK(r.reached.find("no step they both recorded before it differs") != std::string::npos);
  }
}

TEST_CASE("bisect's not-reproduced verdicts", "[bisect]") {
  SECTION("identical runs: nothing to bisect, nothing replayed, with or without a step asked for") {
    for (const bool with_step : {false, true}) {
      Bisect b(RunSteps{{0x5a}, {0}}, RunSteps{{0x5a}, {0}});
      b.options.rank.reset();  // the runs are read to choose the rank
      if (!with_step) b.options.step.reset();
      const Report r = b.run();
      CHECK(r.verdict == Verdict::not_reproduced);
      CHECK(r.nothing_to_bisect);
      CHECK(r.reached ==
            "nothing to bisect: the runs are identical over the steps they share (steps 0-0), so no bisect is needed");
      CHECK(r.replays.empty());
    }
  }
  SECTION("--step and --rank where the runs agree, replays that agree: nothing to bisect there") {
    Bisect b(RunSteps{{0x5a}, {0}}, RunSteps{{0x5a}, {0}});
    b.workload.step_outcome = [](char, int) { return 0; };
    const Report r = b.run();
    CHECK(r.verdict == Verdict::not_reproduced);
    CHECK(r.reached ==
          "layer pass: 3 replays of step 0 on each side agree at layer level, and so do the runs' own records of "
          "step 0 on rank 0: nothing to bisect there (dtrace diff says where the runs differ, if anywhere)");
    CHECK(r.replays.size() == 6u);
    CHECK(!r.outcomes);
  }
  SECTION("replays that reproduce neither run: no more than --repeat, and said so") {
    Bisect b;
    b.workload.step_outcome = [](char, int) { return 2; };
    const Report r = b.run();
    CHECK(r.verdict == Verdict::not_reproduced);
    CHECK(r.replays.size() == 6u);
    REQUIRE(r.outcomes);
    CHECK(r.outcomes->replays == 6);
    CHECK(r.outcomes->like_a == 0);
    CHECK(r.outcomes->like_b == 0);
    CHECK(r.outcomes->neither == 6);
    CHECK(r.outcomes->attempts == 3);
    CHECK(r.outcomes->budget == 3);
    CHECK(r.reached.find("no replay reproduced either run's records") != std::string::npos);
  }
  SECTION("replays that all reproduce A: the per-process budget, then what was learned") {
    Bisect b;
    b.workload.step_outcome = [](char, int) { return 0; };
    const Report r = b.run();
    CHECK(r.verdict == Verdict::not_reproduced);
    CHECK(r.replays.size() == 16u);
    REQUIRE(r.outcomes);
    CHECK(r.outcomes->replays == 16);
    CHECK(r.outcomes->like_a == 16);
    CHECK(r.outcomes->like_b == 0);
    CHECK(r.outcomes->neither == 0);
    CHECK(r.outcomes->attempts == 8);
    CHECK(r.outcomes->budget == 8);
    CHECK(r.reached.find("every replay reproduced run A's records and run B's outcome never came up") !=
          std::string::npos);
  }
}

TEST_CASE("bisect's per-process search names the kernel once both outcomes came up", "[bisect]") {
  SECTION("the other outcome within an attempt") {
    Bisect b;
    // Attempts 1 and 2 both make A's choice; attempt 3's B replay makes B's.
    b.workload.step_outcome = [](char, int call) { return call == 5 ? 1 : 0; };
    const Report r = b.run();
    CHECK(r.verdict == Verdict::named);
    CHECK(r.op == "add");
    REQUIRE(r.outcomes);
    CHECK(r.outcomes->replays == 6);
    CHECK(r.outcomes->like_a == 5);
    CHECK(r.outcomes->like_b == 1);
    CHECK(r.outcomes->attempts == 3);
    CHECK(r.outcomes->budget == 8);
  }
  SECTION("beyond --repeat, across attempts") {
    Bisect b;
    // Attempts 1-3 make A's choice in both replays, attempt 4 B's in both:
    // it agrees with itself, and differs from attempt 1.
    b.workload.step_outcome = [](char, int call) { return call == 6 || call == 7 ? 1 : 0; };
    const Report r = b.run();
    CHECK(r.verdict == Verdict::named);
    CHECK(r.op == "add");
    REQUIRE(r.outcomes);
    CHECK(r.outcomes->replays == 8);
    CHECK(r.outcomes->like_a == 6);
    CHECK(r.outcomes->like_b == 2);
    CHECK(r.outcomes->neither == 0);
    CHECK(r.outcomes->attempts == 4);
    CHECK(has_note(r.notes, "attempt 4: its replays agree with each other but differ from attempt 1's"));
    CHECK(has_note(r.notes, "per-process choice"));
  }
}

TEST_CASE("bisect's not-localized verdicts", "[bisect]") {
  SECTION("layer pass: the first difference is no layer's origin") {
    Bisect b;
    b.workload.layer_input_follows = true;
    const Report r = b.run();
    CHECK(r.verdict == Verdict::not_localized);
    CHECK(r.reached.rfind("layer pass: the first layer-level difference, fwd/layer.0 layer in x, is a ", 0) == 0);
    CHECK(r.reached.find("no recorded layer introduces it") != std::string::npos);
    CHECK(r.replays.size() == 2u);
  }
  SECTION("layer pass: the first difference's role is unknown (its layer records no input)") {
    Bisect b;
    b.workload.layer_input_unrecorded = true;
    const Report r = b.run();
    CHECK(r.verdict == Verdict::not_localized);
    CHECK(r.layer.empty());
    CHECK(r.reached ==
          "layer pass: the first layer-level difference, fwd/layer.0 layer out y, is an unknown: no recorded layer "
          "introduces it");
    CHECK(r.replays.size() == 2u);
  }
  SECTION("kernel pass: no op inside the layer differs") {
    Bisect b;
    b.workload.kernels_blind = true;
    const Report r = b.run();
    CHECK(r.verdict == Verdict::not_localized);
    CHECK(r.layer == "fwd/layer.0");
    CHECK(r.reached ==
          "kernel pass: inside fwd/layer.0 no op's outputs differ while its inputs match (3 isolated repetitions "
          "per side, and the per-kernel replays of step 0)");
    CHECK(r.replays.size() == 6u);
  }
}

// A generator nobody seeded (issue 38): a draw that differs while every
// record before it matches is the generator's state, never a receiver and
// never an incomplete restore where nothing was restored.
TEST_CASE("bisect's generator verdict", "[bisect][generator]") {
  SECTION("layer pass: the replays first differ at the generator a layer draws from, at the runs' first step") {
    Bisect b;
    b.workload.layer_generator_follows = true;
    const Report r = b.run();
    CHECK(r.verdict == Verdict::generator);
    CHECK(dtrace::bisect::verdict_name(r.verdict) == "generator");
    REQUIRE(r.generator);
    CHECK(r.generator->scope == "fwd/layer.0");
    CHECK(r.generator->op == "layer");
    CHECK(r.generator->io == "in");
    CHECK(r.generator->name == "rng");
    CHECK(r.generator->first_step);
    CHECK(r.reached.rfind("layer pass: the replays of step 0 first differ at fwd/layer.0 layer in rng, a "
                          "generator's state, every record before it matching: ", 0) == 0);
    CHECK(r.reached.find("step 0 is where both runs begin, so nothing was restored: the generator was not seeded "
                         "alike (not seeded, or seeded from the time or the process id)") != std::string::npos);
    CHECK(r.reached.find("receiver") == std::string::npos);
    CHECK(r.replays.size() == 2u);
  }
  SECTION("layer pass, at a later step: not seeded alike, or not saved and restored") {
    Bisect b(RunSteps{{0x5a, 0x5a}, {0, 0}}, RunSteps{{0x5a, 0x5a}, {0, 1}});
    b.options.step = 1;
    b.workload.layer_generator_follows = true;
    const Report r = b.run();
    CHECK(r.verdict == Verdict::generator);
    REQUIRE(r.generator);
    CHECK_FALSE(r.generator->first_step);
    CHECK(r.reached.find("not seeded alike (not seeded, or seeded from the time or the process id), or is not in "
                         "the state a checkpoint saves and a restore loads") != std::string::npos);
  }
  SECTION("restore check at the runs' first step: a drawn generator's state is not a restore") {
    Bisect b(RunSteps{{0x5a}, {0}, {}, "step", {0x71}}, RunSteps{{0x5a}, {1}, {}, "step", {0x72}});
    b.workload.restored_rng = {{'A', 0x73}, {'B', 0x74}};  // seeded by the system in every process
    const Report r = b.run();
    CHECK(r.verdict == Verdict::generator);
    REQUIRE(r.generator);
    CHECK(r.generator->scope == "step");
    CHECK(r.generator->op == "rng");
    CHECK(r.generator->io == "state");
    CHECK(r.generator->name == "numpy");
    CHECK(r.generator->first_step);
    CHECK(r.state.empty());
    CHECK(r.reached.rfind("restore check: replaying run A at step 0 does not start from the generator state the "
                          "run recorded (step rng numpy): step 0 is where both runs begin", 0) == 0);
  }
  SECTION("restore check: the runs began the step from different generator states, each replay matching its run") {
    Bisect b(RunSteps{{0x5a}, {0}, {}, "step", {0x71}}, RunSteps{{0x5a}, {1}, {}, "step", {0x72}});
    b.workload.restored_rng = {{'A', 0x71}, {'B', 0x72}};  // seeded from something each replay repeats
    const Report r = b.run();
    CHECK(r.verdict == Verdict::generator);
    REQUIRE(r.generator);
    CHECK(r.generator->first_step);
    CHECK(r.reached.rfind("restore check: runs A and B recorded different generator states at the start of step 0 "
                          "(step rng numpy): ", 0) == 0);
  }
  SECTION("restore check at a step a run resumed at: the generator not restored is a restore") {
    Bisect b(RunSteps{{0x5a, 0x5a}, {0, 0}, {}, "step", {0x71, 0x72}}, RunSteps{{0x5a}, {1}, {}, "step", {0x75}, 1});
    b.options.step = 1;
    b.workload.restored_rng = {{'A', 0x76}, {'B', 0x75}};  // B's resume re-seeds it, and so does A's replay
    const Report r = b.run();
    CHECK(r.verdict == Verdict::restore);
    CHECK(r.state == "numpy");
    CHECK(!r.generator);
  }
}

TEST_CASE("bisect's replay seam: trouble from the runner is an error naming the run", "[bisect]") {
  Bisect b;
  b.options.runner = [](const dtrace::replay::Command&) -> Result<dtrace::replay::Outcome> {
    dtrace::replay::Outcome o;
    o.exit_code = 3;
    o.stderr_tail = "boom";
    return o;
  };
  auto r = dtrace::bisect::run(b.options, {});
  REQUIRE(!r);
  CHECK(r.error().message == "replay of run A (layer) failed: exit 3; its stderr ends with:\nboom");
}

TEST_CASE("the restore and data checks match a record's repeats by occurrence", "[bisect]") {
  // Two state records of one scope, op and name (a parameter restored twice,
  // two micro-batches): each is compared with the replay's record of the same
  // occurrence, not with the first of its name.
  auto record = [](const char* op, dtrace::log::Io io, std::uint64_t digest) {
    dtrace::log::Record r;
    r.scope = "step";
    r.op = op;
    r.io = io;
    r.name = "b1";
    r.dtype = "f32";
    r.digest = dtrace::log::Digest::from_u64(digest);
    return r;
  };
  using dtrace::log::Io;
  dtrace::log::Step run, replay;
  run.records = {record("param", Io::state, 1), record("param", Io::state, 2), record("batch", Io::in, 3),
                 record("batch", Io::in, 4)};
  replay.records = run.records;
  CHECK_FALSE(dtrace::bisect::first_state_difference(replay, run));
  CHECK_FALSE(dtrace::bisect::first_input_difference(replay, run, true));
  replay.records[1].digest = dtrace::log::Digest::from_u64(5);
  replay.records[3].digest = dtrace::log::Digest::from_u64(6);
  const auto state = dtrace::bisect::first_state_difference(replay, run);
  REQUIRE(state);
  CHECK(state->op == "param");
  const auto input = dtrace::bisect::first_input_difference(replay, run, true);
  REQUIRE(input);
  CHECK(input->occurrence == 1);
  // Named as every text names a call (dtrace(1), CALLS OF A REPEATED OP).
  CHECK(input->text() == "step batch in b1, call 2 of 2");
  // The runs' own records compared (the data check before any replay): the
  // second micro-batch alone differs.
  dtrace::log::Step other = run;
  other.records[3].digest = dtrace::log::Digest::from_u64(6);
  const auto data = dtrace::bisect::first_input_difference(run, other, false);
  REQUIRE(data);
  CHECK(data->text() == "step batch in b1, call 2 of 2");
  other.records[3] = run.records[3];
  other.records[2].digest = dtrace::log::Digest::from_u64(7);
  CHECK(dtrace::bisect::first_input_difference(run, other, false)->text() == "step batch in b1, call 1 of 2");
}

namespace {

// A replay session's workload (dtrace-fp(5), "Replay sessions") of one rank
// that declines every request ("declined PID REASON") and notes each request
// it read, with its pid, in $DECLINE_LOG; the fake workload then serves each as the launch bisect makes
// of it. With DECLINE_FAIL_AT=K it exits 4 at request K instead. With
// END_WAIT=1, at its end request it waits (up to 5 s) for another session's
// end request beside its own directory before it exits, and notes "PID end
// with another" or "PID end alone".
constexpr char kDecliner[] = R"(
import glob, json, os, sys, time
d, k = os.environ["DTRACE_SESSION"], 0
def other_ended():
    for f in glob.glob(os.path.join(os.path.dirname(d), "*", "request.*.json")):
        if os.path.dirname(f) != d and json.load(open(f)).get("end"): return True
    return False
while True:
    f = f"{d}/request.{k}.json"
    while not os.path.exists(f): time.sleep(0.01)
    r = json.load(open(f))
    if r.get("end"):
        if os.environ.get("END_WAIT") == "1":
            waited = 0
            while not other_ended() and waited < 500: time.sleep(0.01); waited += 1
            open(os.environ["DECLINE_LOG"], "a").write(f"{os.getpid()} end {'with another' if other_ended() else 'alone'}\n")
        sys.exit(0)
    out = r["env"]["DTRACE_OUT_DIR"]
    open(os.environ["DECLINE_LOG"], "a").write(f"{os.getpid()} {k}\n")
    if k == int(os.environ.get("DECLINE_FAIL_AT", "-1")):
        open(f"{out}/rank0.status", "w").write("exit 4\n"); sys.exit(4)
    open(f"{out}/.s", "w").write(f"declined {os.getpid()} this fake replays in fresh processes only\n")
    os.replace(f"{out}/.s", f"{out}/rank0.status")
    k += 1
)";

// A bisect of runs whose headers announce sessions (dtrace-replay/1.2),
// replayed by --replay running kDecliner; FAKE_SIDE tells the fake which side
// each launch is.
struct DecliningBisect : Bisect {
  std::string log;
  // `extra` goes to A's environment, `extra_b` to B's.
  explicit DecliningBisect(const std::vector<std::pair<std::string, std::string>>& extra = {},
                           const std::vector<std::pair<std::string, std::string>>& extra_b = {}) {
    const RunSteps a{{0x5a}, {0}}, b{{0x5a}, {1}};
    std::string env_a = "{\"FAKE_SIDE\":\"A\"", env_b = "{\"FAKE_SIDE\":\"B\"";
    log = dir / "declines.log";
    env_a += ",\"DECLINE_LOG\":\"" + log + "\"";
    env_b += ",\"DECLINE_LOG\":\"" + log + "\"";
    for (const auto& [key, value] : extra) env_a += ",\"" + key + "\":\"" + value + "\"";
    for (const auto& [key, value] : extra_b) env_b += ",\"" + key + "\":\"" + value + "\"";
    write_run(dir, 'A', a, "{\"seed\":1}", env_a + "}", "dtrace-replay/1.2");
    write_run(dir, 'B', b, "{\"seed\":1}", env_b + "}", "dtrace-replay/1.2");
    options.replay = std::vector<std::string>{"python3", "-c", kDecliner};
  }
  // Each request the decliners read: "PID K".
  std::vector<std::string> declines() const {
    std::ifstream in(log);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
};

}  // namespace

TEST_CASE("bisect launches the requests a session declines, and keeps the session for the next", "[bisect][session]") {
  DecliningBisect b;
  const Report r = b.run();
  // The verdict of the same bisect by launches.
  CHECK(r.verdict == Verdict::named);
  CHECK(r.scope == "fwd/layer.0");
  CHECK(r.op == "add");
  CHECK(r.replay_mode == "sessions");
  CHECK(b.stages(r) == std::vector<std::string>{"layer A", "layer B", "capture A", "capture B", "kernel A",
                                                "kernel B", "confirm A", "confirm B"});
  // Two sessions, one per side, started once and sent all four of its
  // side's requests; a launch for each replay, naming the session's request.
  std::vector<std::size_t> sessions;
  for (std::size_t i = 0; i < r.launches.size(); ++i) {
    if (r.launches[i].session) sessions.push_back(i);
  }
  REQUIRE(sessions.size() == 2);
  // B's session started with A's, before A's first request was answered: the
  // two start-ups overlap (issue 41).
  CHECK(sessions == std::vector<std::size_t>{0, 1});
  CHECK(r.launches[0].side == 'A');
  CHECK(r.launches[1].side == 'B');
  for (std::size_t i : sessions) CHECK(r.launches[i].requests == 4);
  REQUIRE(r.launches.size() == 10);
  std::map<char, int> requests;
  for (const auto& replay : r.replays) {
    CHECK_FALSE(replay.request);
    const auto& launch = r.launches.at(static_cast<std::size_t>(replay.launch));
    REQUIRE(launch.declined);
    CHECK(launch.declined->reason == "this fake replays in fresh processes only");
    const auto& session = r.launches.at(static_cast<std::size_t>(launch.declined->session));
    CHECK(session.session);
    CHECK(session.side == replay.side);
    CHECK(launch.declined->request == requests[replay.side]++);
  }
  // The launches had the requests' variables, never DTRACE_SESSION.
  REQUIRE(b.workload.calls.size() == 8);
  for (const auto& [side, variables] : b.workload.calls) {
    CHECK(variables.count("DTRACE_SESSION") == 0);
    CHECK(variables.count("DTRACE_OUT_DIR") == 1);
  }
  CHECK(b.workload.calls.at(6).second.at("DTRACE_ISOLATE") == "fwd/layer.0::add");
  // Each side's one process read its four requests.
  const auto declines = b.declines();
  REQUIRE(declines.size() == 8);
  std::set<std::string> pids;
  for (const auto& line : declines) pids.insert(line.substr(0, line.find(' ')));
  CHECK(pids.size() == 2);
  CHECK(has_note(b.notes, "layer: run A's replay session declined request 0 "
                          "(this fake replays in fresh processes only): launched instead"));
  // The report says which replays were launched, and why.
  const std::string text = dtrace::report::bisect_to_text(r);
  INFO(text);
  CHECK(text.find("  layer A  ") != std::string::npos);
  CHECK(text.find("exit 0  launched, session 1 declined request 0 (this fake replays in fresh processes only): "
                  "DTRACE_REPLAY_STEP=0") != std::string::npos);
  CHECK(text.find("session 1 (A): 4 requests (4 declined, launched) in ") != std::string::npos);
  const auto json = dtrace::report::bisect_to_json(r);
  CHECK(json["schema_version"] == "1.7");
  const auto& first = json["launches"].at(static_cast<std::size_t>(r.replays.front().launch));
  CHECK(first["declined"] == nlohmann::json{{"session", 0}, {"request", 0},
                                            {"reason", "this fake replays in fresh processes only"}});
  CHECK(json["launches"].at(sessions.front())["declined"].is_null());
}

TEST_CASE("bisect sends every session its end request before it waits for one to exit", "[bisect][session]") {
  // Each side's session exits only once the other's has its end request too
  // (or 5 s later): ending the sessions one after the other, the first one's
  // exit would wait for an end request sent only after it (issue 41: the
  // workloads' exits overlap, as their start-ups do).
  const std::vector<std::pair<std::string, std::string>> wait{{"END_WAIT", "1"}};
  DecliningBisect b(wait, wait);
  const Report r = b.run();
  CHECK(r.verdict == Verdict::named);
  std::vector<std::string> ends;
  for (const std::string& line : b.declines()) {
    if (line.find(" end ") != std::string::npos) ends.push_back(line.substr(line.find(" end ")));
  }
  CHECK(ends == std::vector<std::string>{" end with another", " end with another"});
}

TEST_CASE("a declined request's launch is held to the first step replay as any replay is", "[bisect][session]") {
  // The capture stage's launch of A (the third whole-step replay) restores
  // other state than A's first replay did.
  DecliningBisect b;
  b.workload.restored_on_call = {{2, 0x99}};
  auto r = dtrace::bisect::run(b.options, {});
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  // Named as a launch (no request number): the launch is what replayed it.
  CHECK(r.error().message.find("then replay of run A (capture): it did not start step 0 from the state the run "
                               "started it from: opt adamw w (rank 0) is 0000000000000099 in this replay") !=
        std::string::npos);
  CHECK(r.error().message.find("than at its first replay (the layer stage's)") != std::string::npos);
}

TEST_CASE("a session that fails after declining fails bisect, naming the request", "[bisect][session]") {
  DecliningBisect b(std::vector<std::pair<std::string, std::string>>{{"DECLINE_FAIL_AT", "1"}});
  auto r = dtrace::bisect::run(b.options, {});
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  CHECK(r.error().message.find("then replay of run A (capture) failed in request 1 of its replay session "
                               "(step 0, level kernel, scope fwd/layer.0, capture): rank 0 exited with status 4") !=
        std::string::npos);
}

TEST_CASE("bisect pins the op it named and replays the step again until nothing else differs", "[bisect][pin]") {
  Bisect b;
  b.run_a = write_run(b.dir, 'A', {{0x5a}, {0}}, "{\"seed\":1}", "{}", "dtrace-replay/1.3");
  b.run_b = write_run(b.dir, 'B', {{0x5a}, {1}}, "{\"seed\":1}", "{}", "dtrace-replay/1.3");
  b.options.launches = true;
  b.options.keep = b.dir / "kept";
  SECTION("a workload that takes its pins: one culprit, and nothing else differs") {
    b.workload.honours_pins = true;
    const Report r = b.run();
    CHECK(r.verdict == Verdict::named);
    REQUIRE(r.culprits.size() == 1);
    CHECK(r.culprits[0].scope == "fwd/layer.0");
    CHECK(r.culprits[0].op == "add");
    CHECK(r.culprits[0].first_replay == 0);
    CHECK(r.culprits[0].end_replay == 8);
    CHECK(r.search_stop == "agree");
    CHECK(r.search_end == "with fwd/layer.0 add pinned, the replays of step 0 agree over 3 attempts: "
                         "nothing else differs with it pinned");
    // After the first culprit's eight replays, three attempts of two pinned layer replays.
    const auto stages = b.stages(r);
    REQUIRE(stages.size() == 14);
    for (std::size_t i = 8; i < 14; ++i) {
      CHECK(stages[i] == (i % 2 == 0 ? "layer A" : "layer B"));
      CHECK(b.workload.calls.at(i).second.count("DTRACE_PIN") == 1);
    }
    // The pin capture: add's output y of A's kernel-level capture, its bytes copied.
    const std::string pins = b.workload.calls.at(8).second.at("DTRACE_PIN");
    CHECK(Workload::pinned_records(pins) == 1);
    std::ifstream index(pins + "/capture.jsonl");
    std::string head, record;
    std::getline(index, head);
    std::getline(index, record);
    CHECK(record.find("\"scope\":\"fwd/layer.0\",\"op\":\"add\",\"io\":\"out\",\"name\":\"y\"") !=
          std::string::npos);
    CHECK(fs::exists(pins + "/" + dtrace::log::capture_file_name(0, 0, 0)));
    // A capture index's line, as the recorder writes one: its bytes' file named.
    CHECK(record.find("\"file\":\"" + dtrace::log::capture_file_name(0, 0, 0) + "\"}") != std::string::npos);
    const auto json = dtrace::report::bisect_to_json(r);
    REQUIRE(json["culprits"].size() == 1);
    CHECK(json["culprits"][0]["op"] == "add");
    CHECK(json["culprits"][0]["replays"] == nlohmann::json{0, 8});
    CHECK(json["search"]["stop"] == "agree");
    CHECK(json["culprit"]["op"] == "add");
    const std::string text = dtrace::report::bisect_to_text(r);
    CHECK(text.find("  search:   with fwd/layer.0 add pinned, the replays of step 0 agree") != std::string::npos);
  }
  SECTION("a workload that says 1.3 and ignores its pins is refused, naming DTRACE_PIN") {
    auto r = dtrace::bisect::run(b.options, {});
    REQUIRE_FALSE(r);
    INFO(r.error().message);
    CHECK(r.error().message.find("did not take the pins DTRACE_PIN=") != std::string::npos);
    CHECK(r.error().message.find("rank0.pins") != std::string::npos);
  }
  SECTION("--first stops at the first culprit") {
    b.options.first = true;
    const Report r = b.run();
    CHECK(r.culprits.size() == 1);
    CHECK(r.search_stop == "first");
    CHECK(r.replays.size() == 8);
  }
}

TEST_CASE("a workload that cannot pin gets one culprit and a note saying why the search stopped", "[bisect][pin]") {
  Bisect b;
  const Report r = b.run();
  REQUIRE(r.culprits.size() == 1);
  CHECK(r.search_stop == "no-pins");
  CHECK(r.search_end.rfind("run A's workload speaks dtrace-replay/1, which cannot pin an op (dtrace-replay/1.3)", 0) == 0);
  CHECK(r.replays.size() == 8);
}
