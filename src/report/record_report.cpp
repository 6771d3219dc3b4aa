#include "report/record_report.hpp"

#include <cstring>

#include "util/words.hpp"

namespace dtrace::report {

std::string command_text(const std::vector<std::string>& command) {
  std::string text;
  for (const std::string& word : command) text += (text.empty() ? "" : " ") + word;
  return text;
}

std::string note_text(const record::Note& note) {
  std::string text = "process " + (note.pid ? std::to_string(*note.pid) : std::string("?"));
  if (!note.argv.empty()) text += " (" + command_text(note.argv) + ")";
  if (note.rank) text += ", rank " + std::to_string(*note.rank);
  if (!note.torch.empty()) text += ", torch " + note.torch;
  auto count = [](const std::optional<long long>& n, const char* one, const char* many) {
    return n ? plural(*n, one, many) : std::string("? ") + many;
  };
  text += ": " + count(note.optimizers, "optimizer", "optimizers") + ", " + count(note.forwards, "forward", "forwards") +
          ", " + count(note.backwards, "backward", "backwards") + ", " + count(note.steps, "step", "steps");
  if (note.explicit_recorder) text += ", its own dtrace Recorder";
  text += note.recorded ? ", recorded" : ", recorded nothing";
  return text;
}

std::string note_error_text(const record::Note& note) {
  std::string text = "process " + (note.pid ? std::to_string(*note.pid) : std::string("?"));
  if (!note.argv.empty()) text += " (" + command_text(note.argv) + ")";
  return text + ": " + note.error;
}

std::string exit_text(const std::vector<std::string>& command, const record::Exit& exit) {
  if (exit.signal != 0) {
    return command_text(command) + " was killed by signal " + std::to_string(exit.signal) + " (" +
           strsignal(exit.signal) + ")";
  }
  return command_text(command) + " exited with status " + std::to_string(exit.code);
}

std::vector<std::string> nothing_recorded(const std::vector<std::string>& command, const std::string& dir,
                                          const record::Notes& notes) {
  std::vector<std::string> lines;
  lines.push_back(command_text(command) + " recorded nothing in " + dir +
                  ": dtrace record ends each step at a torch.optim optimizer's step() after the backward() "
                  "that made its gradients, and found none");
  if (notes.notes.empty()) {
    lines.push_back("no Python process of " + command_text(command) +
                    " imported torch (a process started with python -I, -E or -S, or with PYTHONPATH "
                    "replaced, is not seen)");
  }
  for (const record::Note& note : notes.notes) lines.push_back(note_text(note));
  return lines;
}

std::vector<std::string> recorded(const log::RunSummary& summary, const std::string& dir) {
  std::vector<std::string> lines;
  std::string ranks = plural(static_cast<std::int64_t>(summary.ranks.size()), "rank", "ranks");
  if (summary.world_size() != static_cast<std::int64_t>(summary.ranks.size())) {
    ranks += " of " + std::to_string(summary.world_size());
  }
  lines.push_back("recorded " + ranks + ", " + noun(static_cast<std::int64_t>(summary.steps.size()), "step ", "steps ") +
                  summary.steps.to_string() + ", in " + dir);
  if (!summary.complete()) {
    lines.push_back("the recording is not complete (a rank or a step is missing or unfinished): see dtrace show " + dir);
  }
  lines.push_back("next: record the same command again (dtrace record --out OTHER -- ...), then dtrace diff " + dir +
                  " OTHER");
  return lines;
}

}  // namespace dtrace::report
