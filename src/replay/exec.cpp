#include "replay/exec.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dtrace::replay {

ExecFailure replace_process(const std::vector<std::string>& argv) {
  if (argv.empty()) return {"no command to run", true};
  std::vector<std::string> words = argv;
  std::vector<char*> pointers;
  for (auto& word : words) pointers.push_back(word.data());
  pointers.push_back(nullptr);
  ::execvp(pointers[0], pointers.data());
  const int error = errno;
  return {"cannot run " + argv[0] + ": " + std::strerror(error), error == ENOENT};
}

}  // namespace dtrace::replay
