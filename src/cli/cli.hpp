// The command line: turns arguments into calls of the library and renders what
// they return. The one place that decides exit statuses and prints errors.
#pragma once

namespace dtrace::cli {

// Exit statuses shared by every command (dtrace(1), EXIT STATUS: as diff(1) and cmp(1)).
inline constexpr int kExitSame = 0;
inline constexpr int kExitDifferent = 1;
inline constexpr int kExitTrouble = 2;

int run(int argc, char** argv);

}  // namespace dtrace::cli
