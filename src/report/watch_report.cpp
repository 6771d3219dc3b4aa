#include "report/watch_report.hpp"

#include <cstdio>
#include <sstream>

#include "report/diff_report.hpp"
#include "report/replicas_report.hpp"
#include "report/schema.hpp"
#include "util/words.hpp"

namespace dtrace::report {

namespace {

std::string_view event_name(watch::EventKind kind) {
  switch (kind) {
    case watch::EventKind::progress: return "progress";
    case watch::EventKind::diverged: return "diverged";
    case watch::EventKind::rank_diverged: return "rank_diverged";
    case watch::EventKind::departed: return "departed";
    case watch::EventKind::ended: break;
  }
  return "ended";
}

nlohmann::json progress_json(const watch::Progress& p) {
  nlohmann::json ranks = nlohmann::json::object();
  for (auto [rank, step] : p.ranks) ranks[std::to_string(rank)] = step;
  return {{"step", p.step},
          {"ranks", ranks},
          {"records", p.records},
          {"records_per_second", p.records_per_second},
          {"seconds", p.seconds},
          {"replicas_step", p.replicas_step}};
}

std::string progress_text(const watch::Progress& p) {
  std::ostringstream o;
  o << "watch: ";
  if (p.ranks.empty() && p.replicas_step < 0) {
    o << "nothing compared yet";
  } else if (!p.ranks.empty()) {
    o << "step " << p.step << " compared on every rank";
    std::map<std::int64_t, std::vector<std::int32_t>> ahead;
    for (auto [rank, step] : p.ranks) {
      if (step != p.step) ahead[step].push_back(rank);
    }
    for (const auto& [step, ranks] : ahead) o << "; " << replicas::rank_list(ranks) << " at " << step;
  } else {
    o << "replicas agree up to step " << p.replicas_step;
  }
  if (!p.ranks.empty() && p.replicas_step >= 0) o << "; replicas agree up to step " << p.replicas_step;
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.0f", p.records_per_second);
  o << " (" << p.records << " records, " << rate << " records/s)\n";
  return o.str();
}

nlohmann::json mismatch_json(const diff::Mismatch& m) {
  diff::Report one;
  one.first = m;
  one.ranks = {m};
  return diff_to_json(one)["first"];
}

}  // namespace

nlohmann::json watch_event_to_json(const watch::Event& e) {
  nlohmann::json j;
  j["event"] = event_name(e.kind);
  j["progress"] = progress_json(e.progress);
  if (e.diff) j["diff"] = diff_to_json(*e.diff);
  if (e.mismatch) j["mismatch"] = mismatch_json(*e.mismatch);
  if (e.departure && e.replicas) j["departure"] = departure_to_json(*e.departure, *e.replicas);
  if (e.replicas) j["replicas"] = replicas_to_json(*e.replicas);
  if (e.kind == watch::EventKind::ended) j["reason"] = e.end_reason;
  if (e.read_at > 0) {
    j["read_at"] = e.read_at;
    j["reported_at"] = e.reported_at;
  }
  stamp(j, watch_schema);
  return j;
}

std::string watch_event_to_text(const watch::Event& e) {
  std::ostringstream o;
  char lag[64];
  std::snprintf(lag, sizeof lag, "%.3f", e.reported_at - e.read_at);
  switch (e.kind) {
    case watch::EventKind::progress: return progress_text(e.progress);
    case watch::EventKind::diverged:
      o << "watch: diverged (reported " << lag << " s after the step was read)\n" << diff_to_text(*e.diff);
      break;
    case watch::EventKind::rank_diverged: {
      const diff::Mismatch& m = *e.mismatch;
      o << "watch: rank " << m.rank << " diverged at step " << m.step << ": seq " << m.seq << " "
        << with_call(m.scope + " " + m.op + " " + m.io + " " + m.name, m.occurrence, m.calls) << " ("
        << diff::kind_name(m.kind) << ", "
        << diff::role_name(m.role)
        << (m.generator ? "; a generator's state differs: " + m.generator->text() : std::string()) << ")  A "
        << m.a_location << "  B " << m.b_location << "\n";
      break;
    }
    case watch::EventKind::departed:
      o << "watch: replicas departed: " << departure_to_text(*e.departure, *e.replicas);
      break;
    case watch::EventKind::ended:
      o << "watch: run ended: " << e.end_reason << "\n";
      if (e.diff) o << diff_to_text(*e.diff);
      if (e.replicas) o << replicas_to_text(*e.replicas);
      break;
  }
  return o.str();
}

}  // namespace dtrace::report
