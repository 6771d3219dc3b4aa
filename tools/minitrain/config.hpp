// A minitrain run's configuration: what the command line says, how it is
// checked, and how it is written back out -- as the header's "config" object
// and as the replay argv (dtrace-fp(5), REPLAY PROTOCOL) that reruns exactly this configuration.
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
  Plants planted;  // --nondet: none, one or several
  std::optional<std::uint64_t> chaos_seed;
  std::string corpus;
  bool deterministic_mode = true;
  // Fast kernels: the unordered split-K GEMM and atomic-style bias gradients in
  // every layer (the planted splitk and atomic-bias-grad kernels everywhere),
  // the mode `dtrace tax` compares against (DTRACE_DETERMINISTIC=0).
  bool fast_kernels = false;
  // "cpu" or "cuda" (--backend): where tensors live and ops run.
  std::string backend = "cpu";
  // Data parallelism across processes (--backend cuda --ranks R > 1): this
  // process runs rank `process_rank` only, joining the others through the
  // NCCL unique id in `bootstrap_dir`. -1: every rank here, as threads. Set by
  // the launcher (launcher.hpp) through MINITRAIN_RANK and MINITRAIN_BOOTSTRAP,
  // never by flags, so headers and replay argv are those of the whole job.
  int process_rank = -1;
  std::string bootstrap_dir;
  // DTRACE_STOP_AT=K: run the steps before K, checkpoint the start of step K, stop.
  std::optional<std::int64_t> stop_at;
  // --flip-bit RANK:STEP: a silent data corruption planted on purpose. At the
  // start of STEP, before its state is recorded, rank RANK's first parameter
  // element has one bit flipped (bit 20, in the mantissa), so that rank's
  // parameters depart from its replicas' from STEP on (dtrace replicas).
  struct FlipBit {
    int rank = 0;
    std::int64_t step = 0;
  };
  std::optional<FlipBit> flip_bit;
  // --step-delay-ms: sleep this long after each step (a slower job, for
  // watching a run while it is written); 0: none.
  std::int64_t step_delay_ms = 0;
  // --startup-delay: sleep this long (seconds) once as the process starts, a
  // stand-in for what a cluster job pays before its first step (a large
  // checkpoint read, process-group set-up). In the replay argv, so replays pay
  // it too: what replay sessions save (tools/bench/bisect.sh).
  double startup_delay = 0.0;
  // --replay-fault: a replay that does not start where the run started,
  // planted on purpose to test dtrace's hold on replays (man/dtrace.1,
  // restore check). "carry-state": a replay session's later requests start
  // from the state the previous request ended with, not from the step's
  // start; "kernel-restore": a step replay at kernel level restores the
  // first parameter element with its lowest bit flipped. "" none.
  std::string replay_fault;
};

// dtrace's workflow variables (man/dtrace.1: verify, tax) turned into the
// configuration they stand for, so the header's config and replay argv say
// what actually ran: DTRACE_RUN_DIR is --out, DTRACE_CHECKPOINT_DIR is
// --checkpoint-dir, DTRACE_RESUME_AT=K is --resume --resume-step K,
// DTRACE_DETERMINISTIC=0 is --fast-kernels (1 turns them off).
void apply_workflow_request(Config& config, const dtrace::ReplayRequest& request);

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
