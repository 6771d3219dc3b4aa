// minitrain: the reference training workload of dtrace. See README.md.
//
// Exit status: 0 done, 2 trouble (bad flags, missing corpus, unreadable or
// corrupt checkpoint, an existing run directory, a bad DTRACE_* variable).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <dtrace/determinism.hpp>
#include <dtrace/recorder.hpp>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>
#include <nlohmann/json.hpp>

#include "checkpoint.hpp"
#include "config.hpp"
#include "launcher.hpp"
#include "trainer.hpp"

#ifndef MINITRAIN_DEFAULT_CORPUS
#define MINITRAIN_DEFAULT_CORPUS "testdata/corpus.txt"
#endif

namespace {

constexpr int kExitTrouble = 2;

std::string executable_path(const char* argv0) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) return self.string();
  return std::filesystem::absolute(argv0).string();
}

// The ground truth of `--print-planted` (never logged): the first plant a
// step meets, as a single plant's output always said it ({"op","scope"} and,
// for an op called more than once, {"occurrence","calls"}; resume-rng:
// {"state"}), and "plants": every plant, each with its --nondet name, in the
// order its site runs in a step (the order bisect names them).
std::string planted_json(const minitrain::Plants& plants, const minitrain::ModelShape& shape) {
  auto site_json = [&](minitrain::Planted planted) {
    nlohmann::ordered_json j;
    if (planted == minitrain::Planted::resume_rng) {
      j["state"] = minitrain::kRngStateName;
    } else {
      const auto site = minitrain::planted_site(planted, shape);
      j["op"] = site.op;
      j["scope"] = site.scope;
      if (site.calls > 1) {
        j["occurrence"] = site.occurrence;
        j["calls"] = site.calls;
      }
    }
    return j;
  };
  const auto ordered = plants.in_step_order();
  nlohmann::ordered_json j = site_json(ordered.front());
  j["plants"] = nlohmann::ordered_json::array();
  for (minitrain::Planted planted : ordered) {
    nlohmann::ordered_json one;
    one["nondet"] = minitrain::planted_name(planted);
    one.update(site_json(planted));
    j["plants"].push_back(one);
  }
  return j.dump();
}

// Every plant's name, for --help.
std::string planted_list() {
  std::string all;
  for (auto name : minitrain::planted_names()) all += (all.empty() ? "" : ", ") + std::string(name);
  return all;
}

// The deterministic environment (dtrace(1), env): applied and recorded with
// --deterministic-mode, only recorded without it.
std::vector<std::pair<std::string, std::string>> environment(bool deterministic_mode) {
  if (!deterministic_mode) {
    // Only what is set: an unset variable's default is not in force here.
    std::vector<std::pair<std::string, std::string>> env;
    for (const auto& check :
         dtrace::determinism::validate(dtrace::determinism::process_environment())) {
      if (check.value && !check.defaulted) env.emplace_back(check.name, *check.value);
    }
    return env;
  }
  const auto applied = dtrace::determinism::apply();
  if (!applied.ok()) {
    std::string why;
    for (const auto& check : applied.checks) {
      if (!check.valid) why += "\n  " + check.reason;
    }
    throw minitrain::Error("--deterministic-mode: the environment is not deterministic:" + why);
  }
  return dtrace::determinism::header_env(applied.checks);
}

void print_summary(const minitrain::RunResult& result, const minitrain::Config& config) {
  using Mode = minitrain::RunResult::Mode;
  if (result.mode == Mode::isolate) {
    std::printf("minitrain: isolated run: %d repetitions (all ranks)\n", result.isolated_runs);
    return;
  }
  if (result.mean_loss.empty()) return;
  std::printf("minitrain: steps %lld..%lld, loss %.4f -> %.4f%s%s\n",
              static_cast<long long>(result.first_step),
              static_cast<long long>(result.end_step - 1), result.mean_loss.front(),
              result.mean_loss.back(), result.mode == Mode::train ? ", run " : " (replay)",
              result.mode == Mode::train ? config.out.c_str() : "");
  if (result.step_seconds > 0.0) {
    const double bare = result.step_seconds - result.record_seconds;
    const double tokens = static_cast<double>(result.tokens_per_step);
    std::printf(
        "minitrain: %s level: step %.2f ms, %.0f tokens/s; recording %.3f ms (%.2f%%); "
        "without it %.2f ms, %.0f tokens/s\n",
        std::string(dtrace::level_name(config.level)).c_str(), 1e3 * result.step_seconds,
        tokens / result.step_seconds, 1e3 * result.record_seconds,
        100.0 * result.record_seconds / result.step_seconds, 1e3 * bare, tokens / bare);
  }
}

}  // namespace

int main(int argc, char** argv) {
  minitrain::Config config;
  config.corpus = MINITRAIN_DEFAULT_CORPUS;
  std::string level = "step";
  std::string nondet = "none";
  std::string print_planted;
  std::int64_t resume_step = -1;
  std::uint64_t chaos_seed = 0;
  std::string flip_bit;

  CLI::App app{"minitrain: a small GPT trained on the CPU, traced with dtrace"};
  app.add_option("--steps", config.steps,
                 "optimizer steps in all (a resumed run continues to this)")
      ->capture_default_str();
  app.add_option("--ranks", config.ranks, "data-parallel ranks (threads)")->capture_default_str();
  app.add_option("--level", level, "recording level")
      ->check(CLI::IsMember({"step", "layer", "kernel"}))
      ->capture_default_str();
  app.add_option("--out", config.out, "run directory to create (one rank<r>.jsonl per rank)");
  app.add_option("--seed", config.seed, "initialization, dropout and data seed")
      ->capture_default_str();
  app.add_option("--checkpoint-every", config.checkpoint_every, "write a checkpoint every K steps")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", config.checkpoint_dir,
                 "where checkpoints are written and read");
  app.add_flag("--resume", config.resume,
               "continue from the newest checkpoint in --checkpoint-dir");
  auto* resume_step_opt = app.add_option("--resume-step", resume_step,
                                         "with --resume: the checkpoint step to resume from");
  app.add_option("--nondet", nondet,
                 "plant nondeterminism: a NAME, several separated by commas (several causes at\n"
                 "once: splitk,atomic-bias-grad in two layers; splitk-fc1,splitk in one layer,\n"
                 "the first feeding the second), or none.\nNAME: " +
                     planted_list())
      ->capture_default_str();
  auto* chaos_opt =
      app.add_option("--chaos-seed", chaos_seed,
                     "pin the source planted nondeterminism draws from (default: fresh each run)");
  app.add_option("--print-planted", print_planted,
                 "print the op and scope (or state) a --nondet value plants, as JSON, and exit\n"
                 "(several names: the first the step meets, and every one in \"plants\")");
  app.add_option("--flip-bit", flip_bit,
                 "RANK:STEP: flip one bit of RANK's first parameter at the start of STEP\n"
                 "(a planted silent data corruption, for dtrace replicas)");
  app.add_option("--replay-fault", config.replay_fault,
                 "plant a replay that does not start where the run started: carry-state (a session's later "
                 "requests start where the previous one ended) or kernel-restore (a kernel-level step replay "
                 "restores one parameter bit otherwise)");
  app.add_option("--step-delay-ms", config.step_delay_ms, "sleep this long after each step")
      ->capture_default_str();
  app.add_option("--startup-delay", config.startup_delay,
                 "sleep this many seconds as the process starts (a stand-in for a large\n"
                 "checkpoint read and process-group set-up; replays pay it too)")
      ->capture_default_str();
  app.add_option("--corpus", config.corpus, "training text")->capture_default_str();
  app.add_option("--d-model", config.shape.d_model, "model width")->capture_default_str();
  app.add_option("--layers", config.shape.n_layer, "transformer blocks")->capture_default_str();
  app.add_option("--heads", config.shape.n_head, "attention heads")->capture_default_str();
  app.add_option("--seq", config.shape.seq, "sequence length")->capture_default_str();
  app.add_option("--batch", config.shape.batch, "sequences per rank per step")
      ->capture_default_str();
  app.add_option("--dropout", config.shape.dropout, "dropout probability")->capture_default_str();
  app.add_option("--lr", config.adamw.lr, "AdamW learning rate")->capture_default_str();
  app.add_flag("--deterministic-mode,!--no-deterministic-mode", config.deterministic_mode,
               "apply and record the deterministic environment (default on)");
  app.add_option("--backend", config.backend,
                 "where tensors live and ops run: cpu, or cuda (one GPU, a CUDA build)")
      ->capture_default_str();
  app.add_flag("--fast-kernels", config.fast_kernels,
               "unordered split-K and bias-gradient kernels in every layer (not deterministic)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitTrouble;
  }

  try {
    config.level = *dtrace::parse_level(level);
    config.planted = minitrain::Plants::parse(nondet);
    if (*resume_step_opt) config.resume_step = resume_step;
    if (*chaos_opt) config.chaos_seed = chaos_seed;
    if (!flip_bit.empty()) {
      const auto colon = flip_bit.find(':');
      try {
        std::size_t used_rank = 0, used_step = 0;
        if (colon == std::string::npos) throw std::invalid_argument("no colon");
        const int rank = std::stoi(flip_bit.substr(0, colon), &used_rank);
        const std::int64_t step = std::stoll(flip_bit.substr(colon + 1), &used_step);
        if (used_rank != colon || used_step != flip_bit.size() - colon - 1) throw std::invalid_argument("junk");
        config.flip_bit = minitrain::Config::FlipBit{rank, step};
      } catch (const std::logic_error&) {
        throw minitrain::Error("--flip-bit " + flip_bit + ": expected RANK:STEP, e.g. 1:5");
      }
    }
    if (!print_planted.empty()) {
      const auto plants = minitrain::Plants::parse(print_planted, "--print-planted");
      if (plants.empty()) throw minitrain::Error("--print-planted: none plants nothing");
      std::printf("%s\n", planted_json(plants, config.shape).c_str());
      return 0;
    }
    const auto request = dtrace::ReplayRequest::from_environment();
    minitrain::apply_workflow_request(config, request);
    minitrain::apply_process_environment(config);
    minitrain::validate(config, request.is_replay());
    if (config.backend == "cuda" && config.ranks > 1 && config.process_rank < 0) {
      return minitrain::launch_processes(config, executable_path(argv[0]), argv, request);
    }
    if (config.startup_delay > 0.0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(config.startup_delay));
    }
    const auto env = environment(config.deterministic_mode);
    // A replay session (dtrace-fp(5), "Replay sessions"): this process serves
    // dtrace's requests one after another, each as a launch with its
    // variables would, the state at the start of the step kept in memory.
    std::vector<int> ranks;
    for (int r = 0; r < config.ranks; ++r) {
      if (config.process_rank < 0 || r == config.process_rank) ranks.push_back(r);
    }
    if (auto session = dtrace::ReplaySession::from_environment(ranks)) {
      minitrain::KeptState kept;
      while (auto served = session->next()) {
        minitrain::Config for_request = config;
        minitrain::apply_workflow_request(for_request, *served);
        const auto result = minitrain::run(for_request, executable_path(argv[0]), *served, env,
                                           &kept, session->first_step_request());
        if (config.process_rank >= 0 && result.mode == minitrain::RunResult::Mode::isolate &&
            result.isolated_runs == 0) {
          return minitrain::kExitNothingIsolated;
        }
        session->done();
      }
      return 0;
    }
    const auto result = minitrain::run(config, executable_path(argv[0]), request, env);
    if (config.process_rank >= 0 && result.mode == minitrain::RunResult::Mode::isolate &&
        result.isolated_runs == 0) {
      return minitrain::kExitNothingIsolated;
    }
    if (config.process_rank <= 0) print_summary(result, config);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minitrain: error: %s\n", e.what());
    return kExitTrouble;
  }
}
