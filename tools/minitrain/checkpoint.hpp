// Checkpoints: everything a step needs to continue bitwise-identically --
// parameters, Adam moments and step count, every rank's dropout RNG state, the
// data position and the step to run next -- in one binary file per step,
// ckpt-<step>.bin, written atomically (a temporary file, then rename) and
// closed with an XXH3 checksum so a torn or corrupt file is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "chaos.hpp"
#include "model.hpp"

namespace minitrain {

// A problem the user must fix (bad flag, file, checkpoint): minitrain exits 2.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainState {
  std::int64_t step = 0;  // the next step to run
  std::vector<float> params, adam_m, adam_v;
  std::int64_t adam_step = 0;
  std::int64_t data_position = 0;  // sequences consumed so far, all ranks together
  std::vector<Xoshiro> rngs;       // per rank
};

std::string checkpoint_path(const std::string& dir, std::int64_t step);
void write_checkpoint(const std::string& dir, const ModelShape& shape, const TrainState& state);
// Throws Error naming the file when it is unreadable, corrupt, or made for
// another model shape or world size.
TrainState read_checkpoint(const std::string& path, const ModelShape& shape, int world_size);
// The step of the newest checkpoint in dir at or before max_step (any when
// max_step is nullopt); nullopt when there is none or the directory is missing.
std::optional<std::int64_t> newest_checkpoint(const std::string& dir,
                                              std::optional<std::int64_t> max_step);

}  // namespace minitrain
