// The search diff: each rank's first differing step found by binary search
// over its chained step digests (dtrace-fp(5), "Chained step digest" and
// "Finding a step"), then that step read and compared as the streaming diff
// compares it. Equal chains at step S mean equal compared records at every
// step up to S, so a rank whose last chains agree is not read at all.
//
// The search answers only when it can answer exactly what the streaming diff
// would; anything it cannot vouch for from the few lines it reads (a run that
// starts or ends at another step, a truncated or incomplete last step, a
// step without a chain, a chain that does not match its records, files not
// one per rank) is a fallback with a reason, and diff reads everything.
#include "diff/search.hpp"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "diff/align.hpp"
#include "diff/classify.hpp"
#include "diff/divergence.hpp"
#include "diff/header.hpp"
#include "log/chain.hpp"
#include "log/intern.hpp"
#include "log/reader.hpp"
#include "log/seek.hpp"
#include "util/intervals.hpp"
#include "util/parallel.hpp"

namespace dtrace::diff {

namespace {

using log::RankFile;
using log::SeekLine;
using log::Step;
using log::StepStatus;

// One rank's result.
struct RankSearch {
  std::int32_t rank = 0;
  std::string fallback;  // non-empty: this rank needs the full read, and why
  bool no_chains = false;  // neither run's last step carries a chain
  bool untrusted = false;  // a chain that does not match its records: no chain is trusted
  std::int64_t first_step = 0, last_step = -1;  // the steps compared
  std::uint64_t records = 0;
  std::int64_t steps_read = 0;
  std::optional<Mismatch> first;
  std::optional<std::int64_t> differs_at;  // the first step whose chains differ, once found
  bool first_steps_vouched = false;  // both first steps chained and numbered (first_steps_vouched)
  std::string collective;  // Classification::collective of the first mismatch
  std::set<std::string> collective_inputs_differing;  // at first->step
  std::uint64_t bytes_read = 0;
};

// Paths of a run's files by the rank their first record names.
struct RankFiles {
  std::map<std::int32_t, std::string> files;
  std::map<std::int32_t, std::uint32_t> index;  // into RunReader::files()
  std::string problem;

  // Rank `rank`'s file, opened for one use. Each use opens it again rather
  // than thousands of files staying open between the stages: holding 8,192
  // files' pages and parsers cost more (memory 4x, time 1.6x at 4,096 ranks,
  // tools/bench/RESULTS.md) than opening them twice.
  Result<std::unique_ptr<RankFile>> open(std::int32_t rank, const std::shared_ptr<log::Intern>& intern) const {
    return RankFile::open(files.at(rank), index.at(rank), intern);
  }
};

std::string side_name(char side) { return std::string("run ") + side; }

// What the last line before the first line of step s+1 says: the end record of
// the last step <= s (nullopt: no step <= s), or an anomaly.
struct Probe {
  std::optional<std::int64_t> step;
  std::optional<std::uint64_t> chain;
  std::string anomaly;
};

Probe probe(RankFile& file, std::int64_t s, std::int32_t rank, char side) {
  Probe p;
  auto at = file.lower_bound(s + 1);
  if (!at) return Probe{{}, {}, at.error().message};
  // At the end of the file, the last whole line (a crash may have cut the one after).
  auto line = *at == file.size() ? file.last_whole_line() : file.line_before(*at);
  if (!line) return Probe{{}, {}, line.error().message};
  if (!*line) return p;
  const SeekLine& l = **line;
  if (l.rank() != rank) {
    p.anomaly = file.path() + " holds rank " + std::to_string(l.rank()) + " besides rank " + std::to_string(rank);
  } else if (!l.end_record()) {
    p.anomaly = side_name(side) + " rank " + std::to_string(rank) + " step " + std::to_string(l.step()) +
                " has no end record";
  } else if (!l.parsed.chain) {
    p.anomaly = side_name(side) + " rank " + std::to_string(rank) + " step " + std::to_string(l.step()) +
                " carries no chain";
  } else {
    p.step = l.step();
    p.chain = l.parsed.chain;
  }
  return p;
}

// 1: both runs' chains agree at their last step <= s, 0: they differ, -1: an
// anomaly (in `why`).
int agree(RankFile& a, RankFile& b, std::int64_t s, std::int32_t rank, std::string& why) {
  const Probe pa = probe(a, s, rank, 'A');
  const Probe pb = probe(b, s, rank, 'B');
  if (!pa.anomaly.empty() || !pb.anomaly.empty()) {
    why = !pa.anomaly.empty() ? pa.anomaly : pb.anomaly;
    return -1;
  }
  if (pa.step != pb.step) {
    why = "rank " + std::to_string(rank) + ": the runs' last steps up to " + std::to_string(s) +
          " differ (a step present in one run only)";
    return -1;
  }
  if (!pa.step) return 1;  // no step up to s on either side
  return *pa.chain == *pb.chain ? 1 : 0;
}

// Step s of one side as the streaming reader would hand it out, its records
// named by line number: counted on from the line number of the line before
// the step (the previous step's end record's `line`, dtrace-fp(5); 1, the
// header, when the step is the file's first) and cross-checked against the
// step's own end record. `chain_prev` is the previous end record's chain (0
// for none). `why` says what cannot be vouched for.
struct Read {
  Step step;
  std::uint64_t end = 0;  // where the line after the step starts
  std::uint64_t chain_prev = 0;
  std::string unnumbered;  // non-empty: why its records have no line numbers
};

Result<Read> read_at(RankFile& file, std::int64_t s, char side, std::int32_t rank, std::string& why) {
  auto at = file.lower_bound(s);
  if (!at) return at.error();
  auto before = file.line_before(*at);
  if (!before) return before.error();
  Read out;
  std::optional<std::int64_t> line_before = 1;
  if (*before) {
    const SeekLine& l = **before;
    if (!l.end_record()) {
      why = file.path() + ": the line before step " + std::to_string(s) + " is not an end record";
    }
    out.chain_prev = l.parsed.chain.value_or(0);
    line_before = l.parsed.line;
  }
  auto step = file.read_step(*at, s, line_before);
  if (!step) return step.error();
  out.step = std::move(step->step);
  out.end = step->end;
  if (!step->numbered) {
    out.unnumbered = side_name(side) + " rank " + std::to_string(rank) + " step " + std::to_string(s) +
          (out.step.logged_line && line_before
               ? ": its end record's line number is not the line it is on (dtrace check reports line-mismatch)"
               : ": no line numbers in its end records (an older recorder)");
  }
  return out;
}

// Reads step s of one side and checks that its chain matches its records
// (`mismatch` set when it does not: that recorder's chains are not trusted).
Result<Read> read_checked(RankFile& file, std::int64_t s, char side, std::int32_t rank, std::string& why,
                          bool& mismatch) {
  auto read = read_at(file, s, side, rank, why);
  if (!read) return read.error();
  const Step& step = read->step;
  if (!why.empty()) return read;
  if (step.status != StepStatus::complete) {
    why = side_name(side) + " rank " + std::to_string(rank) + " step " + std::to_string(s) +
          " is incomplete or miscounted";
  } else if (!step.chain) {
    why = side_name(side) + " rank " + std::to_string(rank) + " step " + std::to_string(s) + " carries no chain";
  } else if (log::step_chain(read->chain_prev, step) != *step.chain) {
    // A chain that starts anew from 0 after a chained step of its file is a
    // restart the search cannot see past (dtrace check: chain-gap); any other
    // is a chain that is not its records' (chain-mismatch). Neither is trusted.
    const bool anew = read->chain_prev != 0 && log::step_chain(0, step) == *step.chain;
    why = side_name(side) + " rank " + std::to_string(rank) + " step " + std::to_string(s) +
          (anew ? ": its chained digest starts anew after a chained step of its file (" + file.path() +
                      "; dtrace check reports it as chain-gap)"
                : ": its chained digest does not match its records (" + file.path() +
                      "; dtrace check reports it as chain-mismatch)");
    mismatch = true;
  } else {
    why = read->unnumbered;
  }
  return read;
}

// A searched record's place, FILE:LINE as the streaming diff names it.
std::string place(const RankFile& file, const log::Record& r) { return file.path() + ":" + std::to_string(r.line); }

std::string at_line(const RankFile& file, const Step& step, std::ptrdiff_t i) {
  if (i < 0) return {};
  return place(file, step.records[static_cast<std::size_t>(i)]);
}

// The records of step s on both sides, paired in seq order, as the streaming
// diff keeps them for the first divergent rank (Report::first_step: the HTML
// report's strip).
std::vector<StepRecord> strip_at(RankFile& a, RankFile& b, std::int64_t s) {
  std::string why;
  auto step_a = read_at(a, s, 'A', 0, why);
  auto step_b = read_at(b, s, 'B', 0, why);
  if (!step_a || !step_b) return {};
  return step_strip(step_a->step, step_b->step, [&](const log::Record& r, char side) {
    return place(side == 'A' ? a : b, r);
  });
}

// Whether both files' first steps can be vouched for, each read once:
// - ended by an end record with a chain: a chain vouches for the steps back to
//   the last one without a chain (chain_prev 0, dtrace-fp(5)), so it says
//   nothing of a log's first steps when they were written without one (a log
//   mixing steps with and without chains);
// - with line numbers that are their lines, counted from the header (line 1):
//   the search numbers the records of a step it reads from the previous end
//   record's `line`, checked against the step's own end record only, so a
//   file whose every `line` is off by the same amount passes that check at
//   every step but its first, and the search would name places that are not
//   the records' (dtrace check reports line-mismatch). A shift that starts
//   mid-file is check's to find.
// Empty when they can.
std::string first_steps_vouched(RankFile& a, RankFile& b, std::int32_t rank) {
  for (RankFile* f : {&a, &b}) {
    auto first = f->first_line();
    if (!first) return first.error().message;
    if (!*first) return f->path() + " holds no records";
    const std::int64_t s = (*first)->step();
    const std::string at =
        side_name(f == &a ? 'A' : 'B') + " rank " + std::to_string(rank) + " step " + std::to_string(s);
    auto step = f->read_step((*first)->offset, s, 1);
    if (!step) return step.error().message;
    if (step->step.status == StepStatus::incomplete || step->step.rank != rank) return at + " has no end record";
    if (!step->step.chain) {
      return at + " carries no chain (its first step: chains cover the steps after the last one without)";
    }
    if (!step->numbered) {
      return at + (step->step.logged_line
                       ? ": its end record's line number is not the line it is on, counted from the header "
                         "(dtrace check reports line-mismatch)"
                       : ": no line numbers in its end records (an older recorder)");
    }
  }
  return {};
}

// The first steps of a rank that both runs' chains vouch for, for the full
// read to skip (SearchOutcome::prefixes): from the rank's first step, the same
// in both runs and chained in both, to the last step P at which the chains
// agree (below `below`, a step whose chains are known to differ). P itself is
// read on both sides and checked as the search checks a step it compares
// (complete, its chain its records', its end record's line number counted
// from the previous one), so that the reader resumes after it at a known line;
// `mismatch` is set when its chain is not its records'.
// `first_vouched`: search_rank already found both first steps vouched for
// (first_steps_vouched), which are then not read again.
std::optional<SharedPrefix> vouched_prefix(RankFile& a, RankFile& b, std::int32_t rank,
                                           std::optional<std::int64_t> below, const StepWindow& window,
                                           std::uint32_t file_a, std::uint32_t file_b, bool first_vouched,
                                           bool& mismatch) {
  auto first_a = a.first_line(), first_b = b.first_line();
  if (!first_a || !first_b || !*first_a || !*first_b) return std::nullopt;
  const std::int64_t s0 = (*first_a)->step();
  if ((*first_b)->step() != s0 || (*first_a)->rank() != rank || (*first_b)->rank() != rank) return std::nullopt;
  if (!first_vouched && !first_steps_vouched(a, b, rank).empty()) return std::nullopt;
  auto last_a = a.last_whole_line(), last_b = b.last_whole_line();
  if (!last_a || !last_b || !*last_a || !*last_b) return std::nullopt;
  std::int64_t hi = std::min((*last_a)->step(), (*last_b)->step());
  if (below) hi = std::min(hi, *below - 1);
  if (hi < s0) return std::nullopt;
  // Agreement holds from s0 up to P and not after; an anomaly (a step
  // without a chain or an end record, a step in one run only) counts as
  // not agreeing, so P stays before it.
  std::string why;
  auto agrees = [&](std::int64_t s) { return agree(a, b, s, rank, why) == 1; };
  std::int64_t p = s0;
  if (!agrees(s0)) return std::nullopt;
  if (agrees(hi)) {
    p = hi;
  } else {
    std::int64_t l = s0, h = hi - 1;  // agrees(l); the answer is in [l, h]
    while (l < h) {
      const std::int64_t m = l + (h - l + 1) / 2;
      if (agrees(m)) {
        l = m;
      } else {
        h = m - 1;
      }
    }
    p = l;
  }
  // P as the last step <= p that both runs hold (steps need not be numbered one by one).
  const Probe at = probe(a, p, rank, 'A');
  if (!at.step) return std::nullopt;
  p = *at.step;
  SharedPrefix prefix;
  prefix.rank = rank;
  prefix.file_a = file_a;
  prefix.file_b = file_b;
  prefix.by_chains = true;
  for (RankFile* f : {&a, &b}) {
    why.clear();
    auto read = read_checked(*f, p, f == &a ? 'A' : 'B', rank, why, mismatch);
    if (!read || !why.empty() || !read->step.logged_line || read->step.step != p) return std::nullopt;
    const log::RunReader::Position end{read->end, static_cast<std::uint64_t>(*read->step.logged_line)};
    (f == &a ? prefix.end_a : prefix.end_b) = end;
  }
  prefix.steps.insert_range(s0, p);
  const std::int64_t lo = std::max(s0, window.first), top = std::min(p, window.last);
  if (lo <= top) prefix.in_window.insert_range(lo, top);
  return prefix;
}

void search_rank(RankSearch& out, RankFile& a, RankFile& b, const StepWindow& window) {
  const std::int32_t rank = out.rank;
  auto fail = [&](std::string why) { out.fallback = std::move(why); };
  auto first_a = a.first_line(), first_b = b.first_line();
  auto last_a = a.last_line(), last_b = b.last_line();
  for (auto* r : {&first_a, &first_b, &last_a, &last_b}) {
    if (!*r) return fail(r->error().message);
  }
  if (a.truncated() || b.truncated()) {
    return fail((a.truncated() ? a.path() : b.path()) + ": its last line is cut short");
  }
  if (!*first_a || !*first_b || !*last_a || !*last_b) return fail("rank " + std::to_string(rank) + " has no records");
  for (const RankFile* f : {&a, &b}) {
    const auto& last = f == &a ? *last_a : *last_b;
    if (last->rank() != rank) {
      return fail(f->path() + " holds rank " + std::to_string(last->rank()) + " besides rank " + std::to_string(rank));
    }
  }
  if (!(*last_a)->end_record() || !(*last_b)->end_record()) {
    return fail("rank " + std::to_string(rank) + ": the last step of run " + ((*last_a)->end_record() ? "B" : "A") +
                " is incomplete");
  }
  if (!(*last_a)->parsed.chain && !(*last_b)->parsed.chain) {
    out.no_chains = true;
    return fail("rank " + std::to_string(rank) + " carries no chains");
  }
  const std::int64_t start_a = (*first_a)->step(), start_b = (*first_b)->step();
  const std::int64_t end_a = (*last_a)->step(), end_b = (*last_b)->step();
  if (start_a != start_b || end_a != end_b) {
    return fail("rank " + std::to_string(rank) + ": run A holds steps " + std::to_string(start_a) + "-" +
                std::to_string(end_a) + ", run B " + std::to_string(start_b) + "-" + std::to_string(end_b));
  }
  if (std::string why = first_steps_vouched(a, b, rank); !why.empty()) return fail(why);
  out.first_steps_vouched = true;
  std::int64_t lo = std::max(start_a, window.first), hi = std::min(end_a, window.last);
  out.first_step = lo;
  out.last_step = hi;
  if (lo > hi) return;  // nothing of this rank in the window
  std::string why;
  if (lo > start_a) {
    const int before = agree(a, b, lo - 1, rank, why);
    if (before < 0) return fail(why);
    if (before == 0) {
      return fail("rank " + std::to_string(rank) + " differs before the window's first step " + std::to_string(lo));
    }
  }
  // At the last step the end records are already read: most ranks of a run
  // agree there, and cost no more than their first and last lines.
  const bool last = hi == end_a;
  const int at_end = last ? ((*last_a)->parsed.chain && (*last_b)->parsed.chain
                                 ? (*(*last_a)->parsed.chain == *(*last_b)->parsed.chain ? 1 : 0)
                                 : -1)
                          : agree(a, b, hi, rank, why);
  if (at_end < 0 && last) why = "rank " + std::to_string(rank) + ": a last step carries no chain";
  if (at_end < 0) return fail(why);
  if (at_end == 1) return;  // every compared record of every step up to hi agrees
  // Chains agree before lo and differ at hi: the first differing step is in (lo-1, hi].
  std::int64_t l = lo, h = hi;
  while (l < h) {
    const std::int64_t m = l + (h - l) / 2;
    const int v = agree(a, b, m, rank, why);
    if (v < 0) return fail(why);
    if (v == 1) {
      l = m + 1;
    } else {
      h = m;
    }
  }
  const std::int64_t s = l;
  out.differs_at = s;
  auto read_a = read_checked(a, s, 'A', rank, why, out.untrusted);
  if (!read_a) return fail(read_a.error().message);
  if (!why.empty()) return fail(why);
  auto read_b = read_checked(b, s, 'B', rank, why, out.untrusted);
  if (!read_b) return fail(read_b.error().message);
  if (!why.empty()) return fail(why);
  const Step* step_a = &read_a->step;
  const Step* step_b = &read_b->step;
  if (step_a->records.empty() && step_b->records.empty() && step_a->step != s) {
    return fail("rank " + std::to_string(rank) + ": step " + std::to_string(s) + " is in one run only");
  }
  out.steps_read = 1;
  const StepComparison result = compare_step(*step_a, *step_b);
  out.records += result.records;
  if (!result.first) {
    return fail("rank " + std::to_string(rank) + " step " + std::to_string(s) +
                ": the chains differ but the records compare equal (written in another seq order?)");
  }
  const Classification c = classify(*step_a, *step_b, *result.first);
  out.first = describe_mismatch(*step_a, *step_b, *result.first, c, at_line(a, *step_a, result.first->a),
                                at_line(b, *step_b, result.first->b));
  out.collective = c.collective;
  out.collective_inputs_differing = result.collective_inputs_differing;
}

// Runs `work(i)` for i in [0, n) on threads, more than there are cores: the
// reads are small and random, each thread mostly waits on one, and a parallel
// file system (or a disk's queue, or the page cache) serves many at once.
template <class Work>
void in_parallel(std::size_t n, Work&& work) {
  for_each_index(n, std::max(64u, 2 * std::thread::hardware_concurrency()), work);
}

// Why a file without a rank declaration cannot be searched.
std::string undeclared(const std::string& file) {
  return file + ": its header does not declare that it holds one rank (field 'rank', "
                "dtrace-fp(5); an older recorder, or a file ranks share)";
}

// Which rank each file of a run holds, one file per rank. A file is searched
// only when its header declares that it holds one rank in step order (field
// `rank`, dtrace-fp(5), what the recorder writes): the steps its chains vouch
// for are never read, so a line of another rank among them (records may sit
// in any file) would go unseen. The reader holds such a file to its
// declaration when it reads it, as dtrace check does.
RankFiles rank_files(const log::RunReader& reader, char side, std::shared_ptr<log::Intern> intern,
                     std::uint64_t& bytes_read) {
  RankFiles out;
  const auto& files = reader.files();
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!reader.headers()[i].rank) {
      out.problem = undeclared(files[i]);
      return out;
    }
  }
  std::vector<std::int64_t> ranks(files.size(), -1);
  std::vector<std::string> problems(files.size());
  std::atomic<std::uint64_t> bytes{0};
  in_parallel(files.size(), [&](std::size_t i) {
    auto file = RankFile::open(files[i], static_cast<std::uint32_t>(i), intern);
    if (!file) {
      problems[i] = file.error().message;
      return;
    }
    auto first = (*file)->first_line();
    bytes += (*file)->bytes_read();
    if (!first) {
      problems[i] = first.error().message;
    } else if (!*first) {
      problems[i] = files[i] + " holds no records";
    } else if ((*first)->rank() != *reader.headers()[i].rank) {
      problems[i] = files[i] + ": holds rank " + std::to_string((*first)->rank()) + ", its header declares rank " +
                    std::to_string(*reader.headers()[i].rank);
    } else {
      ranks[i] = (*first)->rank();
    }
  });
  bytes_read += bytes;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!problems[i].empty()) {
      out.problem = problems[i];
      return out;
    }
    const auto rank = static_cast<std::int32_t>(ranks[i]);
    if (!out.files.emplace(rank, files[i]).second) {
      out.problem = side_name(side) + " keeps rank " + std::to_string(rank) + " in more than one file";
      return out;
    }
    out.index[rank] = static_cast<std::uint32_t>(i);
  }
  return out;
}

// Whether a run's first file ends with a chained end record: a run written
// without chains (an older recorder) is diffed as always, with nothing said.
bool carries_chains(const std::string& first_file, std::shared_ptr<log::Intern> intern) {
  auto file = RankFile::open(first_file, 0, std::move(intern));
  if (!file) return false;
  auto last = (*file)->last_line();
  return last && *last && (*last)->end_record() && (*last)->parsed.chain.has_value();
}

bool carries_chains(const log::RunReader& reader, std::shared_ptr<log::Intern> intern) {
  if (reader.files().empty()) return false;
  return carries_chains(reader.files().front(), std::move(intern));
}

// A run's first file, looked at before every file's header is read: the
// headers' pass below opens and reads every file of both runs (which the
// streaming diff opens again), yet what it decides first comes from each
// run's first file alone (its header, whether it carries chains), and when
// that decides against searching, two small reads answer (issue 41: 4,096
// rank files a side without chains, or without rank declarations). Known
// only when that file is the one the reader takes first: its first line a
// header, ended by a newline; anything else (a byte-order mark, a blank first
// line, a header cut short, no file) is left to the reader's pass, so the
// outcome is the one that pass gives.
struct FirstFile {
  std::string path;
  log::Header header;
  bool chains = false;
};

std::optional<FirstFile> first_file(const std::string& run, std::shared_ptr<log::Intern> intern) {
  auto files = log::list_run_files(run);
  if (!files) return std::nullopt;
  FirstFile first;
  first.path = files->front();
  std::ifstream in(first.path, std::ios::binary);
  std::string line;
  if (!std::getline(in, line) || in.eof()) return std::nullopt;
  auto header = log::parse_header(line);
  if (!header) return std::nullopt;
  first.header = std::move(*header);
  first.chains = carries_chains(first.path, std::move(intern));
  return first;
}

}  // namespace

SearchOutcome search_diff(const std::string& run_a, const std::string& run_b, const StepWindow& window) {
  SearchOutcome outcome;
  auto intern = std::make_shared<log::Intern>();
  // The checks after the headers' pass, in their order, made before it where
  // the runs' first files decide them (first_file). Those that return no
  // fallback return what that pass returns when a run cannot be read, too
  // (the streaming diff then reports the error, or the runs' difference).
  if (auto fa = first_file(run_a, intern), fb = first_file(run_b, intern); fa && fb) {
    if (fa->header.hash != fb->header.hash || fa->header.world_size != fb->header.world_size) return outcome;
    if (!fa->chains && !fb->chains) return outcome;
    if (fa->header.level != fb->header.level) {
      outcome.fallback = "the runs were recorded at different levels";
      return outcome;
    }
    // rank_files' first check, on run A's first file.
    if (!fa->header.rank) {
      outcome.fallback = undeclared(fa->path);
      return outcome;
    }
  }
  // Headers only: a small read per file, not the streaming reader's
  // read-ahead, and no descriptor kept (the search opens the files itself).
  log::ReadLimits headers_only;
  headers_only.buffer_bytes = 4096;
  headers_only.descriptors = 1;
  auto ra = log::RunReader::open(run_a, headers_only, intern);
  auto rb = log::RunReader::open(run_b, headers_only, intern);
  if (!ra || !rb) return outcome;  // the streaming diff reports the error
  const log::Header& ha = (*ra)->header();
  const log::Header& hb = (*rb)->header();
  if (ha.hash != hb.hash || ha.world_size != hb.world_size) return outcome;  // likewise
  if (!carries_chains(**ra, intern) && !carries_chains(**rb, intern)) return outcome;
  if (ha.level != hb.level) {
    outcome.fallback = "the runs were recorded at different levels";
    return outcome;
  }
  RankFiles files_a = rank_files(**ra, 'A', intern, outcome.bytes_read);
  RankFiles files_b = rank_files(**rb, 'B', intern, outcome.bytes_read);
  if (!files_a.problem.empty() || !files_b.problem.empty()) {
    outcome.fallback = !files_a.problem.empty() ? files_a.problem : files_b.problem;
    return outcome;
  }
  std::vector<std::int32_t> ranks;
  for (const auto& [rank, path] : files_a.files) {
    if (files_b.files.contains(rank)) ranks.push_back(rank);
  }
  if (ranks.size() != files_a.files.size() || ranks.size() != files_b.files.size()) {
    outcome.fallback = "the runs hold different ranks";
    return outcome;
  }

  std::vector<RankSearch> results(ranks.size());
  in_parallel(ranks.size(), [&](std::size_t i) {
    RankSearch& r = results[i];
    r.rank = ranks[i];
    auto a = files_a.open(r.rank, intern);
    auto b = files_b.open(r.rank, intern);
    if (!a || !b) {
      r.fallback = !a ? a.error().message : b.error().message;
      return;
    }
    search_rank(r, **a, **b, window);
    r.bytes_read = (*a)->bytes_read() + (*b)->bytes_read();
  });
  for (const RankSearch& r : results) outcome.bytes_read += r.bytes_read;
  // A run without chains is an old log: no note, it is diffed as always.
  const bool none = std::all_of(results.begin(), results.end(), [](const RankSearch& r) { return r.no_chains; });
  if (none) return outcome;
  for (const RankSearch& r : results) {
    if (r.fallback.empty()) continue;
    outcome.fallback = r.fallback;
    // Some rank needs reading: the full read then starts, on every rank,
    // where its chains stop vouching (a rank whose first mismatch the search
    // found is read from that step, so its later steps are compared as the
    // streaming diff compares them). Unless some chain lied.
    const bool untrusted =
        std::any_of(results.begin(), results.end(), [](const RankSearch& x) { return x.untrusted; });
    if (untrusted) return outcome;
    std::vector<std::optional<SharedPrefix>> found(results.size());
    std::atomic<std::uint64_t> bytes{0};
    std::atomic<bool> lied{false};
    in_parallel(results.size(), [&](std::size_t i) {
      const RankSearch& x = results[i];
      auto a = files_a.open(x.rank, intern);
      auto b = files_b.open(x.rank, intern);
      if (!a || !b) return;
      bool mismatch = false;
      found[i] = vouched_prefix(**a, **b, x.rank, x.differs_at, window, files_a.index.at(x.rank),
                                files_b.index.at(x.rank), x.first_steps_vouched, mismatch);
      if (mismatch) lied = true;
      bytes += (*a)->bytes_read() + (*b)->bytes_read();
    });
    outcome.bytes_read += bytes;
    if (lied) return outcome;
    for (auto& p : found) {
      if (p) outcome.prefixes.push_back(std::move(*p));
    }
    return outcome;
  }

  Report report;
  report.run_a = run_a;
  report.run_b = run_b;
  report.searched = true;
  compare_headers(ha, hb, report);
  for (const std::string& n : (*ra)->notes()) report.notes.push_back("run A: " + n);
  for (const std::string& n : (*rb)->notes()) report.notes.push_back("run B: " + n);
  IntervalSet steps;
  std::int64_t steps_read = 0;
  for (const RankSearch& r : results) {
    if (r.first_step > r.last_step) continue;
    steps.insert_range(r.first_step, r.last_step);
    ++report.compared.ranks;
    report.compared.records += r.records;
    steps_read += r.steps_read;
  }
  if (steps.empty()) {
    outcome.fallback = "no step of the window in both runs";
    return outcome;
  }
  report.compared.first_step = steps.min();
  report.compared.last_step = steps.max();
  report.compared.steps = steps.size();

  // A collective whose own inputs matched passed on another rank's divergence
  // (as the streaming diff decides it): the other ranks' differing collective
  // inputs at that step. A rank whose first mismatch is later agrees there.
  std::map<std::int64_t, std::set<std::string>> differing;
  for (const RankSearch& r : results) {
    if (r.first) differing[r.first->step].insert(r.collective_inputs_differing.begin(), r.collective_inputs_differing.end());
  }
  for (const RankSearch& r : results) {
    if (!r.first || r.collective.empty()) continue;
    const std::int64_t s = r.first->step;
    for (const RankSearch& other : results) {
      if (!other.first || other.first->step >= s) continue;
      // Diverged earlier, so its chains say nothing at s: read that step.
      auto a = files_a.open(other.rank, intern);
      auto b = files_b.open(other.rank, intern);
      if (!a || !b) continue;
      auto at_a = (*a)->lower_bound(s);
      auto at_b = (*b)->lower_bound(s);
      if (!at_a || !at_b) continue;
      auto step_a = (*a)->read_step(*at_a, s);
      auto step_b = (*b)->read_step(*at_b, s);
      outcome.bytes_read += (*a)->bytes_read() + (*b)->bytes_read();
      if (!step_a || !step_b || step_a->step.status != StepStatus::complete ||
          step_b->step.status != StepStatus::complete) {
        continue;
      }
      ++steps_read;
      const StepComparison c = compare_step(step_a->step, step_b->step);
      differing[s].insert(c.collective_inputs_differing.begin(), c.collective_inputs_differing.end());
    }
  }
  std::map<std::int32_t, RankFirst> firsts;
  for (const RankSearch& r : results) {
    if (r.first) firsts[r.rank] = RankFirst{*r.first, r.collective};
  }
  Divergence divergence = first_divergence(firsts, differing);
  report.ranks = std::move(divergence.ranks);
  report.first = std::move(divergence.first);
  if (report.first) {
    const std::int32_t r = report.first->rank;
    auto a = files_a.open(r, intern);
    auto b = files_b.open(r, intern);
    if (a && b) {
      report.first_step = strip_at(**a, **b, report.first->step);
      outcome.bytes_read += (*a)->bytes_read() + (*b)->bytes_read();
    }
  }
  report.notes.push_back("searched by chained step digests (dtrace-fp(5)): " + std::to_string(results.size()) +
                         (results.size() == 1 ? " rank, " : " ranks, ") + std::to_string(steps_read) +
                         (steps_read == 1 ? " step" : " steps") +
                         " read record by record, " +
                         // A rank's chains differ from its first difference on:
                         // only the steps before it are vouched for, not the rest.
                         (report.first ? std::string("the steps before each rank's first difference known equal by "
                                                     "their chains, those after it not read; ")
                                       : std::string("the others known equal by their chains; ")) +
                         "`dtrace check` verifies every chain, `dtrace diff --stream` reads every record");
  outcome.report = std::move(report);
  return outcome;
}

}  // namespace dtrace::diff
