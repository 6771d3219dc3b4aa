// What `dtrace record` says on stderr (man/dtrace.1, RECORD): why CMD recorded
// nothing, what the Python processes of CMD noted, and what was recorded.
#pragma once

#include <string>
#include <vector>

#include "log/summary.hpp"
#include "record/record.hpp"

namespace dtrace::report {

// The command as typed, words joined by spaces: "python train.py --steps 8".
std::string command_text(const std::vector<std::string>& command);

// One process's note: "process 123 (train.py --steps 8), rank 0, torch 1.13.0:
// 1 optimizer, 8 forwards, 8 backwards, 8 steps".
std::string note_text(const record::Note& note);

// The error a process's note gives: "process 123 (train.py): step 3 reached ...".
std::string note_error_text(const record::Note& note);

// "python train.py exited with status 3" / "... was killed by signal 9".
std::string exit_text(const std::vector<std::string>& command, const record::Exit& exit);

// CMD exited 0 and left no rank file in `dir` (as typed): the lines that say
// what dtrace record looked for and what each note says, or that no Python
// process of CMD imported torch.
std::vector<std::string> nothing_recorded(const std::vector<std::string>& command, const std::string& dir,
                                          const record::Notes& notes);

// What was recorded in `dir` (as typed) and the command to run next.
std::vector<std::string> recorded(const log::RunSummary& summary, const std::string& dir);

}  // namespace dtrace::report
