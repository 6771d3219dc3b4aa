// The verdict generator (dtrace(1), bisect): a random draw that differs while
// every record before it matches is a generator whose state differs. No kernel
// of the step introduced it and no replay can localize it; what differs is how
// the program seeds and keeps its generator. At the step where both runs begin
// nothing was restored, so it was not seeded alike (not seeded, or seeded from
// the time or the process id); at a later step it was also not saved and
// restored with the program's state.
#include "bisect/session.hpp"
#include "diff/classify.hpp"

namespace dtrace::bisect {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

// Does `run` begin at `step` on `rank`: is it the first step the run holds
// there? Writers emit a rank's steps in increasing order (dtrace-fp(5)), so the
// first one read is where the run began (a fresh run, or one resumed there).
Result<bool> begins_at(const std::string& run, std::int32_t rank, std::int64_t step) {
  auto reader = log::RunReader::open(run);
  if (!reader) return reader.error();
  for (;;) {
    auto next = (*reader)->next();
    if (!next) return next.error();
    if (!*next) return false;  // the rank is not in the run
    if ((*next)->rank == rank) return (*next)->step == step;
  }
}

}  // namespace

Result<bool> runs_begin_at_step(const Session& s) {
  for (const Side* side : {&s.a, &s.b}) {
    auto begins = begins_at(side->run, s.report.rank, s.report.step);
    if (!begins) return begins.error();
    if (!*begins) return false;
  }
  return true;
}

bool is_generator_state(const StateRecord& state) {
  log::Record r;
  r.io = log::Io::state;
  r.scope = state.scope;
  r.op = state.op;
  r.name = state.name;
  return diff::holds_generator(r);
}

Result<void> settle_generator(Session& s, const diff::GeneratorRecord& generator, const std::string& found) {
  Report& rep = s.report;
  auto first = runs_begin_at_step(s);
  if (!first) return first.error();
  rep.verdict = Verdict::generator;
  rep.generator = GeneratorDifference{generator.scope, generator.op, generator.io, generator.name, *first};
  const std::string step = n(rep.step);
  rep.reached = found + ": " +
                (*first ? "step " + step + " is where both runs begin, so nothing was restored: the generator was "
                          "not seeded alike (not seeded, or seeded from the time or the process id)"
                        : "the generator was not seeded alike (not seeded, or seeded from the time or the process "
                          "id), or is not in the state a checkpoint saves and a restore loads") +
                "; seed it from the configuration and put it in the program's state";
  return {};
}

}  // namespace dtrace::bisect
