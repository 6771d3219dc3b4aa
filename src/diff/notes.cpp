#include "diff/notes.hpp"

namespace dtrace::diff {

std::optional<int> level_order(std::string_view level) {
  if (level == "step") return 0;
  if (level == "layer") return 1;
  if (level == "kernel") return 2;
  return std::nullopt;
}

std::string rank_list(const std::vector<std::int32_t>& ranks) {
  IntervalSet set;
  for (auto r : ranks) set.insert(r);
  return (ranks.size() == 1 ? "rank " : "ranks ") + set.to_string();
}

void note_step_sets(std::vector<std::string>& notes, const std::map<std::int32_t, IntervalSet>& sets,
                    const std::string& what) {
  std::map<std::string, std::vector<std::int32_t>> groups;
  for (const auto& [rank, steps] : sets) {
    if (!steps.empty()) groups[steps.to_string()].push_back(rank);
  }
  for (const auto& [steps, ranks] : groups) {
    notes.push_back("step" + std::string(steps.find_first_of(",-") == std::string::npos ? " " : "s ") + steps +
                    " " + what + " (" + rank_list(ranks) + ")");
  }
}

}  // namespace dtrace::diff
