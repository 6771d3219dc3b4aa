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
};

// Classifies the mismatch `at` between steps a and b of one rank:
// - an `in` record differs: the divergence reached this op through its input;
// - an `out` record differs: receiver if an input of the same op invocation
//   (same scope, op and occurrence) differs, origin if all recorded inputs
//   match, unknown if the invocation recorded no inputs (at a collective,
//   receiver if another rank's input to it differs);
// - state and metric records: unknown (no inputs to look at).
Classification classify(const log::Step& a, const log::Step& b, const MismatchAt& at);

}  // namespace dtrace::diff
