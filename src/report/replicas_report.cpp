#include "report/replicas_report.hpp"

#include <sstream>

#include "report/schema.hpp"
#include "util/words.hpp"

namespace dtrace::report {

namespace {

nlohmann::json ranks_json(const std::vector<std::int32_t>& ranks) {
  nlohmann::json j = nlohmann::json::array();
  for (auto r : ranks) j.push_back(r);
  return j;
}

std::string group_text(const replicas::Report& report, std::size_t g) {
  std::vector<std::int32_t> ranks = report.layout.groups[g];
  return "group " + std::to_string(g) + " (" + replicas::rank_list(ranks) + ")";
}

}  // namespace

nlohmann::json departure_to_json(const replicas::Departure& d, const replicas::Report& report) {
  nlohmann::json variants = nlohmann::json::array();
  for (const replicas::Variant& v : d.variants) {
    variants.push_back({{"ranks", ranks_json(v.ranks)},
                        {"record", v.record},
                        {"location", v.location.empty() ? nlohmann::json() : nlohmann::json(v.location)}});
  }
  return {{"group", d.group},
          {"group_ranks", ranks_json(report.layout.groups[d.group])},
          {"step", d.step},
          {"seq", d.seq},
          {"scope", d.scope},
          {"op", d.op},
          {"io", d.io},
          {"name", d.name},
          {"occurrence", d.occurrence},
          {"kind", diff::kind_name(d.kind)},
          {"majority", d.majority},
          {"departing", ranks_json(d.departing)},
          {"variants", variants}};
}

nlohmann::json replicas_to_json(const replicas::Report& report) {
  nlohmann::json j;
  j["verdict"] = report.departed() ? "departed" : "agree";
  j["run"] = report.run;
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : report.layout.groups) groups.push_back(ranks_json(g));
  j["groups"] = groups;
  j["groups_from"] = report.layout.source;
  j["per_rank"] = nlohmann::json(std::vector<std::string>(report.layout.per_rank.begin(), report.layout.per_rank.end()));
  j["first"] = report.first ? departure_to_json(*report.first, report) : nlohmann::json();
  nlohmann::json departures = nlohmann::json::array();
  for (const auto& d : report.departures) departures.push_back(departure_to_json(d, report));
  j["departures"] = departures;
  j["compared"] = {{"steps", report.compared.steps == 0
                                 ? nlohmann::json()
                                 : nlohmann::json::array({report.compared.first_step, report.compared.last_step})},
                   {"step_count", report.compared.steps},
                   {"records", report.compared.records}};
  j["notes"] = report.notes;
  stamp(j, replicas_schema);
  return j;
}

std::string departure_to_text(const replicas::Departure& d, const replicas::Report& report) {
  std::ostringstream o;
  o << group_text(report, d.group) << " departs at step " << d.step << ": ";
  if (d.majority) {
    o << replicas::rank_list(d.departing) << " departed from the majority";
  } else {
    o << "no majority (" << d.variants.size() << " values among " << report.layout.groups[d.group].size()
      << " ranks): the departing rank cannot be named";
  }
  o << "\n  record: seq " << d.seq << " "
    << with_call("scope " + d.scope + " op " + d.op + " io " + d.io + " name " + d.name, d.occurrence, d.calls)
    << ", " << diff::kind_name(d.kind) << " mismatch\n";
  for (std::size_t i = 0; i < d.variants.size(); ++i) {
    const replicas::Variant& v = d.variants[i];
    o << "  " << (d.majority ? (i == 0 ? "majority  " : "departing ") : "value     ")
      << replicas::rank_list(v.ranks) << ": ";
    if (v.record.is_null()) {
      o << "record absent\n";
      continue;
    }
    if (v.record.contains("hash")) o << "hash " << v.record["hash"].get<std::string>();
    if (v.record.contains("bits")) o << "bits " << v.record["bits"].get<std::string>();
    if (v.record.contains("dtype")) o << " " << v.record["dtype"].get<std::string>();
    if (v.record.contains("shape")) o << " " << v.record["shape"].dump();
    o << "  " << v.location << "\n";
  }
  return o.str();
}

std::string replicas_to_text(const replicas::Report& report) {
  std::ostringstream o;
  if (!report.departed()) {
    o << "replicas agree: " << report.run << ": " << report.layout.groups.size()
      << (report.layout.groups.size() == 1 ? " group" : " groups") << " (from " << report.layout.source << ")";
  } else {
    o << "replicas departed: " << report.run << ": first at step " << report.first->step << ", "
      << group_text(report, report.first->group) << "\n";
    for (const auto& d : report.departures) o << departure_to_text(d, report);
    o << "compared";
  }
  if (report.compared.steps > 0) {
    o << (report.departed() ? " " : ", ") << "steps " << report.compared.first_step << "-"
      << report.compared.last_step << " (" << report.compared.steps << " steps), " << report.compared.records
      << " records";
  }
  o << "\n";
  for (const std::string& n : report.notes) o << "note: " << n << "\n";
  return o.str();
}

}  // namespace dtrace::report
