#include "log/declared.hpp"

namespace dtrace::log {

std::string DeclaredRank::check(std::int64_t rank, std::int64_t step, bool end_record) {
  if (!rank_) return {};
  // Built only for a line that breaks it: this runs on every line of a log.
  auto declaration = [&] { return "in a file whose header declares rank " + std::to_string(*rank_) + " alone"; };
  if (rank != *rank_) {
    return "rank " + std::to_string(rank) + " " + declaration() + " (header field 'rank', dtrace-fp(5))";
  }
  if (step < last_step_ || (last_end_ && step <= *last_end_)) {
    return "step " + std::to_string(step) +
           (step < last_step_ ? " after step " + std::to_string(last_step_) : " after its end record") + " " +
           declaration() + ", in step order (header field 'rank', dtrace-fp(5))";
  }
  last_step_ = step;
  if (end_record) last_end_ = step;
  return {};
}

}  // namespace dtrace::log
