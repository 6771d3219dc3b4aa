// The data check (dtrace(1), bisect): what a step consumed -- its step-scope
// `in` records, the batch a recorder fingerprints as the step begins
// (dtrace-fp(5)) -- is computed by no kernel of the step. When it is where the
// step first differs, the step's inputs differ: the data pipeline's state (a
// sampler's position or shuffle, an augmentation's generator), which no replay
// of the step can localize, and which replays restoring the same wrong data
// would otherwise report as not reproduced.

#include "bisect/session.hpp"
#include "diff/align.hpp"
#include "diff/consumed.hpp"
#include "util/words.hpp"

namespace dtrace::bisect {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

bool consumed(const log::Record& r) { return diff::consumed_by_step(r.scope, log::io_name(r.io)); }

DataDifference describe(const log::Step& step, std::size_t index) {
  const log::Record& r = step.records[index];
  return {std::string(r.scope), std::string(r.op), std::string(r.name), diff::occurrence_of(step, index),
          diff::calls_of(step, index)};
}

}  // namespace

std::string DataDifference::text() const { return with_call(scope + " " + op + " in " + name, occurrence, calls); }

std::optional<DataDifference> first_input_difference(const log::Step& a, const log::Step& b, bool only_inputs) {
  if (!only_inputs) {
    const auto first = diff::compare_step(a, b).first;
    if (!first) return std::nullopt;
    const bool in_a = first->a >= 0;
    const log::Step& side = in_a ? a : b;
    const std::size_t index = static_cast<std::size_t>(in_a ? first->a : first->b);
    const log::Record& r = side.records[index];
    if (!consumed(r)) return std::nullopt;
    return describe(side, index);
  }
  const auto d = first_picked_difference(a, b, consumed);
  if (!d) return std::nullopt;
  return describe(b, static_cast<std::size_t>(d->record - b.records.data()));
}

bool runs_consumed_different_data(Session& s) {
  Report& rep = s.report;
  if (!s.a.recorded || !s.b.recorded) return false;  // one run lacks the step: nothing to compare
  const auto input = first_input_difference(s.a.recorded->step, s.b.recorded->step, false);
  if (!input) return false;
  rep.verdict = Verdict::data;
  rep.input = input;
  rep.reached = "data check: runs A and B first differ at step " + n(rep.step) + " in what the step consumed (" +
                input->text() + "), read from the logs: the step's inputs differ, from the data pipeline's state (a sampler's "
                "position or order, an augmentation's generator), not from a kernel of the step";
  s.note("data", rep.reached);
  return true;
}

}  // namespace dtrace::bisect
