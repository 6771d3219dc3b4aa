#include "dtrace/determinism.hpp"

#include <stdlib.h>

#include <catch2/catch.hpp>

namespace determinism = dtrace::determinism;
using determinism::Environment;

namespace {

const determinism::Check& check_of(const std::vector<determinism::Check>& checks,
                                   std::string_view name) {
  for (const auto& c : checks) {
    if (c.name == name) return c;
  }
  FAIL("no check for " << name);
  return checks.front();
}

}  // namespace

TEST_CASE("NCCL_ALGO: Tree is rejected, subsets of the fixed-order algorithms accepted") {
  CHECK(determinism::why_not_deterministic("NCCL_ALGO", "Tree") ==
        "NCCL_ALGO=Tree, whose reduction order is not fixed (the chain order within a node is not "
        "controllable and the tree between nodes can change from run to run)");
  CHECK(determinism::why_not_deterministic("NCCL_ALGO", "Ring,Tree") ==
        "NCCL_ALGO=Ring,Tree, which allows Tree, whose reduction order is not fixed (the chain "
        "order within a node is not controllable and the tree between nodes can change from "
        "run to run)");
  CHECK_FALSE(determinism::why_not_deterministic("NCCL_ALGO", "Ring"));
  CHECK_FALSE(determinism::why_not_deterministic("NCCL_ALGO", "Ring,CollnetDirect"));
  CHECK_FALSE(determinism::why_not_deterministic("NCCL_ALGO", "CollnetChain,^NVLS"));
  CHECK_THAT(*determinism::why_not_deterministic("NCCL_ALGO", "NVLS"),
             Catch::Contains("which names NVLS, not one of"));
  CHECK(determinism::why_not_deterministic("NCCL_ALGO", "Ring,"));
  CHECK(determinism::why_not_deterministic("NCCL_ALGO", ""));
}

TEST_CASE("the single-value rules") {
  using determinism::why_not_deterministic;
  CHECK_FALSE(why_not_deterministic("NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0"));
  CHECK(why_not_deterministic("NVTE_ALLOW_NONDETERMINISTIC_ALGO", "1"));
  CHECK_FALSE(why_not_deterministic("CUBLAS_WORKSPACE_CONFIG", ":4096:8"));
  CHECK_FALSE(why_not_deterministic("CUBLAS_WORKSPACE_CONFIG", ":16:8"));
  CHECK_THAT(*why_not_deterministic("CUBLAS_WORKSPACE_CONFIG", ":0:0"),
             Catch::StartsWith("CUBLAS_WORKSPACE_CONFIG=:0:0, which is not a deterministic"));
  CHECK_FALSE(why_not_deterministic("TRITON_CACHE_AUTOTUNING", "0"));
  CHECK(why_not_deterministic("TRITON_CACHE_AUTOTUNING", "2"));
  CHECK_FALSE(why_not_deterministic("TRITON_PRINT_AUTOTUNING", "1"));
  CHECK(why_not_deterministic("TRITON_PRINT_AUTOTUNING", "0"));
  CHECK_FALSE(why_not_deterministic("MAMBA_DETERMINISTIC", "1"));
  CHECK_FALSE(why_not_deterministic("MAMBA_DETERMINISTIC", "1yes"));
  CHECK(why_not_deterministic("MAMBA_DETERMINISTIC", "0"));
  CHECK(why_not_deterministic("CAUSAL_CONV1D_DETERMINISTIC", "true"));
  CHECK_FALSE(why_not_deterministic("CAUSAL_CONV1D_DETERMINISTIC", "1"));
  CHECK_FALSE(why_not_deterministic("HOME", "/root"));  // not a rule's business
}

TEST_CASE("TRITON_CACHE_AUTOTUNING=1 requires TRITON_CACHE_DIR") {
  const auto alone = determinism::validate({{"TRITON_CACHE_AUTOTUNING", "1"}});
  const auto& check = check_of(alone, "TRITON_CACHE_AUTOTUNING");
  CHECK_FALSE(check.valid);
  CHECK_THAT(check.reason, Catch::Contains("requires TRITON_CACHE_DIR"));
  CHECK_FALSE(determinism::all_valid(alone));
  const auto with_dir = determinism::validate(
      {{"TRITON_CACHE_AUTOTUNING", "1"}, {"TRITON_CACHE_DIR", "/shared/triton"}});
  CHECK(determinism::all_valid(with_dir));
}

TEST_CASE("validate fills defaults for unset variables and marks them defaulted") {
  const auto checks = determinism::validate({{"NCCL_ALGO", "CollnetDirect"}});
  REQUIRE(checks.size() == determinism::rules().size());
  CHECK(determinism::all_valid(checks));
  const auto& nccl = check_of(checks, "NCCL_ALGO");
  CHECK(nccl.value == "CollnetDirect");
  CHECK_FALSE(nccl.defaulted);
  const auto& cublas = check_of(checks, "CUBLAS_WORKSPACE_CONFIG");
  CHECK(cublas.value == ":4096:8");
  CHECK(cublas.defaulted);
  CHECK(check_of(checks, "NVTE_ALLOW_NONDETERMINISTIC_ALGO").value == "0");
  CHECK_FALSE(check_of(checks, "MAMBA_DETERMINISTIC").value);  // no default: left unset
  CHECK(determinism::header_env(checks) ==
        std::vector<std::pair<std::string, std::string>>{{"NCCL_ALGO", "CollnetDirect"},
                                                         {"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0"},
                                                         {"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}});
}

TEST_CASE("apply fills defaults, and fills nothing when a set value is invalid") {
  Environment env{{"NCCL_ALGO", "Ring"}};
  auto applied = determinism::apply(env);
  CHECK(applied.ok());
  CHECK(applied.filled ==
        std::vector<std::string>{"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "CUBLAS_WORKSPACE_CONFIG"});
  CHECK(env == Environment{{"NCCL_ALGO", "Ring"},
                           {"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0"},
                           {"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}});

  Environment bad{{"NCCL_ALGO", "Tree"}};
  applied = determinism::apply(bad);
  CHECK_FALSE(applied.ok());
  CHECK(applied.filled.empty());
  CHECK(bad == Environment{{"NCCL_ALGO", "Tree"}});  // never replaced
  CHECK(check_of(applied.checks, "NCCL_ALGO").reason ==
        "NCCL_ALGO=Tree, whose reduction order is not fixed (the chain order within a node is not "
        "controllable and the tree between nodes can change from run to run)");
}

TEST_CASE("apply sets defaults in the process environment") {
  for (const auto& rule : determinism::rules()) ::unsetenv(std::string(rule.name).c_str());
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8", 1);
  const auto applied = determinism::apply();
  CHECK(applied.ok());
  CHECK(std::string(::getenv("NCCL_ALGO")) == "Ring");
  CHECK(std::string(::getenv("NVTE_ALLOW_NONDETERMINISTIC_ALGO")) == "0");
  CHECK(std::string(::getenv("CUBLAS_WORKSPACE_CONFIG")) == ":16:8");
  CHECK(::getenv("TRITON_CACHE_AUTOTUNING") == nullptr);

  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0", 1);
  ::unsetenv("NCCL_ALGO");
  const auto refused = determinism::apply();
  CHECK_FALSE(refused.ok());
  CHECK(std::string(::getenv("CUBLAS_WORKSPACE_CONFIG")) == ":0:0");
  CHECK(::getenv("NCCL_ALGO") == nullptr);
  for (const auto& rule : determinism::rules()) ::unsetenv(std::string(rule.name).c_str());
}

TEST_CASE("the rule table knows its variables") {
  const auto* rule = determinism::find_rule("NCCL_ALGO");
  REQUIRE(rule != nullptr);
  CHECK(rule->default_value == "Ring");
  CHECK(determinism::find_rule("TRITON_CACHE_DIR") != nullptr);
  CHECK(determinism::find_rule("PATH") == nullptr);
}

TEST_CASE("advisories: listed, read from the process, never validated") {
  REQUIRE_FALSE(determinism::advisories().empty());
  for (const auto& advisory : determinism::advisories()) {
    CHECK_FALSE(advisory.why.empty());
    CHECK(determinism::find_rule(advisory.name) == nullptr);  // no variable is both
  }
  ::setenv("NCCL_PROTO", "LL128", 1);
  const auto env = determinism::process_environment();
  ::unsetenv("NCCL_PROTO");
  CHECK(env.at("NCCL_PROTO") == "LL128");
  const auto checks = determinism::validate(env);
  CHECK(determinism::all_valid(checks));
  CHECK(checks.size() == determinism::rules().size());
  for (const auto& [name, value] : determinism::header_env(checks)) CHECK(name != "NCCL_PROTO");
}
