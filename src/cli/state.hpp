// The last diff's runs and first divergence, kept in ./.dtrace/ (as git keeps
// its bisect state) so `dtrace bisect` can start without arguments.
#pragma once

#include <optional>
#include <string>

#include "diff/diff.hpp"

namespace dtrace::cli {

struct LastDiff {
  std::string run_a, run_b;
  std::optional<std::int64_t> step;
  std::optional<std::int32_t> rank;
};

// Best effort: a directory we cannot write to only loses the convenience.
void save_last_diff(const diff::Report& report);
// A diff that failed leaves no state: bisect must not fall back on the runs of
// an older diff the user has moved on from.
void forget_last_diff();
std::optional<LastDiff> load_last_diff();

}  // namespace dtrace::cli
