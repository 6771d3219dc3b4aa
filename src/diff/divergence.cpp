#include "diff/divergence.hpp"

#include <tuple>

namespace dtrace::diff {

int role_precedence(Role role) { return role == Role::origin ? 0 : role == Role::unknown ? 1 : 2; }

Divergence first_divergence(const std::map<std::int32_t, RankFirst>& firsts,
                            const std::map<std::int64_t, std::set<std::string>>& collective_inputs_differing) {
  Divergence out;
  for (const auto& [rank, first] : firsts) {
    Mismatch m = first.mismatch;
    if (!first.collective.empty()) {
      auto it = collective_inputs_differing.find(m.step);
      if (it != collective_inputs_differing.end() && it->second.contains(first.collective)) {
        m.role = Role::receiver;
      }
    }
    if (!out.first || std::tuple(m.step, role_precedence(m.role), m.rank) <
                          std::tuple(out.first->step, role_precedence(out.first->role), out.first->rank)) {
      out.first = m;
    }
    out.ranks.push_back(std::move(m));
  }
  return out;
}

}  // namespace dtrace::diff
