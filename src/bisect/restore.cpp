// Stage 1, the restore check: a replay must start step N from exactly the
// state the run recorded there, or everything after it is noise.
#include <map>

#include "bisect/session.hpp"

namespace dtrace::bisect {

namespace {

std::string state_key(const log::Record& r, int occurrence) {
  return std::string(r.scope) + '\n' + std::string(r.op) + '\n' + std::string(r.name) + '\n' +
         std::to_string(occurrence);
}

std::map<std::string, const log::Record*> state_records(const log::Step& step) {
  std::map<std::string, int> seen;
  std::map<std::string, const log::Record*> out;
  for (const log::Record& r : step.records) {
    if (r.io != log::Io::state) continue;
    const std::string base = state_key(r, 0);
    out[state_key(r, seen[base]++)] = &r;
  }
  return out;
}

}  // namespace

std::optional<std::pair<std::string, std::string>> first_state_difference(const log::Step& replayed,
                                                                          const log::Step& recorded) {
  const auto have = state_records(replayed);
  // In the recorded step's own order: the first state the replay got wrong.
  std::map<std::string, int> seen;
  for (const log::Record& r : recorded.records) {
    if (r.io != log::Io::state) continue;
    const std::string base = state_key(r, 0);
    auto it = have.find(state_key(r, seen[base]++));
    if (it == have.end() || it->second->digest != r.digest || it->second->dtype != r.dtype ||
        !std::equal(r.shape.begin(), r.shape.end(), it->second->shape.begin(), it->second->shape.end())) {
      return std::pair{std::string(r.name), std::string(r.scope)};
    }
  }
  return std::nullopt;
}

}  // namespace dtrace::bisect
