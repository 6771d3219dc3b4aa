// The launcher of data parallelism across processes: `minitrain --backend cuda
// --ranks R` starts R copies of itself, one rank and one GPU each (rank r on
// device r), with MINITRAIN_RANK=r and MINITRAIN_BOOTSTRAP=DIR (a fresh
// temporary directory where rank 0 leaves the NCCL unique id for the others),
// waits for them, and removes DIR. No MPI. When one rank fails the others are
// stopped (they would wait in NCCL forever) and the launcher exits 2.
#pragma once

#include <string>

#include "config.hpp"

namespace minitrain {

// Runs the job; returns the exit status (0, or 2 when a rank failed).
// `executable` is this program (re-executed with `argv`).
int launch_processes(const Config& config, const std::string& executable, char** argv);

// MINITRAIN_RANK / MINITRAIN_BOOTSTRAP into the configuration (a launched
// process); throws Error for a malformed value.
void apply_process_environment(Config& config);

}  // namespace minitrain
