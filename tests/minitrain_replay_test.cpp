// minitrain under the replay protocol, in process: a step replayed with a full
// kernel-level capture, then every layer and every op of that step run alone
// from the capture. Each must reproduce exactly what the replay recorded --
// which holds only if every layer declares all it reads (weights, saved
// activations, RNG state) and every kernel all its inputs.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "minitrain/config.hpp"
#include "minitrain/trainer.hpp"
#include "recorder_support.hpp"

namespace mt = minitrain;

namespace {

using Identity =
    std::tuple<int, std::string, std::string, std::string, std::string>;  // rank scope op io name

struct Log {
  std::map<Identity, std::string> step_records;            // of one step
  std::map<int, std::map<Identity, std::string>> by_step;  // step -> records
};

Log read_log(const std::string& path) {
  Log log;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("scope") || j["io"] == "timing") continue;
    const Identity id{j["rank"].get<int>(), j["scope"], j["op"], j["io"], j["name"]};
    const std::string value =
        j.contains("hash") ? j["hash"].get<std::string>() : j["bits"].get<std::string>();
    log.by_step[j["step"].get<int>()][id] = value;
  }
  return log;
}

mt::Config small_config(const std::string& corpus, const std::string& ckpt) {
  mt::Config c;
  c.shape.d_model = 16;
  c.shape.n_layer = 2;
  c.shape.n_head = 2;
  c.shape.seq = 8;
  c.shape.batch = 2;
  c.ranks = 2;
  c.steps = 4;
  c.corpus = corpus;
  c.checkpoint_dir = ckpt;
  return c;
}

std::string write_corpus(const test_support::TempDir& dir) {
  std::ofstream out(dir / "corpus.txt");
  for (int i = 0; i < 50; ++i)
    out << "Line " << i << ": the tide came in late and the gulls flew inland.\n";
  return dir / "corpus.txt";
}

}  // namespace

TEST_CASE("minitrain runs every layer and every op alone from a capture", "[minitrain][replay]") {
  test_support::TempDir dir;
  const mt::Config config = small_config(write_corpus(dir), dir / "ck");

  dtrace::ReplayRequest replay;
  replay.step = 2;
  replay.out = dir / "replay.jsonl";
  replay.level = dtrace::Level::kernel;
  replay.capture = dir / "capture";
  const auto result = mt::run(config, "minitrain", replay, {});
  CHECK(result.mode == mt::RunResult::Mode::replay_step);
  const Log recorded = read_log(dir / "replay.jsonl");
  REQUIRE(recorded.by_step.size() == 1);
  const auto& step = recorded.by_step.at(2);

  // Layers are the records whose op is the scope's last part; ops the rest.
  std::set<std::string> layers;
  std::set<std::pair<std::string, std::string>> ops;
  for (const auto& [id, value] : step) {
    const auto& [rank, scope, op, io, name] = id;
    if (scope == "step") continue;
    if (scope.substr(scope.rfind('/') + 1) == op) {
      layers.insert(scope);
    } else {
      ops.emplace(scope, op);
    }
  }
  CHECK(layers.size() ==
        4 + 4 + 6);  // 2 layers x (attn, mlp) x (fwd, bwd) + embed, head x 2, comm, opt
  CHECK(ops.size() > 80);

  int run_number = 0;
  auto isolate = [&](const std::string& target, int repeat) {
    dtrace::ReplayRequest request;
    request.isolate = target;
    request.inputs = dir / "capture";
    request.repeat = repeat;
    request.step = 2;
    request.level = dtrace::Level::kernel;
    request.out = dir / ("isolate-" + std::to_string(run_number++) + ".jsonl");
    const auto r = mt::run(config, "minitrain", request, {});
    CHECK(r.mode == mt::RunResult::Mode::isolate);
    CHECK(r.isolated_runs == repeat * config.ranks);
    return read_log(*request.out);
  };
  auto check_against_replay = [&](const std::string& target, const Log& isolated) {
    INFO("isolated " << target);
    REQUIRE(!isolated.by_step.empty());
    for (const auto& [repetition, records] : isolated.by_step) {
      CHECK(!records.empty());
      for (const auto& [id, value] : records) {
        INFO(std::get<1>(id) << " " << std::get<2>(id) << " " << std::get<3>(id) << " "
                             << std::get<4>(id) << " rank " << std::get<0>(id) << " repetition "
                             << repetition);
        REQUIRE(step.count(id) == 1);
        CHECK(step.at(id) == value);
      }
    }
  };
  for (const auto& layer : layers) check_against_replay(layer, isolate(layer, 1));
  for (const auto& [scope, op] : ops)
    check_against_replay(scope + "::" + op, isolate(scope + "::" + op, 1));

  SECTION("K repetitions are recorded as steps 0..K-1") {
    const auto isolated = isolate("fwd/layer.1/mlp::gemm_fc2", 3);
    CHECK(isolated.by_step.size() == 3);
    check_against_replay("fwd/layer.1/mlp::gemm_fc2 x3", isolated);
  }
}

TEST_CASE("minitrain planted op gives different outputs in every isolated repetition",
          "[minitrain][replay]") {
  test_support::TempDir dir;
  mt::Config config = small_config(write_corpus(dir), dir / "ck");
  config.planted = mt::Planted::splitk;
  const auto site = mt::planted_site(config.planted, config.shape);

  dtrace::ReplayRequest replay;
  replay.step = 0;
  replay.out = dir / "replay.jsonl";
  replay.level = dtrace::Level::kernel;
  replay.scope = site.scope;
  replay.capture = dir / "capture";
  mt::run(config, "minitrain", replay, {});

  dtrace::ReplayRequest request;
  request.isolate = site.scope + "::" + site.op;
  request.inputs = dir / "capture";
  request.repeat = 4;
  request.level = dtrace::Level::kernel;
  request.out = dir / "isolate.jsonl";
  mt::run(config, "minitrain", request, {});
  const Log isolated = read_log(*request.out);
  REQUIRE(isolated.by_step.size() == 4);
  std::set<std::string> inputs, outputs;
  for (const auto& [k, records] : isolated.by_step) {
    for (const auto& [id, value] : records) {
      if (std::get<0>(id) != 0) continue;
      (std::get<3>(id) == "in" ? inputs : outputs).insert(std::get<4>(id) + "=" + value);
    }
  }
  CHECK(inputs.size() == 3);   // x, w, b: identical in every repetition
  CHECK(outputs.size() == 4);  // y: a different value each time
}

TEST_CASE("minitrain isolates the call of an op that DTRACE_OCCURRENCE names", "[minitrain][replay]") {
  test_support::TempDir dir;
  mt::Config config = small_config(write_corpus(dir), dir / "ck");
  config.planted = mt::Planted::splitk_second_call;
  const auto site = mt::planted_site(config.planted, config.shape);
  CHECK(site.occurrence == 1);
  CHECK(site.calls == 2);

  dtrace::ReplayRequest replay;
  replay.step = 0;
  replay.out = dir / "replay.jsonl";
  replay.level = dtrace::Level::kernel;
  replay.scope = site.scope;
  replay.capture = dir / "capture";
  mt::run(config, "minitrain", replay, {});
  // Rank 0's input x of each call of the op, in call order, as captured.
  auto inputs_x = [&](const std::string& path, int step) {
    std::vector<std::string> xs;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("scope") && j["rank"] == 0 && j["step"] == step && j["scope"] == site.scope &&
          j["op"] == site.op && j["io"] == "in" && j["name"] == "x") {
        xs.push_back(j["hash"]);
      }
    }
    return xs;
  };
  const auto captured = inputs_x(dir / "capture/capture.jsonl", 0);
  REQUIRE(captured.size() == 2);
  CHECK(captured[0] != captured[1]);

  for (int call : {0, 1}) {
    dtrace::ReplayRequest request;
    request.isolate = site.scope + "::" + site.op;
    request.isolate_occurrence = call;
    request.inputs = dir / "capture";
    request.repeat = 3;
    request.level = dtrace::Level::kernel;
    request.out = dir / ("isolate-" + std::to_string(call) + ".jsonl");
    const auto r = mt::run(config, "minitrain", request, {});
    CHECK(r.isolated_runs == 3 * config.ranks);  // the one call, not both
    const Log isolated = read_log(*request.out);
    REQUIRE(isolated.by_step.size() == 3);
    std::set<std::string> outputs;
    for (const auto& [k, records] : isolated.by_step) {
      CHECK(inputs_x(*request.out, k) == std::vector<std::string>{captured[static_cast<std::size_t>(call)]});
      for (const auto& [id, value] : records) {
        if (std::get<0>(id) == 0 && std::get<3>(id) == "out") outputs.insert(value);
      }
    }
    // Only the second call splits K: one output for the first, three for it.
    CHECK(outputs.size() == (call == 0 ? 1u : 3u));
  }
}

TEST_CASE("minitrain isolation of something the model lacks is an error", "[minitrain][replay]") {
  test_support::TempDir dir;
  const mt::Config config = small_config(write_corpus(dir), dir / "ck");
  dtrace::ReplayRequest replay;
  replay.step = 0;
  replay.out = dir / "replay.jsonl";
  replay.level = dtrace::Level::kernel;
  replay.capture = dir / "capture";
  mt::run(config, "minitrain", replay, {});

  dtrace::ReplayRequest request;
  request.isolate = "fwd/layer.7/mlp";
  request.inputs = dir / "capture";
  request.out = dir / "isolate.jsonl";
  CHECK_THROWS_WITH(mt::run(config, "minitrain", request, {}), Catch::Contains("no rank ran it"));
}
