#include "log/summary.hpp"

#include <algorithm>
#include <map>

namespace dtrace::log {

std::string RunSummary::location(const Record& record) const {
  return files.at(record.file) + ":" + std::to_string(record.line);
}

// Walks the gaps between present ranks rather than 0..world_size-1: a header's
// world_size may be large and few ranks present.
std::string RunSummary::absent_ranks() const {
  std::string out;
  auto gap = [&](std::int64_t first, std::int64_t last) {
    if (first > last) return;
    if (!out.empty()) out += ',';
    out += std::to_string(first);
    if (last != first) out += '-' + std::to_string(last);
  };
  std::int64_t next = 0;
  for (const RankSummary& r : ranks) {
    gap(next, static_cast<std::int64_t>(r.rank) - 1);
    next = static_cast<std::int64_t>(r.rank) + 1;
  }
  gap(next, world_size() - 1);
  return out;
}

bool RunSummary::complete() const {
  if (static_cast<std::int64_t>(ranks.size()) != world_size()) return false;
  for (const RankSummary& r : ranks) {
    if (r.unfinished_count != 0 || r.steps != steps) return false;
  }
  return true;
}

Result<RunSummary> summarize_run(const std::string& path, const Selection& selection) {
  auto opened = RunReader::open(path);
  if (!opened) return opened.error();
  RunSummary out;
  out.path = path;
  out.selection = selection;
  out.reader = std::move(*opened);
  RunReader& reader = *out.reader;
  out.files = reader.files();
  out.headers = reader.headers();

  std::map<std::int32_t, RankSummary> ranks;
  while (true) {
    auto next = reader.next();
    if (!next) return next.error();
    if (!*next) break;
    Step& step = **next;
    RankSummary& rank = ranks[step.rank];
    rank.rank = step.rank;
    rank.steps.insert(step.step);
    rank.records += step.records.size();
    out.steps.insert(step.step);
    out.records += step.records.size();
    if (step.status == StepStatus::complete) {
      rank.complete_steps.insert(step.step);
    } else {
      ++rank.unfinished_count;
      if (rank.unfinished.size() < RankSummary::kMaxListed) {
        rank.unfinished.push_back(
            {step.step, step.status, step.declared_count, step.records.size(),
             step.records.empty() ? std::string() : reader.location(step.records.front())});
      }
    }
    if (selection.matches(step.rank, step.step)) {
      out.selected.push_back({step.rank, step.step, step.status, std::move(step.records)});
    }
  }
  for (auto& [rank, summary] : ranks) out.ranks.push_back(std::move(summary));
  // Complete steps arrive before unfinished ones; people read them by rank and step.
  std::stable_sort(out.selected.begin(), out.selected.end(),
                   [](const SelectedStep& a, const SelectedStep& b) {
                     return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
                   });
  out.notes = reader.notes();
  return out;
}

}  // namespace dtrace::log
