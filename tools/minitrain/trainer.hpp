// The training loop of minitrain: ranks as threads, each with its own Recorder,
// model copy and dropout RNG; the step (state records, forward, backward,
// gradient all-reduce, AdamW, metrics); checkpoints; and the three ways a run
// starts -- a fresh or resumed training run, a replay of one step
// (DTRACE_REPLAY_STEP: restore, fast-forward unrecorded, record that step), or
// an isolated layer or op (DTRACE_ISOLATE: run it alone from captured inputs).
#pragma once

#include <cstdint>
#include <dtrace/recorder.hpp>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.hpp"
#include "config.hpp"

namespace minitrain {

struct RunResult {
  enum class Mode { train, replay_step, isolate };
  Mode mode = Mode::train;
  std::int64_t first_step = 0;  // steps run: [first_step, end_step)
  std::int64_t end_step = 0;
  std::vector<double> mean_loss;  // per step run, the mean over ranks
  int isolated_runs = 0;          // repetitions run, all ranks together
  // Rank 0's mean wall time per recorded step, and the part of it spent
  // recording (handing records over, fingerprinting, flushing): the cost of
  // recording, measured in the same run.
  double step_seconds = 0.0;
  double record_seconds = 0.0;
  std::int64_t tokens_per_step = 0;  // all ranks together
};

// A replay session's state at the start of its step (dtrace-fp(5), "Replay
// sessions"), one per rank: the first step replay restores it as a launch does
// (checkpoint, fast-forward) and keeps it here; every later step replay starts
// from it, so that nothing a request changed (an optimizer step, dropout
// draws) reaches the next. Isolations neither read nor change it: each builds
// its model afresh and loads the captured inputs into it.
struct KeptState {
  std::vector<TrainState> ranks;  // by rank (each holds its own RNG as rngs[0]); empty: none yet
};

// Runs the configuration. `env` goes into every header. Throws Error (or
// dtrace::RecorderError) for anything the user must fix.
// In a session (`kept` given) a step replay either restores and keeps the
// state (`first_step_request`) or starts from what was kept.
RunResult run(const Config& config, const std::string& executable,
              const dtrace::ReplayRequest& request,
              const std::vector<std::pair<std::string, std::string>>& env,
              KeptState* kept = nullptr, bool first_step_request = false);

// The sequences each step reads: rank r's b-th sequence at data position p
// starts at a pseudo-random offset of the corpus picked by (p + r*B + b).
void fill_batch(const std::string& corpus, const ModelShape& shape, int rank,
                std::int64_t data_position, Tokens& inputs, Tokens& targets);

}  // namespace minitrain
