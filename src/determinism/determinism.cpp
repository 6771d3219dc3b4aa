// The rules of dtrace(1), env, one function per variable kind. Reasons say what
// goes wrong, in a sentence a user acts on, because the diff report prints them
// next to the header difference that most likely caused a divergence. Each
// reads on from "NAME=VALUE" with a comma ("NCCL_ALGO=Tree, whose reduction
// order is not fixed ..."), so `dtrace diff` can say "run B used " + reason and
// `dtrace env` can print it alone.
#include "dtrace/determinism.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>

namespace dtrace::determinism {

namespace {

constexpr std::array<Rule, 8> kRules{{
    {"NCCL_ALGO", "Ring", "a comma-separated subset of Ring, CollnetDirect, CollnetChain, ^NVLS"},
    {"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0", "0"},
    {"CUBLAS_WORKSPACE_CONFIG", ":4096:8", ":4096:8 or :16:8"},
    {"TRITON_CACHE_AUTOTUNING", std::nullopt, "0 or 1; 1 requires TRITON_CACHE_DIR"},
    {"TRITON_CACHE_DIR", std::nullopt, "a directory on a file system all ranks share"},
    {"TRITON_PRINT_AUTOTUNING", std::nullopt, "1"},
    {"MAMBA_DETERMINISTIC", std::nullopt, "a value starting with 1"},
    {"CAUSAL_CONV1D_DETERMINISTIC", std::nullopt, "a value starting with 1"},
}};

// From the NCCL, cuBLAS, PyTorch and oneMKL documentation and NCCL's issue
// tracker: each changes which reduction order or kernel a run gets, without a
// value that is wrong in itself.
constexpr std::array<Advisory, 11> kAdvisories{{
    {"NCCL_PROTO",
     "the protocol (Simple, LL, LL128) NCCL moves data with; NCCL picks one per message size "
     "and topology unless pinned, and protocols split the data differently"},
    {"NCCL_MIN_NCHANNELS",
     "with NCCL_MAX_NCHANNELS, how many channels a collective's buffer is split over, which "
     "decides each element's place in the ring and so its reduction order"},
    {"NCCL_MAX_NCHANNELS", "see NCCL_MIN_NCHANNELS"},
    {"NCCL_NVLS_ENABLE",
     "0 turns off NVLink SHARP (NVLS), whose in-switch reductions NCCL's maintainers report "
     "differ from call to call (NVIDIA/nccl#1497); NCCL_ALGO=^NVLS is the other way"},
    {"NCCL_COLLNET_ENABLE", "1 lets the network (SHARP) do reductions, in the switch's order"},
    {"NCCL_TOPO_FILE",
     "a pinned topology pins the rings NCCL builds; without one, each start detects the "
     "topology afresh, and a different detection reorders the reduction"},
    {"CUBLASLT_WORKSPACE_SIZE",
     "the cuBLASLt workspace PyTorch gives each matmul (KiB); its size limits which algorithm "
     "cuBLASLt picks"},
    {"NVIDIA_TF32_OVERRIDE",
     "0 forbids TF32 in cuBLAS and cuDNN whatever the program asks: deterministic either way, "
     "but not the same numbers"},
    {"PYTHONHASHSEED",
     "string hashing in Python; a program whose order of work follows set or dict iteration "
     "over strings needs it fixed"},
    {"OMP_NUM_THREADS",
     "the CPU thread count, which splits CPU-side reductions (oneMKL reproduces results only "
     "with a fixed thread count)"},
    {"MKL_CBWR",
     "oneMKL's conditional numerical reproducibility: set (e.g. COMPATIBLE, or AUTO,STRICT) "
     "for results that do not depend on the CPU's code path"},
}};

constexpr std::array<std::string_view, 4> kFixedOrderAlgorithms{"Ring", "CollnetDirect",
                                                                "CollnetChain", "^NVLS"};

std::string prefix(std::string_view name, std::string_view value) {
  return std::string(name) + "=" + std::string(value) + (value.empty() ? " (empty)" : "") + ", ";
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

std::optional<std::string> check_nccl_algo(std::string_view value) {
  const std::string head = prefix("NCCL_ALGO", value);
  if (value.empty()) return head + "which leaves the choice to NCCL (it may pick Tree)";
  std::size_t begin = 0;
  while (begin <= value.size()) {
    std::size_t end = value.find(',', begin);
    if (end == std::string_view::npos) end = value.size();
    const std::string_view algorithm = value.substr(begin, end - begin);
    if (algorithm.empty()) return head + "which names an empty algorithm";
    // A list naming Tree lets NCCL pick it, so the list is as bad as Tree alone.
    if (equals_ignoring_case(algorithm, "Tree")) {
      return head + (algorithm.size() == value.size() ? "" : "which allows Tree, ") +
             "whose reduction order is not fixed (the chain order within a node is not "
             "controllable and the tree between nodes can change from run to run)";
    }
    if (std::ranges::find(kFixedOrderAlgorithms, algorithm) == kFixedOrderAlgorithms.end()) {
      return head + "which names " + std::string(algorithm) +
             ", not one of Ring, CollnetDirect, CollnetChain, ^NVLS (the algorithms whose "
             "reduction order is fixed)";
    }
    begin = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> check_single_value(std::string_view name, std::string_view value) {
  if (name == "NCCL_ALGO") return check_nccl_algo(value);
  if (name == "NVTE_ALLOW_NONDETERMINISTIC_ALGO") {
    if (value == "0") return std::nullopt;
    return prefix(name, value) +
           "which lets Transformer Engine choose non-deterministic algorithms (must be 0)";
  }
  if (name == "CUBLAS_WORKSPACE_CONFIG") {
    if (value == ":4096:8" || value == ":16:8") return std::nullopt;
    return prefix(name, value) +
           "which is not a deterministic cuBLAS workspace (:4096:8 or :16:8, which give each "
           "stream a fixed workspace)";
  }
  if (name == "TRITON_CACHE_AUTOTUNING") {
    if (value == "0" || value == "1") return std::nullopt;
    return prefix(name, value) + "which is not 0 or 1";
  }
  if (name == "TRITON_PRINT_AUTOTUNING") {
    if (value == "1") return std::nullopt;
    return prefix(name, value) + "which is not 1, the only value accepted (or leave it unset)";
  }
  if (name == "MAMBA_DETERMINISTIC" || name == "CAUSAL_CONV1D_DETERMINISTIC") {
    if (value.starts_with('1')) return std::nullopt;
    return prefix(name, value) +
           "which does not start with 1 and so asks for the non-deterministic kernels";
  }
  return std::nullopt;
}

// Triton falls back to a node-local cache without TRITON_CACHE_DIR, so nodes
// autotune separately and ranks may pick different kernels: the very case the
// shared cache is meant to prevent.
std::optional<std::string> check_with_environment(std::string_view name, std::string_view value,
                                                  const Environment& env) {
  if (name == "TRITON_CACHE_AUTOTUNING" && value == "1") {
    auto dir = env.find("TRITON_CACHE_DIR");
    if (dir == env.end() || dir->second.empty()) {
      return prefix(name, value) +
             "which requires TRITON_CACHE_DIR (without it each node autotunes into its own "
             "cache and ranks may pick different kernels)";
    }
  }
  return std::nullopt;
}

}  // namespace

std::span<const Rule> rules() { return kRules; }

std::span<const Advisory> advisories() { return kAdvisories; }

const Rule* find_rule(std::string_view name) {
  auto it = std::ranges::find(kRules, name, &Rule::name);
  return it == kRules.end() ? nullptr : &*it;
}

std::optional<std::string> why_not_deterministic(std::string_view name, std::string_view value) {
  return check_single_value(name, value);
}

std::optional<std::string> why_not_deterministic(std::string_view name, std::string_view value,
                                                 const Environment& env) {
  if (auto reason = check_single_value(name, value)) return reason;
  return check_with_environment(name, value, env);
}

std::vector<Check> validate(const Environment& env) {
  std::vector<Check> checks;
  for (const Rule& rule : kRules) {
    Check check;
    check.name = rule.name;
    if (auto it = env.find(check.name); it != env.end()) {
      check.value = it->second;
      if (auto reason = why_not_deterministic(rule.name, it->second, env)) {
        check.valid = false;
        check.reason = std::move(*reason);
      }
    } else if (rule.default_value) {
      check.value = std::string(*rule.default_value);
      check.defaulted = true;
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

bool all_valid(const std::vector<Check>& checks) {
  return std::ranges::all_of(checks, &Check::valid);
}

Applied apply(Environment& env) {
  Applied applied{validate(env), {}};
  if (!applied.ok()) return applied;
  for (const Check& check : applied.checks) {
    if (!check.defaulted) continue;
    env[check.name] = *check.value;
    applied.filled.push_back(check.name);
  }
  return applied;
}

Applied apply() {
  Applied applied{validate(process_environment()), {}};
  if (!applied.ok()) return applied;
  for (const Check& check : applied.checks) {
    if (!check.defaulted) continue;
    // overwrite = 0: a value set since validate() (another thread) is kept.
    if (::setenv(check.name.c_str(), check.value->c_str(), 0) == 0) {
      applied.filled.push_back(check.name);
    }
  }
  return applied;
}

Environment process_environment() {
  Environment env;
  auto read = [&env](std::string_view variable) {
    const std::string name(variable);
    if (const char* value = std::getenv(name.c_str())) env.emplace(name, value);
  };
  for (const Rule& rule : kRules) read(rule.name);
  for (const Advisory& advisory : kAdvisories) read(advisory.name);
  return env;
}

std::vector<std::pair<std::string, std::string>> header_env(const std::vector<Check>& checks) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const Check& check : checks) {
    if (check.value) env.emplace_back(check.name, *check.value);
  }
  return env;
}

}  // namespace dtrace::determinism
