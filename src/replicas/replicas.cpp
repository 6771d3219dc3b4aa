#include "replicas/replicas.hpp"

#include <algorithm>
#include <charconv>
#include <tuple>

#include "diff/align.hpp"
#include "log/prefetch.hpp"
#include "log/reader.hpp"

namespace dtrace::replicas {

namespace {

// A rank of a group more than this many steps ahead of a step some other rank
// of the group has not delivered settles that step as not compared: the
// missing rank has no such step (a resumed or crashed rank, a rank file that
// is not there). Ranks of one job are held within a step or two of each other
// by their collectives, so this is only reached when a step is really missing,
// and it bounds what is held per group.
constexpr std::int64_t kMaxWaitSteps = 64;

Result<std::int32_t> parse_rank(std::string_view text, std::string_view whole) {
  std::int32_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end || value < 0) {
    return Error{"replica groups \"" + std::string(whole) + "\": \"" + std::string(text) +
                 "\" is not a rank (a number, or a range such as 0-7)"};
  }
  return value;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

Result<std::vector<Group>> check_groups(std::vector<Group> groups, std::int64_t world_size,
                                        const std::string& what) {
  std::set<std::int32_t> seen;
  for (Group& g : groups) {
    std::sort(g.begin(), g.end());
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (i > 0 && g[i] == g[i - 1]) {
        return Error{what + ": rank " + std::to_string(g[i]) + " is named twice in one group"};
      }
      if (g[i] >= world_size) {
        return Error{what + ": rank " + std::to_string(g[i]) + " is outside world_size " +
                     std::to_string(world_size)};
      }
      if (!seen.insert(g[i]).second) {
        return Error{what + ": rank " + std::to_string(g[i]) + " is in two groups"};
      }
    }
    if (g.size() < 2) {
      return Error{what + ": a group of " + std::to_string(g.size()) +
                   " rank has nothing to compare (a group needs 2 ranks or more)"};
    }
  }
  if (groups.empty()) return Error{what + ": no group"};
  return groups;
}

bool names_allreduce(std::string_view text) {
  return text.find("allreduce") != std::string_view::npos ||
         text.find("all_reduce") != std::string_view::npos;
}

// Identity of a record within one rank's step (DESIGN.md §3 identity, without
// rank and step).
using Identity = std::tuple<std::string_view, std::string_view, std::string_view, std::string_view, int>;

// Two occurrences of one record: the identity but its occurrence.
bool same_record(const Identity& x, const Identity& y) {
  return std::get<0>(x) == std::get<0>(y) && std::get<1>(x) == std::get<1>(y) && std::get<2>(x) == std::get<2>(y) &&
         std::get<3>(x) == std::get<3>(y);
}

bool same_value(const log::Record& a, const log::Record& b, bool& structure) {
  const bool shape_same = a.has_shape == b.has_shape &&
                          std::equal(a.shape.begin(), a.shape.end(), b.shape.begin(), b.shape.end());
  if (a.dtype != b.dtype || !shape_same || a.scalar != b.scalar) {
    structure = true;
    return false;
  }
  return a.digest == b.digest;
}

}  // namespace

Result<std::vector<Group>> parse_groups(std::string_view text, std::int64_t world_size) {
  std::vector<Group> groups;
  for (std::string_view part : split(text, ':')) {
    Group g;
    for (std::string_view item : split(part, ',')) {
      const std::size_t dash = item.find('-');
      if (dash == std::string_view::npos) {
        auto r = parse_rank(item, text);
        if (!r) return r.error();
        g.push_back(*r);
        continue;
      }
      auto lo = parse_rank(item.substr(0, dash), text);
      if (!lo) return lo.error();
      auto hi = parse_rank(item.substr(dash + 1), text);
      if (!hi) return hi.error();
      if (*hi < *lo || *hi - *lo >= world_size) {
        return Error{"replica groups \"" + std::string(text) + "\": range " + std::string(item) +
                     " is empty or larger than world_size " + std::to_string(world_size)};
      }
      for (auto r = *lo; r <= *hi; ++r) g.push_back(r);
    }
    groups.push_back(std::move(g));
  }
  return check_groups(std::move(groups), world_size, "replica groups \"" + std::string(text) + "\"");
}

Result<std::optional<Layout>> layout_from_header(const log::Header& header) {
  auto it = header.raw.find("replicas");
  if (it == header.raw.end() || it->is_null()) return std::optional<Layout>{};
  const std::string what = header.file + ":1: header field \"replicas\"";
  const nlohmann::json& field = *it;
  if (!field.is_object() || !field.contains("groups") || !field["groups"].is_array()) {
    return Error{what + " is not an object with a \"groups\" list (dtrace-fp(5))"};
  }
  Layout layout;
  layout.source = "header";
  std::vector<Group> groups;
  for (const auto& g : field["groups"]) {
    if (!g.is_array()) return Error{what + ": a group is not a list of ranks"};
    Group group;
    for (const auto& r : g) {
      if (!r.is_number_integer() || r.get<std::int64_t>() < 0 || r.get<std::int64_t>() > INT32_MAX) {
        return Error{what + ": " + r.dump() + " is not a rank"};
      }
      group.push_back(r.get<std::int32_t>());
    }
    groups.push_back(std::move(group));
  }
  auto checked = check_groups(std::move(groups), header.world_size, what);
  if (!checked) return checked.error();
  layout.groups = std::move(*checked);
  if (auto p = field.find("per_rank"); p != field.end()) {
    if (!p->is_array()) return Error{what + ": \"per_rank\" is not a list of op names"};
    layout.per_rank.clear();
    for (const auto& op : *p) {
      if (!op.is_string()) return Error{what + ": \"per_rank\" holds " + op.dump() + ", not an op name"};
      layout.per_rank.insert(op.get<std::string>());
    }
  }
  return std::optional<Layout>{std::move(layout)};
}

bool must_agree(const log::Record& record, const Layout& layout) {
  if (record.scope == "step") {
    if (record.io == log::Io::state) return !layout.per_rank.contains(record.op);
    return record.io == log::Io::out && record.op == "grads";
  }
  return diff::is_collective(record.scope) && record.io == log::Io::out &&
         (names_allreduce(record.scope) || names_allreduce(record.op));
}

ReplicaCheck::ReplicaCheck(Layout layout, Locate locate)
    : layout_(std::move(layout)), locate_(std::move(locate)), groups_(layout_.groups.size()) {
  for (std::size_t g = 0; g < layout_.groups.size(); ++g) {
    for (auto r : layout_.groups[g]) group_of_[r] = g;
  }
}

std::vector<Departure> ReplicaCheck::add(const log::Step& step) {
  std::vector<Departure> settled;
  auto it = group_of_.find(step.rank);
  if (it == group_of_.end()) {
    ungrouped_.insert(step.rank);
    return settled;
  }
  if (step.status != log::StepStatus::complete) {
    unfinished_[step.rank].insert(step.step);
    return settled;
  }
  const std::size_t g = it->second;
  GroupState& state = groups_[g];
  // A group that departed is reported at its first departure; later steps
  // only follow from it.
  if (state.first) return settled;
  std::vector<log::Record> kept;
  for (const log::Record& r : step.records) {
    if (must_agree(r, layout_)) kept.push_back(r);
  }
  state.steps[step.step].ranks[step.rank] = std::move(kept);
  auto& last = state.last_seen[step.rank];
  last = std::max(last, step.step);
  settle(g, settled);
  return settled;
}

void ReplicaCheck::settle(std::size_t g, std::vector<Departure>& out) {
  GroupState& state = groups_[g];
  const Group& ranks = layout_.groups[g];
  std::int64_t ahead = -1;
  for (auto [rank, last] : state.last_seen) ahead = std::max(ahead, last);
  for (auto it = state.steps.begin(); it != state.steps.end() && !state.first;) {
    Pending& pending = it->second;
    if (pending.ranks.size() == ranks.size()) {
      if (auto d = compare(g, it->first, pending)) {
        state.first = *d;
        out.push_back(*d);
        state.steps.clear();
        return;
      }
      state.last_compared = std::max(state.last_compared, it->first);
      it = state.steps.erase(it);
      continue;
    }
    if (ahead - it->first > kMaxWaitSteps) {
      std::vector<std::int32_t> missing;
      for (auto r : ranks) {
        if (!pending.ranks.contains(r)) missing.push_back(r);
      }
      partial_[rank_list(missing) + " of group " + std::to_string(g)].insert(it->first);
      it = state.steps.erase(it);
      continue;
    }
    ++it;
  }
}

std::optional<Departure> ReplicaCheck::compare(std::size_t g, std::int64_t step, Pending& pending) {
  const Group& ranks = layout_.groups[g];
  // Every identity any rank holds, and each rank's record of it.
  std::map<Identity, std::vector<const log::Record*>> table;
  std::map<Identity, std::int64_t> first_seq;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto& records = pending.ranks.at(ranks[i]);
    std::map<std::tuple<std::string_view, std::string_view, std::string_view, std::string_view>, int> seen;
    for (const log::Record& r : records) {
      const std::string_view io = r.io == log::Io::other ? r.io_text : log::io_name(r.io);
      const int occurrence = seen[{r.scope, r.op, io, r.name}]++;
      const Identity id{r.scope, r.op, io, r.name, occurrence};
      auto& row = table[id];
      row.resize(ranks.size(), nullptr);
      row[i] = &r;
      auto [s, fresh] = first_seq.try_emplace(id, r.seq);
      if (!fresh) s->second = std::min(s->second, r.seq);
    }
    records_ += records.size();
  }
  steps_compared_.insert(step);
  // The identities in seq order: the first departure is the earliest record.
  std::vector<std::pair<std::int64_t, const Identity*>> order;
  order.reserve(table.size());
  for (const auto& [id, seq] : first_seq) order.emplace_back(seq, &id);
  std::sort(order.begin(), order.end());
  for (const auto& [seq, id] : order) {
    const auto& row = table.at(*id);
    // Ranks by value: each class starts with its first rank's record.
    std::vector<std::pair<const log::Record*, std::vector<std::int32_t>>> classes;
    bool structure = false;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const log::Record* r = row[i];
      bool placed = false;
      for (auto& [rep, members] : classes) {
        const bool equal = (rep == nullptr || r == nullptr) ? rep == r : same_value(*rep, *r, structure);
        if (equal) {
          members.push_back(ranks[i]);
          placed = true;
          break;
        }
      }
      if (!placed) classes.push_back({r, {ranks[i]}});
    }
    if (classes.size() == 1) continue;
    Departure d;
    d.group = g;
    d.step = step;
    d.seq = seq;
    d.scope = std::get<0>(*id);
    d.op = std::get<1>(*id);
    d.io = std::get<2>(*id);
    d.name = std::get<3>(*id);
    d.occurrence = std::get<4>(*id);
    // The op's calls, for the text (call_text): the table is ordered by
    // identity, so the record's later occurrences follow it.
    for (auto later = table.find(*id); later != table.end() && same_record(later->first, *id); ++later) {
      d.calls = std::get<4>(later->first) + 1;
    }
    const bool absent = std::any_of(classes.begin(), classes.end(), [](const auto& c) { return c.first == nullptr; });
    d.kind = (structure || absent) ? diff::Kind::structure : diff::Kind::value;
    auto biggest = std::max_element(classes.begin(), classes.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    if (biggest->second.size() * 2 > ranks.size()) {
      d.majority = true;
      std::rotate(classes.begin(), biggest, biggest + 1);
      for (std::size_t c = 1; c < classes.size(); ++c) {
        d.departing.insert(d.departing.end(), classes[c].second.begin(), classes[c].second.end());
      }
      std::sort(d.departing.begin(), d.departing.end());
    }
    for (const auto& [rep, members] : classes) {
      Variant v;
      v.ranks = members;
      if (rep != nullptr) {
        v.record = log::to_json(*rep);
        v.location = locate_(*rep);
      }
      d.variants.push_back(std::move(v));
    }
    return d;
  }
  return std::nullopt;
}

void ReplicaCheck::finish() {
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (auto& [step, pending] : groups_[g].steps) {
      std::vector<std::int32_t> missing;
      for (auto r : layout_.groups[g]) {
        if (!pending.ranks.contains(r)) missing.push_back(r);
      }
      partial_[rank_list(missing) + " of group " + std::to_string(g)].insert(step);
    }
    groups_[g].steps.clear();
  }
}

std::int64_t ReplicaCheck::settled_step() const {
  std::int64_t settled = INT64_MAX;
  for (const GroupState& g : groups_) settled = std::min(settled, g.last_compared);
  return groups_.empty() ? -1 : settled;
}

Report ReplicaCheck::report(const std::string& run) const {
  Report report;
  report.run = run;
  report.layout = layout_;
  for (const GroupState& g : groups_) {
    if (!g.first) continue;
    report.departures.push_back(*g.first);
    if (!report.first || g.first->step < report.first->step) report.first = *g.first;
  }
  if (!steps_compared_.empty()) {
    report.compared.first_step = steps_compared_.min();
    report.compared.last_step = steps_compared_.max();
    report.compared.steps = steps_compared_.size();
  }
  report.compared.records = records_;
  if (!ungrouped_.empty()) {
    report.notes.push_back(rank_list({ungrouped_.begin(), ungrouped_.end()}) +
                           " in no replica group, not compared");
  }
  for (const auto& [rank, steps] : unfinished_) {
    report.notes.push_back("rank " + std::to_string(rank) + ": step" + (steps.size() == 1 ? " " : "s ") +
                           steps.to_string() + " incomplete (no end record or a wrong count), excluded");
  }
  for (const auto& [who, steps] : partial_) {
    report.notes.push_back("step" + std::string(steps.size() == 1 ? " " : "s ") + steps.to_string() +
                           " not complete on " + who + ", not compared");
  }
  return report;
}

Result<Report> check_run(const std::string& run, const std::optional<std::string>& groups) {
  auto reader = log::RunReader::open(run);
  if (!reader) return reader.error();
  log::RunReader& r = **reader;
  Layout layout;
  auto declared = layout_from_header(r.header());
  if (!declared) return declared.error();
  if (groups) {
    auto parsed = parse_groups(*groups, r.world_size());
    if (!parsed) return parsed.error();
    if (*declared) layout.per_rank = (*declared)->per_rank;
    layout.groups = std::move(*parsed);
    layout.source = "--groups";
  } else if (*declared) {
    layout = std::move(**declared);
  } else {
    return Error{run + ": no replica groups: the header has no \"replicas\" field (dtrace-fp(5)); "
                       "name them with --groups (e.g. --groups 0-" +
                 std::to_string(r.world_size() - 1) + ")"};
  }
  ReplicaCheck check(layout, [&r](const log::Record& record) { return r.location(record); });
  {
    log::PrefetchReader prefetch(r);
    while (true) {
      auto next = prefetch.next();
      if (!next) return next.error();
      if (!*next) break;
      check.add(**next);
    }
  }
  check.finish();
  Report report = check.report(run);
  for (const std::string& n : r.notes()) report.notes.push_back(n);
  if (report.compared.steps == 0) {
    return Error{run + ": no step is complete on every rank of a replica group, nothing to compare" +
                 (report.notes.empty() ? std::string() : " (" + report.notes.front() + ")")};
  }
  return report;
}

}  // namespace dtrace::replicas
