#include "diff/diff.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "diff/align.hpp"
#include "diff/bytes.hpp"
#include "diff/classify.hpp"
#include "diff/divergence.hpp"
#include "diff/header.hpp"
#include "diff/notes.hpp"
#include "diff/search.hpp"
#include "log/intern.hpp"
#include "log/prefetch.hpp"
#include "log/reader.hpp"
#include "util/intervals.hpp"

namespace dtrace::diff {

using log::Step;
using log::StepStatus;

std::string_view kind_name(Kind kind) { return kind == Kind::value ? "value" : "structure"; }

std::string_view role_name(Role role) {
  switch (role) {
    case Role::origin: return "origin";
    case Role::receiver: return "receiver";
    case Role::unknown: break;
  }
  return "unknown";
}

std::string_view match_name(Match match) {
  switch (match) {
    case Match::matched: return "matched";
    case Match::differs: return "differs";
    case Match::a_only: return "a-only";
    case Match::b_only: break;
  }
  return "b-only";
}

std::optional<std::uint64_t> ulp_distance(const log::Digest& a, const log::Digest& b,
                                          std::string_view dtype) {
  if (a.digits != b.digits || a.high != 0 || b.high != 0) return std::nullopt;
  int bits;
  switch (a.digits) {
    case 4: bits = 16; break;
    case 8: bits = 32; break;
    case 16: bits = 64; break;
    default: return std::nullopt;
  }
  const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  const std::uint64_t magnitude_mask = sign - 1;
  // Exponent all ones with a nonzero mantissa is NaN. bf16 shares f32's 8-bit
  // exponent; f16 has a 5-bit one, so 7c01..7fff are NaNs only there.
  const bool f16 = dtype == "f16" || dtype == "float16" || dtype == "half";
  auto is_nan = [&](std::uint64_t v) {
    const std::uint64_t m = v & magnitude_mask;
    switch (bits) {
      case 16:
        if (f16) return (m & 0x7c00) == 0x7c00 && (m & 0x03ff) != 0;
        return (m & 0x7f80) == 0x7f80 && (m & 0x007f) != 0;
      case 32: return (m & 0x7f800000u) == 0x7f800000u && (m & 0x007fffffu) != 0;
      default:
        return (m & 0x7ff0000000000000ull) == 0x7ff0000000000000ull &&
               (m & 0x000fffffffffffffull) != 0;
    }
  };
  if (is_nan(a.low) || is_nan(b.low)) return std::nullopt;
  // Map sign-magnitude onto a line where neighbours differ by one: -0 and +0
  // are then one unit apart, as their bit patterns are distinct.
  auto ordered = [&](std::uint64_t v) -> __int128 {
    const __int128 m = static_cast<__int128>(v & magnitude_mask);
    return (v & sign) ? -m - 1 : m;
  };
  const __int128 d = ordered(a.low) - ordered(b.low);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

Mismatch describe_mismatch(const Step& a, const Step& b, const MismatchAt& at, const Classification& c,
                           std::string a_location, std::string b_location) {
  Mismatch m;
  const log::Record* rec_a = at.a >= 0 ? &a.records[static_cast<std::size_t>(at.a)] : nullptr;
  const log::Record* rec_b = at.b >= 0 ? &b.records[static_cast<std::size_t>(at.b)] : nullptr;
  const log::Record& r = rec_a != nullptr ? *rec_a : *rec_b;
  m.rank = a.rank;
  m.step = a.step;
  m.seq = r.seq;
  m.scope = r.scope;
  m.op = r.op;
  m.io = r.io_text;
  m.name = r.name;
  m.occurrence = rec_a != nullptr ? occurrence_of(a, static_cast<std::size_t>(at.a))
                                  : occurrence_of(b, static_cast<std::size_t>(at.b));
  m.calls = rec_a != nullptr ? calls_of(a, static_cast<std::size_t>(at.a)) : calls_of(b, static_cast<std::size_t>(at.b));
  m.kind = at.kind;
  m.role = c.role;
  m.generator = c.generator;
  m.detail = at.detail;
  if (rec_a != nullptr) {
    m.a = log::to_json(*rec_a);
    m.a_location = std::move(a_location);
  }
  if (rec_b != nullptr) {
    m.b = log::to_json(*rec_b);
    m.b_location = std::move(b_location);
  }
  if (rec_a != nullptr && rec_b != nullptr && rec_a->scalar && rec_b->scalar &&
      rec_a->dtype == rec_b->dtype && at.kind == Kind::value) {
    m.ulp = ulp_distance(rec_a->digest, rec_b->digest, rec_a->dtype);
  }
  return m;
}

namespace {

// One run's side of the comparison.
struct Side {
  char name = 'A';
  std::unique_ptr<log::RunReader> reader;
  std::unique_ptr<log::PrefetchReader> prefetch;
  bool done = false;
  std::map<std::int32_t, std::map<std::int64_t, Step>> pending;  // complete, waiting for the other run
  std::size_t pending_count = 0;
  std::map<std::int32_t, std::int64_t> max_yielded;
  std::set<std::int32_t> out_of_order;  // ranks whose steps arrived out of step order
  std::map<std::int32_t, IntervalSet> one_sided;   // complete here, not in the other run
  std::map<std::int32_t, IntervalSet> unfinished;  // incomplete (or miscounted) here
  std::map<std::int32_t, IntervalSet> late;  // records after the step was complete and compared
  std::set<std::int32_t> ranks;
};

// A rank's records at its first mismatch, kept while that rank may still turn
// out to be the run's first divergence.
struct StripCandidate {
  std::int64_t step = 0;
  int precedence = 0;
  std::int32_t rank = 0;
  std::vector<StepRecord> records;
};

// Few ranks' strips are held: most runs diverge on every rank at one step, and
// a strip is a whole step of records.
constexpr std::size_t kStripCandidates = 8;

struct Comparison {
  Side a, b;
  std::vector<StripCandidate> strips;  // best first by (step, precedence, rank)
  std::map<std::int32_t, RankFirst> firsts;
  std::map<std::int64_t, std::set<std::string>> collective_inputs_differing;
  IntervalSet steps_compared;
  std::set<std::int32_t> ranks_compared;
  std::uint64_t records = 0;
  // The run recorded at the finer level ('A' or 'B'), 0 when the levels agree
  // (or one is unknown); its in/out records the other level does not write
  // are left out of the comparison, and counted.
  char finer = 0;
  std::uint64_t finer_only = 0;
  StepWindow window;  // --steps: steps outside it are neither compared nor reported
  // Shared prefixes were skipped (diff/bytes.hpp): what the report says is
  // then only exact while every rank's steps arrive in order and nothing
  // goes wrong (see ReadWithoutSkipping).
  bool skipping = false;
  // Of those, the ones the chains vouched for (diff/search.hpp): their ranks
  // and steps.
  std::int64_t vouched_ranks = 0, vouched_steps = 0;
};

// Thrown inside the loop when an early decision ("A's step s has no partner")
// is contradicted by input that arrived out of order; diff_runs then reads
// again without early decisions.
struct ReadAgain {};

// Thrown when a diff that skipped shared prefixes meets what it cannot
// reproduce exactly without reading them: a rank's steps out of order (the
// early decisions above, and the note of reading again, depend on the order
// both runs' steps came in, which skipping changes), an error (which of
// several the report names depends on that order too), or a skipped rank's
// records in another file (RunReader::prefix_contradicted). diff_runs then
// reads both runs in full, exactly as without the byte stage.
struct ReadWithoutSkipping {};

Mismatch describe(const Step& a, const Step& b, const MismatchAt& at, const Classification& c,
                  const log::RunReader& ra, const log::RunReader& rb) {
  auto where = [](const Step& step, std::ptrdiff_t i, const log::RunReader& reader) {
    return i >= 0 ? reader.location(step.records[static_cast<std::size_t>(i)]) : std::string();
  };
  return describe_mismatch(a, b, at, c, where(a, at.a, ra), where(b, at.b, rb));
}

std::vector<StepRecord> strip_of(const Step& a, const Step& b, const log::RunReader& ra,
                                 const log::RunReader& rb) {
  return step_strip(a, b, [&](const log::Record& r, char side) { return side == 'A' ? ra.location(r) : rb.location(r); });
}

void keep_strip(Comparison& cmp, const Step& a, const Step& b, Role role) {
  std::erase_if(cmp.strips, [&](const StripCandidate& c) { return c.rank == a.rank; });
  auto key = [](const StripCandidate& c) { return std::tuple(c.step, c.precedence, c.rank); };
  const StripCandidate probe{a.step, role_precedence(role), a.rank, {}};
  if (cmp.strips.size() >= kStripCandidates && !(key(probe) < key(cmp.strips.back()))) return;
  StripCandidate c = probe;
  c.records = strip_of(a, b, *cmp.a.reader, *cmp.b.reader);
  auto at = std::upper_bound(cmp.strips.begin(), cmp.strips.end(), c,
                             [&](const StripCandidate& x, const StripCandidate& y) { return key(x) < key(y); });
  cmp.strips.insert(at, std::move(c));
  if (cmp.strips.size() > kStripCandidates) cmp.strips.pop_back();
}

void compare(Comparison& cmp, const Step& a_read, const Step& b_read) {
  std::optional<Step> common;
  if (cmp.finer == 'A') common = common_records(a_read, b_read, cmp.finer_only);
  if (cmp.finer == 'B') common = common_records(b_read, a_read, cmp.finer_only);
  const Step& a = cmp.finer == 'A' ? *common : a_read;
  const Step& b = cmp.finer == 'B' ? *common : b_read;
  const StepComparison result = compare_step(a, b);
  cmp.records += result.records;
  cmp.steps_compared.insert(a.step);
  cmp.ranks_compared.insert(a.rank);
  if (!result.first) return;
  if (!result.collective_inputs_differing.empty()) {
    auto& keys = cmp.collective_inputs_differing[a.step];
    keys.insert(result.collective_inputs_differing.begin(), result.collective_inputs_differing.end());
  }
  auto it = cmp.firsts.find(a.rank);
  if (it != cmp.firsts.end() && it->second.mismatch.step <= a.step) return;
  const Classification c = classify(a, b, *result.first);
  cmp.firsts[a.rank] = RankFirst{describe(a, b, *result.first, c, *cmp.a.reader, *cmp.b.reader),
                                 c.collective};
  keep_strip(cmp, a, b, c.role);
}

// Takes one step from side x and pairs it with side y's, or keeps it waiting.
void take(Comparison& cmp, Side& x, Side& y, Step step, bool early_decisions) {
  const std::int32_t rank = step.rank;
  x.ranks.insert(rank);
  if (!cmp.window.contains(step.step)) return;
  if (step.status != StepStatus::complete) {
    (step.status == StepStatus::late ? x.late : x.unfinished)[rank].insert(step.step);
    return;
  }
  auto [max_it, first_time] = x.max_yielded.try_emplace(rank, step.step);
  if (!first_time) {
    if (step.step < max_it->second) {
      if (cmp.skipping) throw ReadWithoutSkipping{};
      x.out_of_order.insert(rank);
      auto decided = y.one_sided.find(rank);
      if (decided != y.one_sided.end() && decided->second.contains(step.step)) throw ReadAgain{};
    } else {
      max_it->second = step.step;
    }
  }
  auto& waiting = y.pending[rank];
  if (auto match = waiting.find(step.step); match != waiting.end()) {
    const Step& a = x.name == 'A' ? step : match->second;
    const Step& b = x.name == 'A' ? match->second : step;
    compare(cmp, a, b);
    // Their record storage goes back to the readers, for the steps to come.
    y.prefetch->recycle(std::move(match->second));
    x.prefetch->recycle(std::move(step));
    waiting.erase(match);
    --y.pending_count;
  } else {
    x.pending[rank].emplace(step.step, std::move(step));
    ++x.pending_count;
  }
  // Side x has moved past these steps of y in step order, so (while x stays in
  // order) it will never produce them: y's are one-sided and need not be held.
  if (early_decisions && !x.out_of_order.contains(rank)) {
    const std::int64_t passed = x.max_yielded[rank];
    while (!waiting.empty() && waiting.begin()->first < passed) {
      y.one_sided[rank].insert(waiting.begin()->first);
      waiting.erase(waiting.begin());
      --y.pending_count;
    }
  }
}

Result<void> read_both(Comparison& cmp, bool early_decisions) {
  while (!cmp.a.done || !cmp.b.done) {
    const bool pick_a = cmp.b.done || (!cmp.a.done && cmp.a.pending_count <= cmp.b.pending_count);
    Side& x = pick_a ? cmp.a : cmp.b;
    Side& y = pick_a ? cmp.b : cmp.a;
    auto next = x.prefetch->next();
    if (!next) return next.error();
    if (!*next) {
      x.done = true;
      continue;
    }
    take(cmp, x, y, std::move(**next), early_decisions);
  }
  for (Side* side : {&cmp.a, &cmp.b}) {
    for (auto& [rank, steps] : side->pending) {
      for (auto& [step, records] : steps) side->one_sided[rank].insert(step);
    }
    side->pending.clear();
  }
  return {};
}

// Counts the shared prefixes' steps as compared and equal, and has the
// readers start after them: what reading and comparing them would give, as
// both runs' steps there are the same bytes.
void skip_shared_prefixes(Comparison& cmp, bool by_bytes, const std::vector<SharedPrefix>& vouched) {
  std::vector<SharedPrefix> prefixes =
      by_bytes ? shared_prefixes(*cmp.a.reader, *cmp.b.reader, cmp.window, vouched) : vouched;
  for (const SharedPrefix& p : prefixes) {
    if (p.by_chains) {
      ++cmp.vouched_ranks;
      cmp.vouched_steps += p.steps.size();
    }
    cmp.a.reader->skip_prefix(p.file_a, p.end_a, p.rank, p.steps);
    cmp.b.reader->skip_prefix(p.file_b, p.end_b, p.rank, p.steps);
    cmp.skipping = true;
    for (Side* side : {&cmp.a, &cmp.b}) {
      side->ranks.insert(p.rank);
      if (!p.in_window.empty()) side->max_yielded[p.rank] = p.in_window.max();
    }
    if (p.in_window.empty()) continue;
    for (auto [lo, hi] : p.in_window.intervals()) cmp.steps_compared.insert_range(lo, hi);
    cmp.ranks_compared.insert(p.rank);
    cmp.records += p.records;
  }
}

Result<Report> diff_once(const std::string& run_a, const std::string& run_b, const StepWindow& window,
                         bool early_decisions, bool skip_shared, const std::vector<SharedPrefix>& vouched,
                         const std::string& why_read) {
  Comparison cmp;
  cmp.window = window;
  cmp.a.name = 'A';
  cmp.b.name = 'B';
  // One intern table for both runs: the same scope, op or name is then the
  // same pointer on both sides, which is most of comparing two records.
  auto intern = std::make_shared<log::Intern>();
  auto ra = log::RunReader::open(run_a, {}, intern);
  if (!ra) return ra.error();
  auto rb = log::RunReader::open(run_b, {}, intern);
  if (!rb) return rb.error();
  cmp.a.reader = std::move(*ra);
  cmp.b.reader = std::move(*rb);
  const log::Header& ha = cmp.a.reader->header();
  const log::Header& hb = cmp.b.reader->header();
  if (ha.hash != hb.hash) {
    return Error{"runs cannot be compared: " + run_a + " fingerprints with \"" + ha.hash + "\", " +
                 run_b + " with \"" + hb.hash + "\""};
  }
  if (ha.world_size != hb.world_size) {
    return Error{"runs cannot be compared: " + run_a + " has world_size " +
                 std::to_string(ha.world_size) + ", " + run_b + " has " + std::to_string(hb.world_size)};
  }
  // A finer re-run against a coarser baseline: compare what both levels record.
  const auto order_a = level_order(ha.level), order_b = level_order(hb.level);
  if (order_a && order_b && *order_a != *order_b) cmp.finer = *order_a > *order_b ? 'A' : 'B';
  // Runs of different levels compare only some records: bytes cannot say
  // (nor chains, which the search does not use then).
  if (cmp.finer == 0 && (skip_shared || !vouched.empty())) skip_shared_prefixes(cmp, skip_shared, vouched);
  cmp.a.prefetch = std::make_unique<log::PrefetchReader>(*cmp.a.reader);
  cmp.b.prefetch = std::make_unique<log::PrefetchReader>(*cmp.b.reader);
  auto read = read_both(cmp, early_decisions);
  cmp.a.prefetch.reset();  // the readers are ours again
  cmp.b.prefetch.reset();
  if (!read && cmp.skipping) throw ReadWithoutSkipping{};
  if (!read) return read.error();

  Report report;
  report.run_a = run_a;
  report.run_b = run_b;
  report.searched = cmp.vouched_ranks > 0;
  compare_headers(ha, hb, report);
  if (cmp.finer != 0) {
    const char coarser = cmp.finer == 'A' ? 'B' : 'A';
    const std::string& fine_level = cmp.finer == 'A' ? ha.level : hb.level;
    const std::string& coarse_level = cmp.finer == 'A' ? hb.level : ha.level;
    report.notes.push_back(
        std::string("run ") + cmp.finer + " was recorded at level " + fine_level + ", run " + coarser +
        " at level " + coarse_level + ": only the records both levels write are compared (" +
        std::to_string(cmp.finer_only) + " in/out records that only " + cmp.finer +
        "'s finer level writes were left out)");
  }
  for (const std::string& n : cmp.a.reader->notes()) report.notes.push_back("run A: " + n);
  for (const std::string& n : cmp.b.reader->notes()) report.notes.push_back("run B: " + n);

  // Steps not compared, and why.
  std::map<std::int32_t, IntervalSet> only_a, only_b, unfinished_a, unfinished_b;
  for (auto& [rank, steps] : cmp.a.one_sided) {
    for (auto [lo, hi] : steps.intervals()) {
      for (auto s = lo; s <= hi; ++s) {
        if (cmp.b.unfinished[rank].contains(s)) continue;
        only_a[rank].insert(s);
      }
    }
  }
  for (auto& [rank, steps] : cmp.b.one_sided) {
    for (auto [lo, hi] : steps.intervals()) {
      for (auto s = lo; s <= hi; ++s) {
        if (cmp.a.unfinished[rank].contains(s)) continue;
        only_b[rank].insert(s);
      }
    }
  }
  note_step_sets(report.notes, only_a, "only in run A, not compared");
  note_step_sets(report.notes, only_b, "only in run B, not compared");
  note_step_sets(report.notes, cmp.a.unfinished, "incomplete in run A (no end record or a wrong count), excluded");
  note_step_sets(report.notes, cmp.b.unfinished, "incomplete in run B (no end record or a wrong count), excluded");
  note_step_sets(report.notes, cmp.a.late, "of run A: records after the step's end record (a file twice?), ignored");
  note_step_sets(report.notes, cmp.b.late, "of run B: records after the step's end record (a file twice?), ignored");
  for (auto [side, other, label] : {std::tuple{&cmp.a, &cmp.b, "A"}, std::tuple{&cmp.b, &cmp.a, "B"}}) {
    std::vector<std::int32_t> lonely;
    for (auto rank : side->ranks) {
      if (!other->ranks.contains(rank)) lonely.push_back(rank);
    }
    if (!lonely.empty()) report.notes.push_back(rank_list(lonely) + " only in run " + label + ", not compared");
  }
  if (cmp.vouched_ranks > 0) {
    report.notes.push_back("searched by chained step digests (dtrace-fp(5)), then read record by record from where "
                           "each rank's chains stop vouching (" + why_read + "): " +
                           std::to_string(cmp.vouched_steps) + " steps on " + std::to_string(cmp.vouched_ranks) +
                           (cmp.vouched_ranks == 1 ? " rank" : " ranks") +
                           " known equal by their chains, not read; `dtrace check` verifies every chain, "
                           "`dtrace diff --stream` reads every record");
  }

  if (cmp.steps_compared.empty()) {
    return Error{"runs cannot be compared: " + run_a + " and " + run_b +
                 " have no complete step in common (" +
                 (report.notes.empty() ? std::string("no steps") : report.notes.front()) + ")"};
  }
  report.compared.first_step = cmp.steps_compared.min();
  report.compared.last_step = cmp.steps_compared.max();
  report.compared.steps = cmp.steps_compared.size();
  report.compared.ranks = static_cast<std::int64_t>(cmp.ranks_compared.size());
  report.compared.records = cmp.records;

  Divergence divergence = first_divergence(cmp.firsts, cmp.collective_inputs_differing);
  report.ranks = std::move(divergence.ranks);
  report.first = std::move(divergence.first);
  if (report.first) {
    for (StripCandidate& c : cmp.strips) {
      if (c.rank == report.first->rank && c.step == report.first->step) report.first_step = std::move(c.records);
    }
  }
  return report;
}

// `vouched`: prefixes the chains vouch for (SearchOutcome::prefixes), skipped
// like the byte stage's; whatever makes the diff read again drops them too.
Result<Report> stream_diff(const std::string& run_a, const std::string& run_b, const StepWindow& window,
                           bool skip_shared, const std::vector<SharedPrefix>& vouched, const std::string& why) {
  try {
    try {
      return diff_once(run_a, run_b, window, /*early_decisions=*/true, skip_shared, vouched, why);
    } catch (const ReadWithoutSkipping&) {
      return diff_once(run_a, run_b, window, /*early_decisions=*/true, /*skip_shared=*/false, {}, {});
    }
  } catch (const ReadAgain&) {
    auto report = diff_once(run_a, run_b, window, /*early_decisions=*/false, /*skip_shared=*/false, {}, {});
    if (report) report->notes.push_back("steps arrived out of order; both runs were read again holding every step");
    return report;
  }
}

}  // namespace

Result<Report> diff_runs(const std::string& run_a, const std::string& run_b, const DiffOptions& options) {
  std::string fallback;
  std::vector<SharedPrefix> vouched;
  if (!options.stream) {
    SearchOutcome searched = search_diff(run_a, run_b, options.steps);
    if (searched.report) return std::move(*searched.report);
    fallback = std::move(searched.fallback);
    vouched = std::move(searched.prefixes);
  }
  auto report = stream_diff(run_a, run_b, options.steps, !options.read_shared, vouched, fallback);
  if (report && !fallback.empty() && !report->searched) {
    report->notes.push_back("chained digests not searched, both runs read in full: " + fallback);
  }
  return report;
}

}  // namespace dtrace::diff
