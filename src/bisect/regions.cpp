// Compiled regions (dtrace-fp(5), "Compiled regions"): a workload whose program
// runs compiled code (torch.compile) records each compiled module as one layer,
// and at kernel level records what ran inside it in sub-scopes of its own. It
// says which scopes are regions in regions.rank<r>.json in the capture
// directory, so the report can keep the region apart from the op named in it
// rather than leaving the reader to guess from a scope's last component.
#include "bisect/session.hpp"

namespace dtrace::bisect {

std::optional<Region> region_of(const std::string& dir, std::int32_t rank, const std::string& scope,
                                std::vector<std::string>& notes) {
  const std::string path = dir + "/regions.rank" + std::to_string(rank) + ".json";
  // The workload wrote it, like kernels.rank<r>.json: its word, shown as
  // such. A file that is not one, or does not parse, is noted, not fatal.
  const std::string unshown = "the compiled region is not shown";
  const auto j = workload_json(path, unshown, notes);
  if (!j) return std::nullopt;
  const auto bad = [&](const std::string& why) {
    workload_note(notes, path, why, unshown);
    return std::nullopt;
  };
  const auto list = j->find("regions");
  if (list == j->end() || !list->is_array()) return bad("no array \"regions\"");
  // The innermost region holding the scope, should regions nest.
  std::optional<Region> best;
  for (const auto& r : *list) {
    if (!r.is_object()) return bad("a region that is not an object");
    const auto s = r.find("scope");
    const auto k = r.find("kind");
    if (s == r.end() || !s->is_string() || k == r.end() || !k->is_string()) {
      return bad("a region without string \"scope\" and \"kind\"");
    }
    const std::string region = s->get<std::string>();
    if (region.empty() || !inside_scope(scope, region) || (best && best->scope.size() >= region.size())) continue;
    Region found{region, k->get<std::string>(), "", ""};
    if (scope.size() > region.size()) {
      // The part is the first component below the region's scope.
      const std::string below = scope.substr(region.size() + 1);
      found.part = below.substr(0, below.find('/'));
      const auto parts = r.find("parts");
      if (parts != r.end() && parts->is_object()) {
        const auto means = parts->find(found.part);
        if (means != parts->end() && means->is_string()) found.part_means = means->get<std::string>();
      }
    }
    best = std::move(found);
  }
  return best;
}

}  // namespace dtrace::bisect
