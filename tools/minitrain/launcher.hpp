// The launcher of data parallelism across processes: `minitrain --backend cuda
// --ranks R` starts R copies of itself, one rank and one GPU each (rank r on
// device r), with MINITRAIN_RANK=r and MINITRAIN_BOOTSTRAP=DIR (a fresh
// temporary directory where rank 0 leaves the NCCL unique id for the others),
// waits for them, and removes DIR. No MPI. When one rank fails the others are
// stopped (they would wait in NCCL forever) and the launcher exits 2.
#pragma once

#include <cstddef>
#include <string>

#include "config.hpp"

namespace minitrain {

// Runs the job; returns the exit status (0, or 2 when a rank failed).
// `executable` is this program (re-executed with `argv`).
int launch_processes(const Config& config, const std::string& executable, char** argv);

// The bootstrap file: rank 0 publishes the communicator's unique id (opaque
// bytes) in DIR/nccl-id whole (a temporary file, then rename); the other ranks
// wait for it, polling, up to `timeout_ms`. Throw Error on failure or timeout.
void publish_unique_id(const std::string& dir, const void* id, std::size_t bytes);
void await_unique_id(const std::string& dir, void* id, std::size_t bytes, int rank, int timeout_ms);

// MINITRAIN_RANK / MINITRAIN_BOOTSTRAP into the configuration (a launched
// process); throws Error for a malformed value.
void apply_process_environment(Config& config);

}  // namespace minitrain
