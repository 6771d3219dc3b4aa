#include "config.hpp"

#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint.hpp"

namespace minitrain {

namespace fs = std::filesystem;

void validate(const Config& c, bool replaying) {
  const ModelShape& s = c.shape;
  auto positive = [](const char* flag, std::int64_t v) {
    if (v < 1)
      throw Error(std::string(flag) + " must be at least 1 (got " + std::to_string(v) + ")");
  };
  positive("--d-model", s.d_model);
  positive("--layers", s.n_layer);
  positive("--heads", s.n_head);
  positive("--seq", s.seq);
  positive("--batch", s.batch);
  positive("--ranks", c.ranks);
  if (s.d_model % s.n_head != 0) {
    throw Error("--d-model " + std::to_string(s.d_model) + " is not a multiple of --heads " +
                std::to_string(s.n_head));
  }
  if (!(s.dropout >= 0.0f && s.dropout < 1.0f)) throw Error("--dropout must be in [0, 1)");
  if (c.ranks > 64) throw Error("--ranks at most 64 (ranks are threads)");
  if (c.backend != "cpu" && c.backend != "cuda") {
    throw Error("--backend " + c.backend + ": not cpu or cuda");
  }
  // Before the launcher starts any process.
  if (c.backend == "cuda" && !cuda_backend_built()) {
    throw Error("--backend cuda: minitrain was built without CUDA (meson setup -Dcuda=enabled)");
  }
  if (c.backend != "cuda" && c.process_rank >= 0) {
    throw Error("MINITRAIN_RANK is for --backend cuda processes only");
  }
  if (c.steps < 0) throw Error("--steps must not be negative");
  if (c.checkpoint_every < 0) throw Error("--checkpoint-every must not be negative");
  if (c.checkpoint_every > 0 && c.checkpoint_dir.empty()) {
    throw Error("--checkpoint-every needs --checkpoint-dir");
  }
  if (c.resume && c.checkpoint_dir.empty()) throw Error("--resume needs --checkpoint-dir");
  if (c.resume_step && !c.resume) throw Error("--resume-step needs --resume");
  if (c.flip_bit && (c.flip_bit->rank < 0 || c.flip_bit->rank >= c.ranks || c.flip_bit->step < 0)) {
    throw Error("--flip-bit " + std::to_string(c.flip_bit->rank) + ":" + std::to_string(c.flip_bit->step) +
                ": the rank must be below --ranks and the step not negative");
  }
  if (c.step_delay_ms < 0) throw Error("--step-delay-ms must not be negative");
  if (!c.replay_fault.empty() && c.replay_fault != "carry-state" && c.replay_fault != "kernel-restore") {
    throw Error("--replay-fault " + c.replay_fault + ": expected carry-state or kernel-restore");
  }
  if (!(c.startup_delay >= 0.0 && c.startup_delay <= 3600.0)) {
    throw Error("--startup-delay must be between 0 and 3600 seconds");
  }
  if (c.planted.has(Planted::allreduce_arrival) && c.ranks < 3) {
    throw Error("--nondet allreduce-arrival needs --ranks 3 or more (two-term sums commute)");
  }
  if (!replaying && c.out.empty()) throw Error("--out DIR is required");
  if (c.stop_at) {
    if (c.checkpoint_dir.empty()) {
      throw Error(
          "DTRACE_STOP_AT needs a checkpoint directory (--checkpoint-dir or "
          "DTRACE_CHECKPOINT_DIR) for the checkpoint it stops with");
    }
    if (*c.stop_at >= c.steps) {
      throw Error("DTRACE_STOP_AT=" + std::to_string(*c.stop_at) + ": the run has only " +
                  std::to_string(c.steps) + " steps (--steps); stop before the last");
    }
  }
}

void apply_workflow_request(Config& c, const dtrace::ReplayRequest& request) {
  if (request.run_dir) c.out = *request.run_dir;
  if (request.checkpoint_dir) c.checkpoint_dir = *request.checkpoint_dir;
  if (request.resume_at) {
    c.resume = true;
    c.resume_step = *request.resume_at;
  }
  c.stop_at = request.stop_at;
  if (request.deterministic) c.fast_kernels = !*request.deterministic;
}

std::string config_json(const Config& c) {
  nlohmann::ordered_json j;
  j["workload"] = "minitrain";
  j["vocab"] = c.shape.vocab;
  j["d_model"] = c.shape.d_model;
  j["layers"] = c.shape.n_layer;
  j["heads"] = c.shape.n_head;
  j["seq"] = c.shape.seq;
  j["batch"] = c.shape.batch;
  j["dropout"] = c.shape.dropout;
  j["lr"] = c.adamw.lr;
  j["ranks"] = c.ranks;
  j["steps"] = c.steps;
  j["seed"] = c.seed;
  j["checkpoint_every"] = c.checkpoint_every;
  j["resume"] = c.resume;
  if (c.resume_step) j["resume_step"] = *c.resume_step;
  j["nondet"] = c.planted.names();  // as --nondet takes it: "splitk", "splitk,atomic-bias-grad"
  if (c.chaos_seed) j["chaos_seed"] = *c.chaos_seed;
  j["deterministic_mode"] = c.deterministic_mode;
  if (c.fast_kernels) j["fast_kernels"] = true;
  if (c.backend != "cpu") j["backend"] = c.backend;
  if (c.stop_at) j["stop_at"] = *c.stop_at;
  if (c.flip_bit) j["flip_bit"] = std::to_string(c.flip_bit->rank) + ":" + std::to_string(c.flip_bit->step);
  if (!c.replay_fault.empty()) j["replay_fault"] = c.replay_fault;
  j["corpus"] = fs::path(c.corpus).filename().string();
  return j.dump();
}

std::vector<std::string> replay_argv(const Config& c, const std::string& executable) {
  auto abs = [](const std::string& p) {
    return p.empty() ? p : fs::absolute(p).lexically_normal().string();
  };
  auto num = [](auto v) { return std::to_string(v); };
  auto real = [](float v) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, v).ptr;  // shortest exact spelling
    return std::string(text, end);
  };
  std::vector<std::string> argv = {
      executable,
      "--steps",
      num(c.steps),
      "--ranks",
      num(c.ranks),
      "--level",
      std::string(dtrace::level_name(c.level)),
      "--seed",
      num(c.seed),
      "--corpus",
      abs(c.corpus),
      "--d-model",
      num(c.shape.d_model),
      "--layers",
      num(c.shape.n_layer),
      "--heads",
      num(c.shape.n_head),
      "--seq",
      num(c.shape.seq),
      "--batch",
      num(c.shape.batch),
      "--dropout",
      real(c.shape.dropout),
      "--lr",
      real(c.adamw.lr),
  };
  if (!c.out.empty()) argv.insert(argv.end(), {"--out", abs(c.out)});
  if (!c.checkpoint_dir.empty())
    argv.insert(argv.end(), {"--checkpoint-dir", abs(c.checkpoint_dir)});
  if (c.checkpoint_every > 0)
    argv.insert(argv.end(), {"--checkpoint-every", num(c.checkpoint_every)});
  if (c.resume) {
    argv.push_back("--resume");
    if (c.resume_step) argv.insert(argv.end(), {"--resume-step", num(*c.resume_step)});
  }
  if (!c.planted.empty()) argv.insert(argv.end(), {"--nondet", c.planted.names()});
  if (c.chaos_seed) argv.insert(argv.end(), {"--chaos-seed", num(*c.chaos_seed)});
  argv.push_back(c.deterministic_mode ? "--deterministic-mode" : "--no-deterministic-mode");
  if (c.fast_kernels) argv.push_back("--fast-kernels");
  if (c.backend != "cpu") argv.insert(argv.end(), {"--backend", c.backend});
  if (c.flip_bit) {
    argv.insert(argv.end(), {"--flip-bit", num(c.flip_bit->rank) + ":" + num(c.flip_bit->step)});
  }
  if (!c.replay_fault.empty()) argv.insert(argv.end(), {"--replay-fault", c.replay_fault});
  if (c.startup_delay > 0.0) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, c.startup_delay).ptr;
    argv.insert(argv.end(), {"--startup-delay", std::string(text, end)});
  }
  return argv;
}

}  // namespace minitrain
