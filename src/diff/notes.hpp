// Small vocabulary shared by the commands that compare runs step by step
// (diff, watch, replicas): level order and the wording of rank and step notes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/intervals.hpp"

namespace dtrace::diff {

// A level's place in the order step < layer < kernel (man/dtrace-fp.5, level);
// nullopt for a level this dtrace does not know, or none.
std::optional<int> level_order(std::string_view level);

// "rank 3" or "ranks 0-3,7".
std::string rank_list(const std::vector<std::int32_t>& ranks);

// "steps 0-4 only in run A (ranks 0-3)", grouping ranks that share a step set.
void note_step_sets(std::vector<std::string>& notes, const std::map<std::int32_t, IntervalSet>& sets,
                    const std::string& what);

}  // namespace dtrace::diff
