// Several plants at once (`--nondet splitk,atomic-bias-grad`, issue 40): the
// list as parsed and refused, the order of their sites in a step (the ground
// truth bisect's culprits are held to), and how the header's config and the
// replay argv carry it, a single plant's exactly as before.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "minitrain/checkpoint.hpp"
#include "minitrain/config.hpp"
#include "minitrain/model.hpp"

namespace mt = minitrain;
using mt::Planted;

namespace {

std::string refusal(const std::string& names) {
  try {
    mt::Plants::parse(names);
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(accepted)";
}

// The words after "--nondet" in a configuration's replay argv, or "" without one.
std::string argv_nondet(const mt::Config& config) {
  const auto argv = mt::replay_argv(config, "minitrain");
  const auto it = std::find(argv.begin(), argv.end(), "--nondet");
  return it == argv.end() ? "" : *(it + 1);
}

}  // namespace

TEST_CASE("--nondet takes one plant, several separated by commas, or none", "[minitrain][plants]") {
  CHECK(mt::Plants::parse("none").empty());
  CHECK(mt::Plants::parse("none").names() == "none");

  const auto one = mt::Plants::parse("splitk");
  CHECK(one.list() == std::vector<Planted>{Planted::splitk});
  CHECK(one.has(Planted::splitk));
  CHECK_FALSE(one.has(Planted::atomic_bias_grad));

  const auto two = mt::Plants::parse("atomic-bias-grad,splitk");
  CHECK(two.list() == std::vector<Planted>{Planted::atomic_bias_grad, Planted::splitk});
  CHECK(two.has(Planted::splitk));
  CHECK(two.has(Planted::atomic_bias_grad));
  CHECK(two.names() == "atomic-bias-grad,splitk");  // as given, for the replay argv
  // The order their sites run in a step: forward before backward.
  CHECK(two.in_step_order() == std::vector<Planted>{Planted::splitk, Planted::atomic_bias_grad});

  // A single plant converts as the one-plant configuration always did.
  mt::Plants converted = Planted::uninit_pad;
  CHECK(converted.list() == std::vector<Planted>{Planted::uninit_pad});
  CHECK(mt::Plants(Planted::none).empty());
}

TEST_CASE("--nondet refuses unknown, empty, repeated and clashing names", "[minitrain][plants]") {
  CHECK(refusal("cosmic-rays").starts_with("--nondet: cosmic-rays not in {none,atomic-bias-grad,"));
  CHECK(refusal("splitk,cosmic-rays").starts_with("--nondet: cosmic-rays not in {"));
  CHECK(refusal("splitk,splitk") == "--nondet splitk,splitk: splitk is given twice");
  CHECK(refusal("splitk,,autotune").find("an empty name") != std::string::npos);
  CHECK(refusal("splitk,").find("an empty name") != std::string::npos);
  CHECK(refusal("").find("an empty name") != std::string::npos);
  CHECK(refusal("none,splitk") ==
        "--nondet none,splitk: none plants nothing; it cannot go with other names");
  CHECK(refusal("splitk-second-call,splitk")
            .find("plant the same op (gemm_fc2 in fwd/layer.0/mlp)") != std::string::npos);
  // The flag named is the one the names came from.
  try {
    mt::Plants::parse("x", "--print-planted");
    FAIL("accepted");
  } catch (const mt::Error& e) {
    CHECK(std::string(e.what()).starts_with("--print-planted: x not in {"));
  }
  // Every pair of distinct kinds but that one goes together.
  for (auto a : mt::planted_names())
    for (auto b : mt::planted_names()) {
      if (a == b) continue;
      const std::string pair = std::string(a) + "," + std::string(b);
      const bool clash = (a == "splitk" && b == "splitk-second-call") ||
                         (a == "splitk-second-call" && b == "splitk");
      INFO(pair);
      CHECK((refusal(pair) == "(accepted)") == !clash);
    }
}

TEST_CASE("two causes in two layers, and two in one layer where the first feeds the second",
          "[minitrain][plants]") {
  mt::ModelShape shape;  // two layers
  const auto fc1 = mt::planted_site(Planted::splitk_fc1, shape);
  const auto fc2 = mt::planted_site(Planted::splitk, shape);
  const auto bias = mt::planted_site(Planted::atomic_bias_grad, shape);
  CHECK(fc1.op == "gemm_fc1");
  CHECK(fc1.scope == "fwd/layer.0/mlp");
  CHECK(fc1.scope == fc2.scope);  // one layer: gemm_fc1 -> gelu -> gemm_fc2
  CHECK(bias.scope == "bwd/layer.1/mlp");
  CHECK(bias.scope != fc2.scope);
  CHECK(mt::Plants::parse("splitk,splitk-fc1").in_step_order() ==
        std::vector<Planted>{Planted::splitk_fc1, Planted::splitk});

  // Every kind has its place in a step's order, and the order is the step's:
  // the restored state, the forward, the backward, the all-reduce.
  std::string all;
  for (auto n : mt::planted_names()) {
    if (n == "splitk-second-call") continue;  // clashes with splitk
    all += (all.empty() ? "" : ",") + std::string(n);
  }
  std::vector<std::string> ordered;
  for (Planted p : mt::Plants::parse(all).in_step_order())
    ordered.emplace_back(mt::planted_name(p));
  CHECK(ordered == std::vector<std::string>{"resume-rng", "splitk-fc1", "splitk", "autotune",
                                            "fused-ce", "atomic-bias-grad", "uninit-pad",
                                            "allreduce-arrival"});
}

TEST_CASE("the header's config and the replay argv carry every plant", "[minitrain][plants]") {
  mt::Config config;
  CHECK(nlohmann::json::parse(mt::config_json(config))["nondet"] == "none");
  CHECK(argv_nondet(config).empty());

  config.planted = Planted::splitk;
  CHECK(nlohmann::json::parse(mt::config_json(config))["nondet"] == "splitk");
  CHECK(argv_nondet(config) == "splitk");

  config.planted = mt::Plants::parse("splitk-fc1,splitk");
  CHECK(nlohmann::json::parse(mt::config_json(config))["nondet"] == "splitk-fc1,splitk");
  // Read back, the argv plants the same.
  CHECK(mt::Plants::parse(argv_nondet(config)).list() == config.planted.list());

  // A plant's own requirement holds inside a list.
  config.planted = mt::Plants::parse("splitk,allreduce-arrival");
  config.ranks = 2;
  config.out = "run";
  CHECK_THROWS_WITH(mt::validate(config, false),
                    Catch::Contains("--nondet allreduce-arrival needs --ranks 3 or more"));
}
