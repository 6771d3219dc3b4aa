// The launcher of data parallelism across processes: `minitrain --backend cuda
// --ranks R` starts R copies of itself, one rank and one GPU each (rank r on
// device r), with MINITRAIN_RANK=r and MINITRAIN_BOOTSTRAP=DIR (a fresh
// temporary directory where rank 0 leaves the NCCL unique id for the others),
// waits for them, and removes DIR. No MPI. When one rank fails the others are
// stopped (they would wait in NCCL forever) and the launcher exits 2.
//
// Under the replay protocol the job still answers as one workload: each
// process writes DTRACE_OUT and DTRACE_CAPTURE into DIR, and the launcher
// merges them into the requested file and directory afterwards (one header,
// each rank's lines in order); DTRACE_INPUTS is read by every process as is.
// An isolated target that no process found exits 2, as one process would.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config.hpp"

namespace minitrain {

// A process of the job whose rank ran nothing under DTRACE_ISOLATE (another
// rank may have): not an error unless every rank says so.
inline constexpr int kExitNothingIsolated = 3;

// Merges the rank logs `parts` (each a dtrace-fp/1 file with its header) into
// `out`: the first part's header, then every part's records in order.
void merge_logs(const std::vector<std::string>& parts, const std::string& out);
// Merges capture directories into `out` (created): their files moved, their
// capture.jsonl indexes merged as merge_logs does.
void merge_captures(const std::vector<std::string>& parts, const std::string& out);

// Runs the job; returns the exit status (0, or 2 when a rank failed: it said
// why on stderr). `executable` is this program (re-executed with `argv`).
// Throws Error for trouble of its own (an existing --out or DTRACE_OUT, an
// isolated target no rank ran).
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
