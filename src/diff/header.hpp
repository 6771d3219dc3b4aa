// Header differences between two runs (dtrace(1), diff): env and config values
// that differ are the first suspects for a divergence, and an env value that
// the deterministic-environment rules reject (§6) is flagged in either run.
#pragma once

#include "diff/diff.hpp"

namespace dtrace::diff {

void compare_headers(const log::Header& a, const log::Header& b, Report& report);

}  // namespace dtrace::diff
