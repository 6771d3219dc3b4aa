// minitrain under the replay protocol, in process: a step replayed with a full
// kernel-level capture, then every layer and every op of that step run alone
// from the capture. Each must reproduce exactly what the replay recorded --
// which holds only if every layer declares all it reads (weights, saved
// activations, RNG state) and every kernel all its inputs.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
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
  const auto site = mt::planted_site(config.planted.list().front(), config.shape);

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
  const auto site = mt::planted_site(config.planted.list().front(), config.shape);
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

namespace {

// A pin capture as bisect writes one (man/dtrace-fp.5, "Pinned ops"): of a
// kernel-level capture, only the out records of `op` in `scope`, with their
// bytes, each rank's index ending its step with the count it keeps.
void pin_capture(const std::string& capture, const std::string& pins, const std::string& scope,
                 const std::string& op) {
  namespace fs = std::filesystem;
  fs::create_directories(pins);
  for (const auto& file : fs::directory_iterator(capture)) {
    const std::string name = file.path().filename().string();
    if (!name.starts_with("capture.") || !name.ends_with(".jsonl")) continue;
    std::ifstream in(file.path());
    std::ofstream out(fs::path(pins) / name);
    std::string line;
    std::getline(in, line);
    out << line << "\n";  // the header
    int kept = 0;
    nlohmann::json end;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("end")) end = j;
      if (j.value("scope", "") != scope || j.value("op", "") != op || j.value("io", "") != "out")
        continue;
      out << line << "\n";
      fs::copy_file(fs::path(capture) / j["file"].get<std::string>(),
                    fs::path(pins) / j["file"].get<std::string>());
      ++kept;
    }
    REQUIRE(kept > 0);
    end["count"] = kept;
    out << end.dump() << "\n";
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Rank 0's out records named `name` of (scope, op), one value per step (repetition).
std::set<std::string> outputs_of(const Log& log, const std::string& scope, const std::string& op,
                                 const std::string& name) {
  std::set<std::string> values;
  for (const auto& [step, records] : log.by_step)
    for (const auto& [id, value] : records)
      if (id == Identity{0, scope, op, "out", name}) values.insert(value);
  return values;
}

}  // namespace

TEST_CASE(
    "minitrain takes a pinned op's outputs in a step replay, at any level, and in each isolated "
    "repetition",
    "[minitrain][replay][pin]") {
  test_support::TempDir dir;
  mt::Config a = small_config(write_corpus(dir), dir / "ck");
  a.planted = mt::Planted::splitk;
  a.chaos_seed = 1;
  mt::Config b = a;
  b.chaos_seed = 2;
  const auto site = mt::planted_site(mt::Planted::splitk, a.shape);

  // A's step 0 captured in the planted op's layer, and the pins: its outputs.
  dtrace::ReplayRequest capture;
  capture.step = 0;
  capture.out_dir = dir / "captured";
  capture.level = dtrace::Level::kernel;
  capture.scope = site.scope;
  capture.capture = dir / "capture";
  mt::run(a, "minitrain", capture, {});
  pin_capture(dir / "capture", dir / "pins", site.scope, site.op);
  const auto captured =
      outputs_of(read_log(dir / "captured/rank0.jsonl"), site.scope, site.op, "y");
  REQUIRE(captured.size() == 1);

  auto replay = [&](const mt::Config& config, const std::string& out, bool pinned,
                    dtrace::Level level = dtrace::Level::kernel) {
    dtrace::ReplayRequest request;
    request.step = 0;
    request.out_dir = dir / out;
    request.level = level;
    if (pinned) request.pin = dir / "pins";
    mt::run(config, "minitrain", request, {});
    Log log;
    for (int rank = 0; rank < config.ranks; ++rank) {
      const Log one = read_log(dir / (out + "/rank" + std::to_string(rank) + ".jsonl"));
      for (const auto& [step, records] : one.by_step)
        log.by_step[step].insert(records.begin(), records.end());
    }
    return log;
  };

  SECTION("a step replay") {
    // Without the pin the two sides' chaos differs at the planted op.
    CHECK(replay(a, "a", false).by_step != replay(b, "b", false).by_step);
    // With it both take A's output there, and all that follows agrees.
    const Log pinned_a = replay(a, "pinned-a", true), pinned_b = replay(b, "pinned-b", true);
    CHECK(outputs_of(pinned_b, site.scope, site.op, "y") == captured);
    CHECK(pinned_a.by_step == pinned_b.by_step);
    // One pin taken per rank, acknowledged where the replay's logs go.
    for (int rank = 0; rank < a.ranks; ++rank) {
      CHECK(read_text(dir / ("pinned-b/rank" + std::to_string(rank) + ".pins")) ==
            "{\"step\":0,\"pinned\":1}\n");
    }
  }

  SECTION("a step replay at layer level asks too") {
    const Log layer_a = replay(a, "layer-a", true, dtrace::Level::layer),
              layer_b = replay(b, "layer-b", true, dtrace::Level::layer);
    CHECK(layer_a.by_step == layer_b.by_step);
    CHECK(read_text(dir / "layer-b/rank1.pins") == "{\"step\":0,\"pinned\":1}\n");
    CHECK(replay(a, "layer-free-a", false, dtrace::Level::layer).by_step !=
          replay(b, "layer-free-b", false, dtrace::Level::layer).by_step);
  }

  SECTION("isolated repetitions of the layer and of the op") {
    auto isolate = [&](const std::string& target, const std::string& out, bool pinned) {
      dtrace::ReplayRequest request;
      request.isolate = target;
      request.inputs = dir / "capture";
      request.repeat = 3;
      request.level = dtrace::Level::kernel;
      request.out_dir = dir / out;
      if (pinned) request.pin = dir / "pins";
      mt::run(b, "minitrain", request, {});
      return read_log(dir / (out + "/rank0.jsonl"));
    };
    // Each repetition draws its own chaos: three outputs, unless pinned.
    CHECK(outputs_of(isolate(site.scope, "layer-free", false), site.scope, site.op, "y").size() ==
          3);
    const Log layer = isolate(site.scope, "layer", true);
    CHECK(outputs_of(layer, site.scope, site.op, "y") == captured);
    CHECK(outputs_of(layer, site.scope, "mlp", "y").size() == 1);  // the layer's output, every time
    CHECK(read_text(dir / "layer/rank0.pins") ==
          "{\"step\":0,\"pinned\":1}\n{\"step\":1,\"pinned\":1}\n{\"step\":2,\"pinned\":1}\n");
    CHECK(outputs_of(isolate(site.scope + "::" + site.op, "op", true), site.scope, site.op, "y") ==
          captured);
  }
}

TEST_CASE("minitrain refuses a pin of another size than the output", "[minitrain][replay][pin]") {
  test_support::TempDir dir;
  mt::Config config = small_config(write_corpus(dir), dir / "ck");
  dtrace::ReplayRequest capture;
  capture.step = 0;
  capture.out_dir = dir / "captured";
  capture.level = dtrace::Level::kernel;
  capture.scope = "fwd/layer.0/mlp";
  capture.capture = dir / "capture";
  mt::run(config, "minitrain", capture, {});
  pin_capture(dir / "capture", dir / "pins", "fwd/layer.0/mlp", "gemm_fc2");

  config.shape.batch = 3;  // more rows than the capture's
  dtrace::ReplayRequest request;
  request.step = 0;
  request.out_dir = dir / "replay";
  request.level = dtrace::Level::kernel;
  request.pin = dir / "pins";
  CHECK_THROWS_WITH(
      mt::run(config, "minitrain", request, {}),
      Catch::Contains("DTRACE_PIN: the pinned output fwd/layer.0/mlp::gemm_fc2 y has 1024 bytes, "
                      "this configuration's has 1536"));
}
