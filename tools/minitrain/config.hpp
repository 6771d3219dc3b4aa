// A minitrain run's configuration: what the command line says, how it is
// checked, and how it is written back out -- as the header's "config" object
// and as the replay argv (DESIGN.md §5) that reruns exactly this configuration.
#pragma once

#include <cstdint>
#include <dtrace/recorder.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "model.hpp"

namespace minitrain {

struct Config {
  ModelShape shape;
  kernels::AdamW adamw;
  std::int64_t steps = 200;
  int ranks = 1;
  dtrace::Level level = dtrace::Level::step;
  std::string out;
  std::uint64_t seed = 1;
  std::int64_t checkpoint_every = 0;  // 0: no checkpoints
  std::string checkpoint_dir;
  bool resume = false;
  std::optional<std::int64_t> resume_step;  // resume from this checkpoint, not the newest
  Planted planted = Planted::none;
  std::optional<std::uint64_t> chaos_seed;
  std::string corpus;
  bool deterministic_mode = true;
};

// Throws Error when flags contradict each other or the model cannot be built.
// `replaying`: started under DTRACE_REPLAY_STEP or DTRACE_ISOLATE (no --out needed).
void validate(const Config& config, bool replaying);

// The header's "config" object, as JSON text.
std::string config_json(const Config& config);

// The argv that reruns this configuration: this executable, every setting
// spelled out, paths made absolute, and for a resumed run the checkpoint it
// resumed from (--resume-step), so a replay restores the way the run did.
std::vector<std::string> replay_argv(const Config& config, const std::string& executable);

}  // namespace minitrain
