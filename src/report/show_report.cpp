#include "report/show_report.hpp"

#include <charconv>
#include <map>
#include <sstream>
#include <tuple>

#include "report/schema.hpp"
#include "util/words.hpp"

namespace dtrace::report {

using log::RankSummary;
using log::RunSummary;

namespace {

nlohmann::json header_json(const log::Header& h) {
  return {{"format", h.format}, {"run", h.run},       {"world_size", h.world_size},
          {"hash", h.hash},     {"level", h.level},   {"env", h.env},
          {"config", h.config}, {"replay", h.replay}, {"file", h.file}};
}

nlohmann::json unfinished_json(const log::UnfinishedStep& u) {
  return {{"step", u.step},
          {"status", log::status_name(u.status)},
          {"declared_count",
           u.declared_count < 0 ? nlohmann::json() : nlohmann::json(u.declared_count)},
          {"records", u.records},
          {"location", u.location.empty() ? nlohmann::json() : nlohmann::json(u.location)}};
}

nlohmann::json rank_json(const RankSummary& r) {
  nlohmann::json unfinished = nlohmann::json::array();
  for (const auto& u : r.unfinished) unfinished.push_back(unfinished_json(u));
  return {{"rank", r.rank},
          {"steps", r.steps.to_string()},
          {"step_count", r.steps.size()},
          {"complete_steps", r.complete_steps.to_string()},
          {"records", r.records},
          {"unfinished", unfinished},
          {"unfinished_count", r.unfinished_count}};
}

std::string or_dash(std::string_view text) { return text.empty() ? "-" : std::string(text); }

std::string shape_text(const log::Record& r) {
  if (!r.has_shape) return "-";
  std::string out = "[";
  for (std::size_t i = 0; i < r.shape.size(); ++i) {
    if (i != 0) out += ',';
    out += std::to_string(r.shape[i]);
  }
  return out + "]";
}

// Shortest text that reads back as the same double.
std::string number_text(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

std::string env_text(const nlohmann::json& env) {
  if (!env.is_object() || env.empty()) return "(none)";
  std::string out;
  for (const auto& [key, value] : env.items()) {
    if (!out.empty()) out += " ";
    out += key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return out;
}

std::string replay_text(const nlohmann::json& replay) {
  if (replay.is_null()) return "(none)";
  std::string out;
  if (replay.contains("protocol")) {
    const auto& p = replay.at("protocol");
    out += "protocol " + (p.is_string() ? p.get<std::string>() : p.dump());
  }
  if (replay.contains("argv")) {
    if (!out.empty()) out += ", ";
    out += "argv:";
    const auto& argv = replay.at("argv");
    if (argv.is_array()) {
      for (const auto& a : argv) out += " " + (a.is_string() ? a.get<std::string>() : a.dump());
    } else {
      out += " " + argv.dump();
    }
  }
  return out.empty() ? replay.dump() : out;
}

std::string rank_line(const RankSummary& r) {
  std::ostringstream o;
  o << "  rank " << r.rank << ": steps " << (r.steps.empty() ? "none" : r.steps.to_string()) << " ("
    << r.steps.size() << "), " << r.records << (r.records == 1 ? " record" : " records");
  if (r.unfinished_count == 0) {
    o << ", complete\n";
    return o.str();
  }
  o << ", " << r.unfinished_count << " unfinished:\n";
  for (const auto& u : r.unfinished) {
    o << "    step " << u.step << ": " << log::status_name(u.status) << ", " << u.records
      << (u.records == 1 ? " record" : " records");
    if (u.status == log::StepStatus::late) {
      o << " after the step's end record";
    } else if (u.declared_count >= 0) {
      o << ", end record counts " << u.declared_count;
    } else {
      o << ", no end record";
    }
    if (!u.location.empty()) o << " (" << u.location << ")";
    o << "\n";
  }
  if (r.unfinished_count > r.unfinished.size()) {
    o << "    ... and " << r.unfinished_count - r.unfinished.size() << " more\n";
  }
  return o.str();
}

std::string_view io_text(const log::Record& r) { return r.io == log::Io::other ? r.io_text : log::io_name(r.io); }

// A step's records one a line, each call of a repeated op named as every text
// names it (call_text): which occurrence of its (scope, op, io, name) it is,
// of how many the step holds.
void write_records(std::ostringstream& o, const log::SelectedStep& step) {
  using Key = std::tuple<std::string_view, std::string_view, std::string_view, std::string_view>;
  const auto key = [](const log::Record& r) { return Key{r.scope, r.op, io_text(r), r.name}; };
  std::map<Key, int> calls, seen;
  for (const auto& record : step.records) ++calls[key(record)];
  for (const auto& record : step.records) {
    const Key k = key(record);
    o << "    " << with_call(record_line(record), seen[k]++, calls[k]) << "\n";
  }
}

std::string selection_text(const log::Selection& s) {
  std::string out;
  if (s.step) out += "step " + std::to_string(*s.step);
  if (s.steps) {
    out += "steps " + std::to_string(s.steps->first) + "-" +
           (s.steps->second == INT64_MAX ? std::string() : std::to_string(s.steps->second));
  }
  if (s.rank) out += (out.empty() ? "rank " : ", rank ") + std::to_string(*s.rank);
  return out;
}

}  // namespace

std::string record_line(const log::Record& r) {
  std::string out = std::to_string(r.seq);
  out += " " + or_dash(r.scope) + " " + or_dash(r.op) + " " + or_dash(io_text(r)) + " " + or_dash(r.name) +
         " " + or_dash(r.dtype) + " " + shape_text(r) + " " +
         (r.digest.empty() ? std::string("-") : r.digest.hex());
  if (r.has_value) out += " " + number_text(r.value);
  return out;
}

nlohmann::json show_to_json(const RunSummary& s) {
  nlohmann::json j;
  j["run"] = s.path;
  j["files"] = s.files;
  j["header"] = header_json(s.header());
  j["world_size"] = s.world_size();
  j["ranks_present"] = s.ranks.size();
  j["ranks_absent"] = s.absent_ranks();
  j["steps"] = s.steps.to_string();
  j["step_range"] =
      s.steps.empty() ? nlohmann::json() : nlohmann::json::array({s.steps.min(), s.steps.max()});
  j["records"] = s.records;
  j["complete"] = s.complete();
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankSummary& r : s.ranks) ranks.push_back(rank_json(r));
  j["ranks"] = ranks;
  j["notes"] = s.notes;
  if (s.selection.any()) {
    j["selection"] = {
        {"step", s.selection.step ? nlohmann::json(*s.selection.step) : nlohmann::json()},
        {"rank", s.selection.rank ? nlohmann::json(*s.selection.rank) : nlohmann::json()}};
    if (s.selection.steps) {
      j["selection"]["steps"] = nlohmann::json::array({s.selection.steps->first, s.selection.steps->second});
    }
    nlohmann::json selected = nlohmann::json::array();
    for (const auto& step : s.selected) {
      for (const auto& record : step.records) {
        nlohmann::json r = log::to_json(record);
        r["location"] = s.location(record);
        if (step.status != log::StepStatus::complete)
          r["step_status"] = log::status_name(step.status);
        selected.push_back(std::move(r));
      }
    }
    j["selected"] = selected;
  }
  stamp(j, show_schema);
  return j;
}

std::string show_to_text(const RunSummary& s) {
  const log::Header& h = s.header();
  std::ostringstream o;
  o << "run:        " << s.path << "\n";
  o << "files:      " << s.files.size() << "\n";
  for (const auto& f : s.files) o << "  " << f << "\n";
  o << "format:     " << h.format << "\n";
  o << "name:       " << or_dash(h.run) << "\n";
  o << "world_size: " << h.world_size << "\n";
  o << "hash:       " << h.hash << "\n";
  o << "level:      " << or_dash(h.level) << "\n";
  o << "env:        " << env_text(h.env) << "\n";
  o << "config:     " << (h.config.empty() ? std::string("(none)") : h.config.dump()) << "\n";
  o << "replay:     " << replay_text(h.replay) << "\n";
  const std::string absent = s.absent_ranks();
  o << "ranks:      " << s.ranks.size() << " of " << s.world_size() << " present"
    << (absent.empty() ? std::string() : " (absent: " + absent + ")") << "\n";
  o << "steps:      " << (s.steps.empty() ? std::string("none") : s.steps.to_string()) << " ("
    << s.steps.size() << ")\n";
  o << "records:    " << s.records << "\n";
  o << "complete:   " << (s.complete() ? "yes" : "no") << "\n";
  for (const RankSummary& r : s.ranks) o << rank_line(r);
  if (!s.notes.empty()) {
    o << "notes:\n";
    for (const auto& n : s.notes) o << "  - " << n << "\n";
  }
  if (s.selection.any()) {
    o << "records (" << selection_text(s.selection) << "):";
    if (s.selected.empty()) o << " none";
    o << "\n";
    for (const auto& step : s.selected) {
      o << "  rank " << step.rank << ", step " << step.step;
      if (step.status != log::StepStatus::complete)
        o << " (" << log::status_name(step.status) << ")";
      o << ":\n";
      write_records(o, step);
    }
  }
  return o.str();
}

}  // namespace dtrace::report
