// Replaces this process with a command (`dtrace exec`): unlike replay::run, the
// command inherits our stdin, stdout, stderr and process id, so it behaves
// exactly as if the user had started it.
#pragma once

#include <string>
#include <vector>

namespace dtrace::replay {

struct ExecFailure {
  std::string message;     // "cannot run CMD: No such file or directory"
  bool not_found = false;  // the command does not exist (shells say 127), else 126
};

// Searches PATH like a shell (execvp). Returns only when the exec failed.
ExecFailure replace_process(const std::vector<std::string>& argv);

}  // namespace dtrace::replay
