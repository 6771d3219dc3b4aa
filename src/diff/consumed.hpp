// What a step consumed (dtrace-fp(5), io): its `in` records of scope "step",
// the batch a recorder fingerprints as the step begins, which no kernel of the
// step computes. diff's report says so of a first difference there, and
// bisect's data check (src/bisect/data.cpp) names the data from it.
#pragma once

#include <string_view>

namespace dtrace::diff {

inline bool consumed_by_step(std::string_view scope, std::string_view io) { return io == "in" && scope == "step"; }

}  // namespace dtrace::diff
