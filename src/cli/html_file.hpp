// Writing `--html FILE` (dtrace(1), HTML REPORT): atomically, and never over a
// file the user recorded.
#pragma once

#include <string>

namespace dtrace::cli {

// Writes text to path through a temporary file in the same directory and a
// rename, so a reader never sees half a page. Refuses (Failure, exit 2) a path
// inside or equal to either run, and an existing file that is not an HTML
// page: what a user recorded is never replaced by a report.
// The refusals alone, to run before a long bisect rather than after it.
void check_html_target(const std::string& path, const std::string& run_a, const std::string& run_b);

void write_html_report(const std::string& path, const std::string& text, const std::string& run_a,
                       const std::string& run_b);

}  // namespace dtrace::cli
