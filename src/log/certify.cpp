#include "log/certify.hpp"

#include <map>
#include <memory>
#include <tuple>

#include "log/chain.hpp"
#include "log/reader.hpp"
#include "util/words.hpp"

namespace dtrace::log {

namespace {

// The log layer sits below fingerprint/, so it names the algorithm itself; the
// string is the file-format contract of dtrace-fp(5), not an implementation detail.
constexpr std::string_view kKnownHashAlgorithms[] = {"xxh3-64k/1"};

std::string rank_step(std::int32_t rank, std::int64_t step) {
  return "rank " + std::to_string(rank) + ", step " + std::to_string(step);
}

using Intervals = std::vector<IntervalSet::Interval>;

// Steps in `all` and not in `have`, walking both interval lists once. Built as
// intervals, not step by step: a gap may span millions of steps.
Intervals missing_steps(const IntervalSet& all, const IntervalSet& have) {
  Intervals missing;
  const auto& present = have.intervals();
  std::size_t h = 0;
  for (auto [first, last] : all.intervals()) {
    std::int64_t next = first;
    while (next <= last) {
      while (h < present.size() && present[h].second < next) ++h;
      if (h == present.size() || present[h].first > last) {
        missing.emplace_back(next, last);
        break;
      }
      if (present[h].first > next) missing.emplace_back(next, present[h].first - 1);
      if (present[h].second >= last) break;
      next = present[h].second + 1;
    }
  }
  return missing;
}

// "3", "0-9", "0-4,7,9-12", as IntervalSet::to_string writes it.
std::string intervals_text(const Intervals& intervals) {
  std::string out;
  for (auto [a, b] : intervals) {
    if (!out.empty()) out += ',';
    out += std::to_string(a);
    if (b != a) out += '-' + std::to_string(b);
  }
  return out;
}

std::uint64_t intervals_size(const Intervals& intervals) {
  std::uint64_t n = 0;
  for (auto [a, b] : intervals) n += static_cast<std::uint64_t>(b - a) + 1;
  return n;
}

// The keys of two JSON objects whose values differ, comma-separated.
std::string differing_keys(const nlohmann::json& a, const nlohmann::json& b) {
  std::string keys;
  auto add = [&](const std::string& key) {
    if (!keys.empty()) keys += ", ";
    keys += key;
  };
  for (const auto& [key, value] : a.items()) {
    if (!b.contains(key) || b.at(key) != value) add(key);
  }
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) add(key);
  }
  return keys;
}

std::string json_text(const nlohmann::json& v) {
  if (v.is_null()) return "(unset)";
  return v.dump();
}

bool same_identity(const Record& a, const Record& b) {
  return a.scope == b.scope && a.op == b.op && a.io == b.io && a.io_text == b.io_text &&
         a.name == b.name;
}

// Collects violations, listing at most kMaxListed of each kind.
class Collector {
 public:
  explicit Collector(Certification& out) : out_(out) {}

  void add(Violation v) {
    const auto index = static_cast<std::size_t>(v.kind);
    ++out_.counts[index];
    if (listed_[index] < Certification::kMaxListed) {
      ++listed_[index];
      out_.violations.push_back(std::move(v));
    }
  }

  // Violations known only by number (too many to be worth naming each).
  void count_unlisted(ViolationKind kind, std::uint64_t n) {
    out_.counts[static_cast<std::size_t>(kind)] += n;
  }

 private:
  Certification& out_;
  std::array<std::size_t, kViolationKinds> listed_{};
};

void check_headers(const RunReader& reader, Collector& collector) {
  const Header& first = reader.header();
  if (!is_known_hash_algorithm(first.hash)) {
    collector.add({ViolationKind::unknown_hash, std::nullopt, std::nullopt, first.file + ":1",
                   "hash algorithm \"" + first.hash +
                       "\" is not one this dtrace can recompute (known: xxh3-64k/1)"});
  }
  for (const Header& h : reader.headers()) {
    if (&h == &first) continue;
    for (const char* key : {"run", "level"}) {
      const auto a = first.raw.value(key, nlohmann::json());
      const auto b = h.raw.value(key, nlohmann::json());
      if (a != b) {
        collector.add({ViolationKind::header_mismatch, std::nullopt, std::nullopt, h.file + ":1",
                       std::string("header field '") + key + "' is " + json_text(b) + ", but " +
                           json_text(a) + " in " + first.file});
      }
    }
    // env and config default to empty objects, so "absent" and "{}" agree.
    for (auto [key, a, b] :
         {std::tuple{"env", &first.env, &h.env}, std::tuple{"config", &first.config, &h.config}}) {
      if (*a != *b) {
        collector.add({ViolationKind::header_mismatch, std::nullopt, std::nullopt, h.file + ":1",
                       std::string("header field '") + key + "' differs from " + first.file +
                           " (keys: " + differing_keys(*a, *b) + ")"});
      }
    }
  }
}

// The reader hands a step out sorted by seq (stable, so equal seqs keep their
// reading order): any two neighbours with the same seq break "strictly
// increasing". If they also share the identity fields it is one record written
// twice, which is what a replayed flush or a concatenated log produces.
void check_seq(const Step& step, const RunReader& reader, Collector& collector) {
  const auto& records = step.records;
  std::size_t group = 0;
  for (std::size_t i = 1; i < records.size(); ++i) {
    if (records[i].seq != records[group].seq) {
      group = i;
      continue;
    }
    const Record& r = records[i];
    const Record* twin = nullptr;
    for (std::size_t j = group; j < i; ++j) {
      if (same_identity(records[j], r)) {
        twin = &records[j];
        break;
      }
    }
    if (twin != nullptr) {
      collector.add({ViolationKind::duplicate_record, step.rank, step.step, reader.location(r),
                     rank_step(step.rank, step.step) + ": record seq " + std::to_string(r.seq) +
                         " " + describe(r) + " written twice (also at " + reader.location(*twin) +
                         ")"});
    } else {
      collector.add({ViolationKind::seq_not_increasing, step.rank, step.step, reader.location(r),
                     rank_step(step.rank, step.step) + ": seq " + std::to_string(r.seq) +
                         " used by two records: " + describe(records[group]) + " (" +
                         reader.location(records[group]) + ") and " + describe(r)});
    }
  }
}

// The record written last, by the rank's own order: where a crash stopped it.
const Record* last_record(const Step& step) {
  return step.records.empty() ? nullptr : &step.records.back();
}

void check_status(const Step& step, const RunReader& reader, Collector& collector) {
  const auto present = static_cast<std::int64_t>(step.records.size());
  const Record* first = step.records.empty() ? nullptr : &step.records.front();
  switch (step.status) {
    case StepStatus::complete: return;
    case StepStatus::incomplete: {
      const Record* last = last_record(step);
      collector.add({ViolationKind::incomplete_step, step.rank, step.step,
                     last != nullptr ? reader.location(*last) : std::string(),
                     rank_step(step.rank, step.step) + ": no end record after " +
                         plural(static_cast<std::int64_t>(present), "record", "records") +
                         " (crashed mid-step?)"});
      return;
    }
    case StepStatus::count_mismatch:
      collector.add({ViolationKind::count_mismatch, step.rank, step.step,
                     first != nullptr ? reader.location(*first) : std::string(),
                     rank_step(step.rank, step.step) + ": end record counts " +
                         std::to_string(step.declared_count) + ", " +
                         plural(static_cast<std::int64_t>(present), "record is", "records are") +
                         " present"});
      return;
    case StepStatus::late:
      // A second end record came: the step (or its end record) written again,
      // which is one duplicate-step, its records not also late (dtrace-fp(5)).
      if (step.declared_count >= 0) {
        collector.add({ViolationKind::duplicate_step, step.rank, step.step,
                       first != nullptr ? reader.location(*first) : std::string(),
                       rank_step(step.rank, step.step) + ": " +
                           (present == 0 ? std::string("ended twice: a second end record")
                                         : "written twice: " +
                                               plural(static_cast<std::int64_t>(present), "record", "records") +
                                               " and an end record") +
                           " after the step was complete"});
        return;
      }
      collector.add({ViolationKind::late_records, step.rank, step.step,
                     first != nullptr ? reader.location(*first) : std::string(),
                     rank_step(step.rank, step.step) + ": " +
                         plural(static_cast<std::int64_t>(present), "record", "records") +
                         " after the end record had already counted the step complete"});
      return;
  }
}

// A chain is a claim about the records: a recorder that got it wrong would
// let a diff that trusts chains skip a real divergence, so it is a violation.
// The chains are checked in each rank's step order (log::ChainVerifier), so
// any valid layout of a run checks alike; this turns what it found into
// violations and notes.
class ChainReport {
 public:
  ChainReport(const RunReader& reader, Collector& collector) : reader_(reader), collector_(collector) {}

  void add(std::vector<ChainFinding>& found) {
    for (const ChainFinding& f : found) add(f);
    found.clear();
  }

  // The resumed segments (no violation), at most kMaxListed of them named.
  std::vector<std::string> notes() const {
    std::vector<std::string> out = notes_;
    if (resumed_ > notes_.size()) {
      out.push_back(plural(static_cast<std::int64_t>(resumed_ - notes_.size()), "more resumed segment",
                           "more resumed segments") +
                    " not listed");
    }
    return out;
  }

 private:
  std::string where(const ChainFinding& f) const {
    return f.line == 0 ? std::string() : reader_.files().at(f.file) + ":" + std::to_string(f.line);
  }

  static std::string chained_to(const ChainFinding& f) {
    if (!f.previous_step) return "chained to 0: no earlier step";
    return "chained to step " + std::to_string(*f.previous_step) + "'s " + chain_hex(f.previous);
  }

  void add(const ChainFinding& f) {
    const std::string at = rank_step(f.rank, f.step);
    const std::string before = f.previous_step ? "step " + std::to_string(*f.previous_step) : std::string();
    switch (f.kind) {
      case ChainFinding::Kind::mismatch:
        collector_.add({ViolationKind::chain_mismatch, f.rank, f.step, where(f),
                        at + ": end record's chain " + chain_hex(f.logged) + " is not the " + chain_hex(f.expected) +
                            " its records give (" + chained_to(f) + ")"});
        return;
      case ChainFinding::Kind::misplaced:
        collector_.add({ViolationKind::chain_mismatch, f.rank, f.step, where(f),
                        at + ": end record's chain " + chain_hex(f.logged) + " is its records' chained to " +
                            chain_hex(f.matched_from) + ", not to its closest earlier step, " + before + " (" +
                            chain_hex(f.previous) + "), read after it"});
        return;
      case ChainFinding::Kind::gap:
        collector_.add({ViolationKind::chain_gap, f.rank, f.step, where(f),
                        at + ": end record carries no chain, after chained steps: the chains after it start anew "
                             "and vouch for nothing before it (a diff that searches chains cannot see it)"});
        return;
      case ChainFinding::Kind::restart:
        collector_.add({ViolationKind::chain_gap, f.rank, f.step, where(f),
                        at + ": its chain starts anew at 0 in the file of its closest earlier step, " + before +
                            ", which is chained: the chains from it on vouch for nothing before it (a diff that "
                            "searches chains cannot see it)"});
        return;
      case ChainFinding::Kind::resumed:
        if (++resumed_ <= Certification::kMaxListed) {
          notes_.push_back("rank " + std::to_string(f.rank) + ": the chains start anew at step " +
                           std::to_string(f.step) + " (" + where(f) + "), in another file than its closest earlier " +
                           before + ": a resumed segment; its chains vouch for nothing before it");
        }
        return;
    }
  }

  const RunReader& reader_;
  Collector& collector_;
  std::vector<std::string> notes_;
  std::uint64_t resumed_ = 0;
};

// A line number is a claim a searched diff names records by (dtrace-fp(5),
// field `line`): one that is not the end record's own line would name the
// wrong lines, so it is a violation like a wrong chain.
void check_line(const Step& step, const RunReader& reader, Collector& collector) {
  if (!step.logged_line || step.end_line == 0 || *step.logged_line == step.end_line) return;
  const std::string where = step.records.empty()
                                ? std::string()
                                : reader.files().at(step.records.front().file) + ":" + std::to_string(step.end_line);
  collector.add({ViolationKind::line_mismatch, step.rank, step.step, where,
                 rank_step(step.rank, step.step) + ": end record says it is line " +
                     std::to_string(*step.logged_line) + ", it is line " + std::to_string(step.end_line)});
}

// Ranks 0..world_size-1 without a single line. world_size comes from a header
// and may be large, so the walk stops listing (but not counting) early.
void check_ranks(const std::map<std::int32_t, IntervalSet>& rank_steps, std::int64_t world_size,
                 const std::string& path, Collector& collector) {
  std::int64_t absent_listed = 0;
  for (std::int64_t rank = 0; rank < world_size; ++rank) {
    if (rank_steps.contains(static_cast<std::int32_t>(rank))) continue;
    if (absent_listed == static_cast<std::int64_t>(Certification::kMaxListed)) {
      // Count the rest without walking them one by one.
      std::int64_t present_above = 0;
      for (const auto& [r, steps] : rank_steps) present_above += r >= rank ? 1 : 0;
      const std::int64_t rest = world_size - rank - present_above;
      collector.count_unlisted(ViolationKind::rank_absent, static_cast<std::uint64_t>(rest));
      return;
    }
    ++absent_listed;
    collector.add({ViolationKind::rank_absent,
                   static_cast<std::int32_t>(rank),
                   std::nullopt,
                   {},
                   "rank " + std::to_string(rank) + " of world_size " + std::to_string(world_size) +
                       " has no records in " + path});
  }
}

void check_step_sets(const std::map<std::int32_t, IntervalSet>& rank_steps,
                     const IntervalSet& all_steps, Collector& collector) {
  for (const auto& [rank, steps] : rank_steps) {
    const Intervals missing = missing_steps(all_steps, steps);
    if (missing.empty()) continue;
    collector.add({ViolationKind::steps_differ,
                   rank,
                   missing.front().first,
                   {},
                   "rank " + std::to_string(rank) + " lacks " +
                       plural(static_cast<std::int64_t>(intervals_size(missing)), "step", "steps") + " (" +
                       intervals_text(missing) + ") that other ranks have"});
  }
}

}  // namespace

std::string_view violation_name(ViolationKind kind) {
  switch (kind) {
    case ViolationKind::rank_absent: return "rank-absent";
    case ViolationKind::steps_differ: return "steps-differ";
    case ViolationKind::seq_not_increasing: return "seq-not-increasing";
    case ViolationKind::duplicate_record: return "duplicate-record";
    case ViolationKind::incomplete_step: return "incomplete-step";
    case ViolationKind::count_mismatch: return "count-mismatch";
    case ViolationKind::late_records: return "late-records";
    case ViolationKind::header_mismatch: return "header-mismatch";
    case ViolationKind::unknown_hash: return "unknown-hash";
    case ViolationKind::chain_mismatch: return "chain-mismatch";
    case ViolationKind::line_mismatch: return "line-mismatch";
    case ViolationKind::chain_gap: return "chain-gap";
    case ViolationKind::duplicate_step: return "duplicate-step";
  }
  return "unknown";
}

std::uint64_t Certification::total_violations() const {
  std::uint64_t total = 0;
  for (std::uint64_t n : counts) total += n;
  return total;
}

bool is_known_hash_algorithm(std::string_view name) {
  for (std::string_view known : kKnownHashAlgorithms) {
    if (name == known) return true;
  }
  return false;
}

Result<Certification> certify_run(const std::string& path) {
  auto opened = RunReader::open(path);
  if (!opened) return opened.error();
  RunReader& reader = **opened;

  Certification out;
  out.path = path;
  out.world_size = reader.world_size();
  out.hash = reader.hash_algorithm();
  out.files = reader.files();
  Collector collector(out);
  check_headers(reader, collector);

  std::map<std::int32_t, IntervalSet> rank_steps;
  ChainVerifier chains;
  ChainReport chain_report(reader, collector);
  std::vector<ChainFinding> found;
  while (true) {
    auto next = reader.next();
    if (!next) return next.error();
    if (!*next) break;
    const Step& step = **next;
    rank_steps[step.rank].insert(step.step);
    out.steps.insert(step.step);
    out.records += step.records.size();
    check_seq(step, reader, collector);
    check_status(step, reader, collector);
    chains.add(step, found);
    chain_report.add(found);
    check_line(step, reader, collector);
  }
  chains.finish(found);
  chain_report.add(found);
  out.ranks_present = static_cast<std::int64_t>(rank_steps.size());
  check_ranks(rank_steps, out.world_size, path, collector);
  check_step_sets(rank_steps, out.steps, collector);
  out.notes = reader.notes();
  for (auto& note : chain_report.notes()) out.notes.push_back(std::move(note));
  return out;
}

}  // namespace dtrace::log
