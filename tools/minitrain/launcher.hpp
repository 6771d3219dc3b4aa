// The launcher of data parallelism across processes: `minitrain --backend cuda
// --ranks R` starts R copies of itself, one rank and one GPU each (rank r on
// device r), with MINITRAIN_RANK=r and MINITRAIN_BOOTSTRAP=DIR (a fresh
// temporary directory where rank 0 leaves the NCCL unique id for the others),
// waits for them, and removes DIR. No MPI. When one rank fails the others are
// stopped (they would wait in NCCL forever) and the launcher exits 2.
//
// Under the replay protocol each process answers for its own rank
// (dtrace-replay/1.1, man/dtrace-fp.5): its recorder writes
// DTRACE_OUT_DIR/rank<r>.jsonl, rank<r>.status and capture.rank<r>.jsonl in
// DTRACE_CAPTURE, and the launcher sends the process's stderr to
// DTRACE_OUT_DIR/rank<r>.stderr; nothing is merged. A 1.0 replay (DTRACE_OUT
// without DTRACE_OUT_DIR) is refused. An isolated target that no process found
// exits 2, as one process would.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config.hpp"

namespace minitrain {

// A process of the job whose rank ran nothing under DTRACE_ISOLATE (another
// rank may have): not an error unless every rank says so.
inline constexpr int kExitNothingIsolated = 3;

// Runs the job; returns the exit status (0, or 2 when a rank failed: it said
// why on stderr). `executable` is this program (re-executed with `argv`).
// Throws Error for trouble of its own (an existing --out, a replay without
// DTRACE_OUT_DIR, an isolated target no rank ran).
int launch_processes(const Config& config, const std::string& executable, char** argv,
                     const dtrace::ReplayRequest& request);

// The bootstrap file: rank 0 publishes the communicator's unique id (opaque
// bytes) in DIR/nccl-id whole (a temporary file, then rename); the other ranks
// wait for it, polling, up to `timeout_ms`. Throw Error on failure or timeout.
void publish_unique_id(const std::string& dir, const void* id, std::size_t bytes);
void await_unique_id(const std::string& dir, void* id, std::size_t bytes, int rank, int timeout_ms);

// MINITRAIN_RANK / MINITRAIN_BOOTSTRAP into the configuration (a launched
// process); throws Error for a malformed value.
void apply_process_environment(Config& config);

}  // namespace minitrain
