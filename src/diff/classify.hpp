// The role of a rank's first mismatch (dtrace(1), diff): did this rank's op
// introduce the divergence (origin) or receive it through an input (receiver)?
#pragma once

#include "diff/align.hpp"

namespace dtrace::diff {

struct Classification {
  Role role = Role::unknown;
  // An origin (or, without recorded inputs, unknown) at a collective: it still
  // becomes a receiver if another rank's input to the same collective differs
  // (decided once every rank is known).
  std::string collective;  // collective_key(), empty for other ops
  // The generator whose state differs at this step and explains the mismatch
  // (role unknown): the mismatch itself, or one the step drew from.
  std::optional<GeneratorRecord> generator;
};

// Does r hold a generator's state (dtrace-fp(5), "Generators")? A record of
// op "rng" (a state a step starts from: step rng torch.cpu, step rng numpy),
// or an `in` record named "rng" or "rng.<which>" (the state an op or layer
// draws from: dtrace_torch's rng.cpu, minitrain's dropout rng).
bool holds_generator(const log::Record& r);

// Classifies the mismatch `at` between steps a and b of one rank:
// - an `in` record differs: the divergence reached this op through its input;
// - an `out` record differs: receiver if an input of the same op invocation
//   (same scope, op and occurrence) differs, origin if all recorded inputs
//   match, unknown if the invocation recorded no inputs (at a collective,
//   receiver if another rank's input to it differs);
// - state and metric records: unknown (no inputs to look at);
// - a generator's state (holds_generator): unknown, naming it. Every record
//   before it matches, so nothing recorded computed it: the generator was not
//   seeded alike, or not saved and restored;
// - an `in` (outside scope step), `out` or metric record in a step where a
//   generator's state differs: unknown, naming the generator (an `out` whose
//   op's input differs stays a receiver, the generator named). Python's and
//   NumPy's generators are recorded at the step's end, so a draw from one
//   shows first in what it computed, whose recorded inputs match: no op there
//   introduced it, and no input differed before it.
Classification classify(const log::Step& a, const log::Step& b, const MismatchAt& at);

}  // namespace dtrace::diff
