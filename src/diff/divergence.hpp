// The run's first divergence from each rank's first mismatch: the one place
// that settles roles across ranks and orders divergences (dtrace(1), diff).
// The streaming diff, the searched diff and watch each find ranks' first
// mismatches their own way and hand them here, so they cannot answer
// differently about which rank diverged first.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "diff/diff.hpp"

namespace dtrace::diff {

// A rank's first mismatch and the collective it happened at
// (Classification::collective, empty for other ops).
struct RankFirst {
  Mismatch mismatch;
  std::string collective;
};

struct Divergence {
  std::vector<Mismatch> ranks;   // every rank's first mismatch, in rank order, roles settled
  std::optional<Mismatch> first;  // the run's first divergence
};

// - A first mismatch at a collective becomes a receiver when another rank's
//   input to that collective invocation differs at that step
//   (`collective_inputs_differing`: step -> collective keys, compare_step's):
//   the collective passed on someone else's divergence.
// - The first divergence is the least (step, role, rank), roles ordered
//   origin, unknown, receiver: at one step a rank that introduced the
//   difference is named before one that only received it.
// Where a role ranks among first mismatches at one step: 0 origin, 1 unknown,
// 2 receiver (smaller first).
int role_precedence(Role role);

Divergence first_divergence(const std::map<std::int32_t, RankFirst>& firsts,
                            const std::map<std::int64_t, std::set<std::string>>& collective_inputs_differing);

}  // namespace dtrace::diff
