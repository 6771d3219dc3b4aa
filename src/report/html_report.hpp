// Renders a divergence as one self-contained HTML page (dtrace(1), HTML REPORT):
// the rank x step map, the first divergent step's records, and for a bisect the
// ladder of stages and the evidence. Inline SVG and CSS and a few lines of
// plain JavaScript; nothing is fetched, so the page reads the same offline.
#pragma once

#include <string>

#include "bisect/bisect.hpp"
#include "diff/diff.hpp"

namespace dtrace::report {

// The map bins ranks and steps so the page stays small and fast however large
// the run: at most this many rows and columns.
inline constexpr int kMapRows = 512;
inline constexpr int kMapColumns = 600;

// Either may be null (a bisect without a readable diff has no map; a diff has
// no ladder); at least one must be given.
std::string divergence_html(const diff::Report* diff, const bisect::Report* bisect);

}  // namespace dtrace::report
