// The search diff (src/diff/search.cpp) against the streaming diff: on every
// diff fixture (given chained step digests) and the minitrain runs, both give
// the same report; a chain that does not match its records, a log mixing
// steps with and without chains, and --steps windows are handled as
// dtrace(1) says.
#include "diff/search.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <tuple>

#include "diff/diff.hpp"
#include "log/chain.hpp"
#include "log/intern.hpp"
#include "log/parse.hpp"
#include "report/diff_report.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using dtrace::diff::DiffOptions;
using dtrace::diff::diff_runs;
using dtrace::diff::Report;
using dtrace::test::TempDir;
using dtrace::test::write_text;

namespace {

const std::string kTestdata = DTRACE_TESTDATA;

// Copies a run file, giving every end record the chain its records give
// (dtrace-fp(5)) and its header the rank it holds when it holds one rank in
// step order: what a correct recorder writes. Records of a rank are taken
// in file order, each step's in seq order, chain_prev per rank as in the file.
// `skip_before`: end records of steps below it get no chain (a mixed log).
// `corrupt_step`: that step's chain is wrong (a buggy recorder).
// `lines`: every end record also gets its own line number (field `line`), as
// the recorder writes it; without, an older recorder's log.
// The rank a file's lines all belong to when they are that rank's alone, in
// step order, each step's end record its last line: what a recorder declares
// in the header (field `rank`, dtrace-fp(5)); -1 otherwise.
std::int64_t sole_rank(const std::string& text) {
  dtrace::log::Intern intern;
  dtrace::log::LineParser parser;
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);  // the header
  std::int64_t rank = -1, last = INT64_MIN;
  std::optional<std::int64_t> last_end;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    std::string padded = line + std::string(dtrace::log::kLinePadding, '\0');
    dtrace::log::ParsedLine p;
    parser.parse(std::string_view(padded.data(), line.size()), intern, p);
    if (p.kind == dtrace::log::LineKind::malformed) continue;  // a cut last line
    const std::int64_t r = p.kind == dtrace::log::LineKind::end ? p.rank : p.record.rank;
    const std::int64_t s = p.kind == dtrace::log::LineKind::end ? p.step : p.record.step;
    if ((rank >= 0 && r != rank) || s < last || (last_end && s <= *last_end)) return -1;
    rank = r;
    last = s;
    if (p.kind == dtrace::log::LineKind::end) last_end = s;
  }
  return rank;
}

void add_chains(const fs::path& from, const fs::path& to, std::int64_t skip_before = INT64_MIN,
                std::int64_t corrupt_step = -1, bool lines = true) {
  std::ifstream in(from, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::int64_t declared = sole_rank(text);
  dtrace::log::Intern intern;
  dtrace::log::LineParser parser;
  std::map<std::int64_t, std::vector<dtrace::log::Record>> open;  // rank -> the open step's records
  std::map<std::int64_t, std::uint64_t> previous;                 // rank -> chain_prev
  std::ostringstream out;
  std::istringstream text_lines(text);
  std::string line;
  bool first = true;
  std::int64_t number = 0;  // the line's own number
  bool ends_with_newline = !text.empty() && text.back() == '\n';
  while (std::getline(text_lines, line)) {
    ++number;
    const bool last = text_lines.peek() == EOF;
    std::string padded = line + std::string(dtrace::log::kLinePadding, '\0');
    dtrace::log::ParsedLine p;
    if (!first && !line.empty()) parser.parse(std::string_view(padded.data(), line.size()), intern, p);
    if (first && declared >= 0 && line.find("\"rank\"") == std::string::npos && line.back() == '}') {
      line.pop_back();
      line += ",\"rank\":" + std::to_string(declared) + "}";
    }
    first = false;
    if (p.kind == dtrace::log::LineKind::record) {
      open[p.record.rank].push_back(p.record);
    } else if (p.kind == dtrace::log::LineKind::end && !p.chain && line.back() == '}') {
      auto records = std::move(open[p.rank]);
      open.erase(p.rank);
      std::stable_sort(records.begin(), records.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
      dtrace::log::Step step;
      step.rank = static_cast<std::int32_t>(p.rank);
      step.step = p.step;
      step.records = std::move(records);
      if (p.step >= skip_before) {
        std::uint64_t chain = dtrace::log::step_chain(previous[p.rank], step);
        if (p.step == corrupt_step) chain ^= 1;
        previous[p.rank] = chain;
        line.pop_back();
        line += ",\"chain\":\"" + dtrace::log::chain_hex(chain) + "\"}";
      } else {
        previous[p.rank] = 0;
      }
      if (lines) {
        line.pop_back();
        line += ",\"line\":" + std::to_string(number) + "}";
      }
    }
    out << line;
    if (!last || ends_with_newline) out << '\n';
  }
  write_text(to.string(), out.str());
}

// A chained copy of a run (a directory or one file).
std::string chained_copy(const fs::path& run, const fs::path& to, std::int64_t skip_before = INT64_MIN,
                         std::int64_t corrupt_step = -1, bool lines = true) {
  if (fs::is_directory(run)) {
    fs::create_directories(to);
    for (const auto& entry : fs::directory_iterator(run)) {
      if (entry.is_regular_file() && entry.path().extension() == ".jsonl") {
        add_chains(entry.path(), to / entry.path().filename(), skip_before, corrupt_step, lines);
      } else if (entry.is_regular_file()) {
        fs::copy_file(entry.path(), to / entry.path().filename());
      }
    }
  } else {
    fs::create_directories(to.parent_path());
    add_chains(run, to, skip_before, corrupt_step, lines);
  }
  return to.string();
}

// A report as JSON, without what dtrace(1) says only the search or only the
// stream can say: the search's own note (and the fallback note) and the
// records compared (the search counts only the steps it reads). Locations
// (FILE:LINE on both) must be identical.
nlohmann::json comparable(const Report& report) {
  nlohmann::json j = dtrace::report::diff_to_json(report);
  nlohmann::json notes = nlohmann::json::array();
  for (const auto& n : j["notes"]) {
    const std::string s = n.get<std::string>();
    if (s.rfind("searched by chained step digests", 0) == 0 || s.rfind("chained digests not searched", 0) == 0) {
      continue;
    }
    notes.push_back(n);
  }
  j["notes"] = notes;
  j["compared"].erase("records");
  return j;
}

struct Both {
  dtrace::Result<Report> search, stream;
};

Both diff_both(const std::string& a, const std::string& b, DiffOptions options = {}) {
  options.stream = false;
  auto search = diff_runs(a, b, options);
  options.stream = true;
  auto stream = diff_runs(a, b, options);
  return {std::move(search), std::move(stream)};
}

void require_same(const Both& both, const std::string& what) {
  INFO(what);
  REQUIRE(both.search.ok() == both.stream.ok());
  if (!both.stream.ok()) {
    REQUIRE(both.search.error().message == both.stream.error().message);
    return;
  }
  CHECK(comparable(*both.search).dump(2) == comparable(*both.stream).dump(2));
  CHECK_FALSE(both.stream->searched);
  // The first divergent step's records (the HTML report's strip): the same
  // records in the same order, matched or not, whichever way the step was found.
  auto strip = [](const Report& r) {
    std::vector<std::tuple<std::int64_t, std::string, std::string, std::string, int>> out;
    for (const auto& x : r.first_step) out.emplace_back(x.seq, x.scope, x.op, x.name, static_cast<int>(x.match));
    return out;
  };
  CHECK(strip(*both.search) == strip(*both.stream));
  CHECK(both.search->first_step.empty() == !both.search->first);
}

bool has_note(const Report& report, const std::string& text) {
  for (const auto& n : report.notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

// A run of `ranks` ranks and `steps` steps, two records a step; `differ` (rank,
// step) gets another output hash from that step on, when given (at that step
// alone with `once`).
std::string make_run(const TempDir& dir, const std::string& name, int ranks, int steps,
                     std::optional<std::pair<int, int>> differ = std::nullopt, int first_step = 0,
                     bool once = false) {
  const fs::path raw = dir.path() / ("raw-" + name);
  fs::create_directories(raw);
  for (int r = 0; r < ranks; ++r) {
    std::ostringstream o;
    o << R"({"dtrace":"fp/1","run":")" << name << R"(","world_size":)" << ranks << R"(,"rank":)" << r
      << R"(,"hash":"xxh3-64k/1","level":"layer"})" << "\n";
    for (int s = first_step; s < steps; ++s) {
      const bool changed = differ && differ->first == r && (once ? s == differ->second : s >= differ->second);
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016x", (s * 131 + r) * 2 + (changed ? 1 : 0));
      o << R"({"step":)" << s << R"(,"rank":)" << r
        << R"(,"seq":0,"scope":"fwd/layer.0","op":"gemm","io":"in","name":"x","dtype":"bf16","shape":[2,2],"hash":")"
        << std::string(16, 'a') << "\"}\n";
      o << R"({"step":)" << s << R"(,"rank":)" << r
        << R"(,"seq":1,"scope":"fwd/layer.0","op":"gemm","io":"out","name":"y","dtype":"bf16","shape":[2,2],"hash":")"
        << hash << "\"}\n";
      o << R"({"step":)" << s << R"(,"rank":)" << r << R"(,"end":true,"count":2})" << "\n";
    }
    write_text((raw / ("rank" + std::to_string(r) + ".jsonl")).string(), o.str());
  }
  return raw.string();
}

}  // namespace

TEST_CASE("search and stream agree on every diff fixture, given chains", "[search]") {
  TempDir tmp;
  int searched = 0, fixtures = 0;
  for (const auto& entry : fs::directory_iterator(kTestdata + "/diff")) {
    const fs::path a = entry.path() / "a", b = entry.path() / "b";
    if (!fs::exists(a) || !fs::exists(b)) continue;
    ++fixtures;
    const std::string name = entry.path().filename().string();
    const fs::path to = tmp.path() / name;
    const std::string ca = chained_copy(a, to / "a"), cb = chained_copy(b, to / "b");
    const Both both = diff_both(ca, cb);
    require_same(both, name);
    if (both.search.ok() && both.search->searched) ++searched;
  }
  REQUIRE(fixtures >= 20);
  // Most fixtures are one file per rank in step order, which the search takes.
  CHECK(searched >= 10);
}

TEST_CASE("search and stream agree on the minitrain runs, which the recorder chained", "[search]") {
  for (const char* pair : {"fused-ce", "same", "splitk"}) {
    const std::string a = kTestdata + "/minitrain/" + pair + "-a", b = kTestdata + "/minitrain/" + pair + "-b";
    const Both both = diff_both(a, b);
    require_same(both, pair);
    REQUIRE(both.search.ok());
    CHECK(both.search->searched);
    CHECK(has_note(*both.search, "searched by chained step digests"));
    // Chains vouch only for the steps before a rank's first difference: a
    // diverged pair's note must not call the later steps equal.
    const bool diverged = both.search->first.has_value();
    CHECK(diverged == (std::string(pair) != "same"));
    CHECK(has_note(*both.search, "the others known equal by their chains") == !diverged);
    CHECK(has_note(*both.search, "the steps before each rank's first difference known equal by their chains, "
                                 "those after it not read") == diverged);
  }
}

TEST_CASE("a late divergence on one rank of many is found by search, as streaming finds it", "[search]") {
  TempDir tmp;
  const std::string a = chained_copy(make_run(tmp, "a", 8, 300), tmp.path() / "a");
  const std::string b = chained_copy(make_run(tmp, "b", 8, 300, std::pair{5, 271}), tmp.path() / "b");
  const Both both = diff_both(a, b);
  require_same(both, "late");
  REQUIRE(both.search->searched);
  REQUIRE(both.search->first);
  CHECK(both.search->first->rank == 5);
  CHECK(both.search->first->step == 271);
  // Named as the streaming diff names it: header, then three lines a step.
  CHECK_THAT(both.search->first->a_location, Catch::EndsWith("rank5.jsonl:" + std::to_string(1 + 271 * 3 + 2)));
  CHECK(both.search->first->a_location == both.stream->first->a_location);
  CHECK(both.search->compared.first_step == 0);
  CHECK(both.search->compared.last_step == 299);
  CHECK(both.search->compared.ranks == 8);
}

TEST_CASE("a chain that does not match its records is caught where the search reads it", "[search]") {
  TempDir tmp;
  // Same records; B's recorder wrote a wrong chain at step 40: B's chains
  // differ from there on, the search lands on step 40, reads it, recomputes
  // the chain and does not trust it: the runs are read in full and say why.
  const std::string a = chained_copy(make_run(tmp, "a", 2, 100), tmp.path() / "a");
  const std::string b = chained_copy(make_run(tmp, "b", 2, 100), tmp.path() / "b", INT64_MIN, 40);
  const Both both = diff_both(a, b);
  require_same(both, "buggy recorder");
  REQUIRE_FALSE(both.search->searched);
  CHECK_FALSE(both.search->diverged());
  CHECK(has_note(*both.search, "run B rank 0 step 40: its chained digest does not match its records"));
}

TEST_CASE("a log mixing steps with and without chains is read in full", "[search]") {
  TempDir tmp;
  const std::string a = chained_copy(make_run(tmp, "a", 2, 50), tmp.path() / "a", 20);
  const std::string b = chained_copy(make_run(tmp, "b", 2, 50, std::pair{1, 10}), tmp.path() / "b", 20);
  const Both both = diff_both(a, b);
  require_same(both, "mixed");
  REQUIRE_FALSE(both.search->searched);
  REQUIRE(both.search->first);
  CHECK(both.search->first->step == 10);
  CHECK(has_note(*both.search, "carries no chain"));
}

TEST_CASE("chained logs without line numbers (an older recorder) are read in full, with a note", "[search]") {
  TempDir tmp;
  const std::string a = chained_copy(make_run(tmp, "a", 3, 60), tmp.path() / "a", INT64_MIN, -1, false);
  const std::string b = chained_copy(make_run(tmp, "b", 3, 60, std::pair{1, 44}), tmp.path() / "b", INT64_MIN, -1, false);
  const Both both = diff_both(a, b);
  require_same(both, "no line numbers");
  REQUIRE_FALSE(both.search->searched);
  REQUIRE(both.search->first);
  CHECK(both.search->first->step == 44);
  CHECK(has_note(*both.search, "no line numbers in its end records (an older recorder)"));
}

TEST_CASE("line numbers that do not agree with the lines are not trusted: read in full", "[search]") {
  TempDir tmp;
  const std::string a = chained_copy(make_run(tmp, "a", 2, 60), tmp.path() / "a");
  const std::string b = chained_copy(make_run(tmp, "b", 2, 60, std::pair{0, 30}), tmp.path() / "b");
  // A blank line inside B's step 30 on rank 0: every end record from there on
  // is one line off, as a recorder that miscounted would write them.
  const fs::path file = fs::path(b) / "rank0.jsonl";
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::size_t at = 0;
  for (int n = 0; n < 1 + 30 * 3 + 1; ++n) at = text.find('\n', at) + 1;
  text.insert(at, "\n");
  write_text(file.string(), text);
  const Both both = diff_both(a, b);
  require_same(both, "lines off by one");
  // The search cannot name step 30's records; the stream reads rank 0 from
  // step 30 on (step 29's line numbers still agree), rank 1 not at all.
  CHECK(both.search->searched);
  CHECK(has_note(*both.search, "its end record's line number is not the line it is on"));
  const auto searched = dtrace::diff::search_diff(a, b, {});
  REQUIRE(searched.prefixes.size() == 2);
  for (const auto& p : searched.prefixes) CHECK(p.steps.max() == (p.rank == 0 ? 29 : 59));
}

TEST_CASE("line numbers all off by one are not trusted: no wrong FILE:LINE named", "[search]") {
  TempDir tmp;
  const std::string a = chained_copy(make_run(tmp, "a", 2, 40), tmp.path() / "a");
  const std::string b = chained_copy(make_run(tmp, "b", 2, 40, std::pair{0, 25}), tmp.path() / "b");
  // Every end record of B's rank 0 says the line after its own: each agrees
  // with the one before it, only the count from the header gives it away.
  const fs::path file = fs::path(b) / "rank0.jsonl";
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), shifted;
  in.close();
  const std::string key = ",\"line\":";
  for (std::size_t at = 0;;) {
    const std::size_t k = text.find(key, at);
    if (k == std::string::npos) {
      shifted += text.substr(at);
      break;
    }
    const std::size_t digits = k + key.size(), end = text.find('}', digits);
    shifted += text.substr(at, digits - at) + std::to_string(std::stoll(text.substr(digits, end - digits)) + 1);
    at = end;
  }
  write_text(file.string(), shifted);
  const Both both = diff_both(a, b);
  require_same(both, "every line off by one");
  REQUIRE(both.search.ok());
  REQUIRE(both.search->first);
  CHECK(both.search->first->step == 25);
  CHECK(has_note(*both.search, "counted from the header"));
}

TEST_CASE("runs without chains are diffed as always, with nothing said about chains", "[search]") {
  TempDir tmp;
  const std::string a = make_run(tmp, "a", 2, 20);
  const std::string b = make_run(tmp, "b", 2, 20, std::pair{0, 3});
  const Both both = diff_both(a, b);
  require_same(both, "no chains");
  CHECK_FALSE(both.search->searched);
  CHECK_FALSE(has_note(*both.search, "chain"));
}

TEST_CASE("--steps: a window searched, or read in full when a rank differs before it", "[search]") {
  TempDir tmp;
  const std::string a = chained_copy(make_run(tmp, "a", 4, 200), tmp.path() / "a");
  const std::string b = chained_copy(make_run(tmp, "b", 4, 200, std::pair{2, 120}), tmp.path() / "b");
  for (auto [lo, hi] : {std::pair{0, 100}, std::pair{100, 150}, std::pair{121, 199}, std::pair{150, 100000},
                        std::pair{120, 120}}) {
    DiffOptions options;
    options.steps.first = lo;
    options.steps.last = hi;
    const Both both = diff_both(a, b, options);
    require_same(both, "window " + std::to_string(lo) + "-" + std::to_string(hi));
    REQUIRE(both.stream.ok());
    CHECK(both.stream->compared.first_step == lo);
    CHECK(both.stream->compared.last_step == std::min(hi, 199));
    if (lo <= 120 && hi >= 120) {
      REQUIRE(both.search->searched);
      REQUIRE(both.search->first);
      CHECK(both.search->first->step == 120);
    }
    if (lo > 120) {
      // Rank 2 already differs before the window: the chains cannot say where
      // inside it, so rank 2 is read from step 120 on (the other ranks' chains
      // agree to the end) and the window's first step reported.
      CHECK(both.search->searched);
      REQUIRE(both.stream->first);
      CHECK(both.stream->first->step == lo);
      CHECK(has_note(*both.search, "differs before the window"));
    }
    if (hi < 120) CHECK_FALSE(both.search->diverged());
  }
}

namespace {

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Cuts a rank file after the end record of step `last` (its line number
// `line`), as a run that crashed there leaves it; `tail`, appended with no
// newline, is the crash's half-written line.
void cut_after(const fs::path& file, int line, const std::string& tail = {}) {
  const std::string text = file_text(file);
  std::size_t at = 0;
  for (int n = 0; n < line; ++n) at = text.find('\n', at) + 1;
  write_text(file.string(), text.substr(0, at) + tail);
}

}  // namespace

TEST_CASE("a crashed run: each rank is read from where its chains stop agreeing, as streaming reports it", "[search]") {
  TempDir tmp;
  // A ran 200 steps; B diverged on rank 1 at step 120 and crashed after step
  // 150 (rank 2 mid-way through a line of step 151, rank 3 after one record
  // of it). Lines: header, then three a step: step s ends on line 3s + 4.
  const std::string a = chained_copy(make_run(tmp, "a", 4, 200), tmp.path() / "a");
  const std::string b = chained_copy(make_run(tmp, "b", 4, 200, std::pair{1, 120}), tmp.path() / "b");
  for (int r = 0; r < 4; ++r) {
    const fs::path file = fs::path(b) / ("rank" + std::to_string(r) + ".jsonl");
    const int end_of_150 = 3 * 150 + 4;
    if (r == 2) {
      cut_after(file, end_of_150, R"({"step":151,"rank":2,"seq":0,"scope":"fwd/la)");
    } else if (r == 3) {
      cut_after(file, end_of_150 + 1);
    } else {
      cut_after(file, end_of_150);
    }
  }
  const Both both = diff_both(a, b);
  require_same(both, "crashed");
  REQUIRE(both.search.ok());
  CHECK(both.search->searched);
  CHECK(has_note(*both.search, "then read record by record from where each rank's chains stop vouching"));
  CHECK(has_note(*both.search, "steps on 4 ranks known equal by their chains"));
  // What streaming gives for free still holds: the cut line, the unfinished
  // step, the steps only A holds, the divergence.
  CHECK(has_note(*both.search, "last line cut short"));
  CHECK(has_note(*both.search, "only in run A, not compared"));
  CHECK(has_note(*both.search, "incomplete in run B"));
  REQUIRE(both.search->first);
  CHECK(both.search->first->rank == 1);
  CHECK(both.search->first->step == 120);
  // Only what follows each rank's last agreeing chain is read: rank 1 from
  // step 120, the others from step 151 (A's tail of one-sided steps).
  const auto searched = dtrace::diff::search_diff(a, b, {});
  REQUIRE_FALSE(searched.report);
  REQUIRE(searched.prefixes.size() == 4);
  for (const auto& p : searched.prefixes) {
    INFO("rank " << p.rank);
    CHECK(p.by_chains);
    CHECK(p.steps.min() == 0);
    CHECK(p.steps.max() == (p.rank == 1 ? 119 : 150));
  }
}

TEST_CASE("one rank without chains is read in full, the others' chains vouch for them", "[search]") {
  TempDir tmp;
  const std::string a = chained_copy(make_run(tmp, "a", 4, 100), tmp.path() / "a");
  const std::string raw_b = make_run(tmp, "b", 4, 100, std::pair{0, 70});
  const std::string b = chained_copy(raw_b, tmp.path() / "b");
  // Rank 0 of B written without chains (another recorder), and diverged at 70.
  fs::copy_file(fs::path(raw_b) / "rank0.jsonl", fs::path(b) / "rank0.jsonl", fs::copy_options::overwrite_existing);
  const Both both = diff_both(a, b);
  require_same(both, "one rank without chains");
  REQUIRE(both.search.ok());
  CHECK(both.search->searched);
  CHECK(has_note(*both.search, "steps on 3 ranks known equal by their chains"));
  REQUIRE(both.search->first);
  CHECK(both.search->first->rank == 0);
  CHECK(both.search->first->step == 70);
}

TEST_CASE("a resumed run, whose chains start anew, is read in full", "[search]") {
  TempDir tmp;
  // B resumed at step 40: its chains start from 0 there, A's go back to step
  // 0, so no chain of B's can vouch for a step of A's.
  const std::string a = chained_copy(make_run(tmp, "a", 2, 100), tmp.path() / "a");
  const std::string b = chained_copy(make_run(tmp, "b", 2, 100, std::pair{1, 60}, 40), tmp.path() / "b");
  const Both both = diff_both(a, b);
  require_same(both, "resumed");
  REQUIRE(both.search.ok());
  CHECK_FALSE(both.search->searched);
  CHECK(has_note(*both.search, "chained digests not searched, both runs read in full"));
  CHECK(has_note(*both.search, "only in run A, not compared"));
  REQUIRE(both.search->first);
  CHECK(both.search->first->step == 60);
}

TEST_CASE("a difference in steps written before chains began is not hidden by the equal chains after", "[search]") {
  TempDir tmp;
  // Steps 0-19 carry no chain; B differs at step 10 alone. The chains from
  // step 20 on (chained from 0) agree on every rank, and say nothing of
  // step 10: the search must not call the runs identical.
  const std::string a = chained_copy(make_run(tmp, "a", 2, 50), tmp.path() / "a", 20);
  const std::string b = chained_copy(make_run(tmp, "b", 2, 50, std::pair{1, 10}, 0, true), tmp.path() / "b", 20);
  const Both both = diff_both(a, b);
  require_same(both, "difference before the chains");
  REQUIRE(both.search.ok());
  REQUIRE(both.search->first);
  CHECK(both.search->first->rank == 1);
  CHECK(both.search->first->step == 10);
  CHECK(has_note(*both.search, "carries no chain (its first step"));
}

TEST_CASE("another rank's step inside a file the chains would vouch for: read, not skipped", "[search]") {
  TempDir tmp;
  // dtrace-fp(5): records may sit in any file. B wrote rank 1's step 1 in the
  // middle of rank0.jsonl, and it differs there. rank0.jsonl's own chains
  // agree with A's; skipping what they vouch for would skip rank 1's step.
  const std::string a = chained_copy(make_run(tmp, "a", 2, 6), tmp.path() / "a");
  const std::string raw_b = make_run(tmp, "b", 2, 6, std::pair{1, 1}, 0, true);
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  std::istringstream rank1(read(fs::path(raw_b) / "rank1.jsonl"));
  std::string kept1, moved, line;
  while (std::getline(rank1, line)) (line.find("\"step\":1,") != std::string::npos ? moved : kept1) += line + "\n";
  std::istringstream rank0(read(fs::path(raw_b) / "rank0.jsonl"));
  std::string text0;
  while (std::getline(rank0, line)) {
    if (line.rfind("{\"dtrace\"", 0) == 0) line.replace(line.find(",\"rank\":0"), 9, "");  // its writer declares nothing
    text0 += line + "\n";
    if (line.find("\"step\":3,\"rank\":0,\"end\"") != std::string::npos) text0 += moved;
  }
  const fs::path laid = tmp.path() / "laid-b";
  fs::create_directories(laid);
  write_text((laid / "rank0.jsonl").string(), text0);
  write_text((laid / "rank1.jsonl").string(), kept1);
  const std::string b = chained_copy(laid, tmp.path() / "b");
  const Both both = diff_both(a, b);
  require_same(both, "stray step");
  REQUIRE(both.search.ok());
  REQUIRE(both.search->first);
  CHECK(both.search->first->rank == 1);
  CHECK(both.search->first->step == 1);
  CHECK_FALSE(both.search->searched);
  CHECK(has_note(*both.search, "rank0.jsonl: its header does not declare that it holds one rank"));
}

TEST_CASE("run B keeping one rank in two files is read in full, as run A would be", "[search]") {
  TempDir tmp;
  // Each run must hold one file per rank to be searched, B as much as A. B
  // spread rank 0 over rank0.jsonl (steps 0-3) and, after rank1.jsonl in
  // file order, resumed-rank0.jsonl (steps 4-5), each file declaring rank 0,
  // and differs at step 4. Taking rank0.jsonl for B's rank 0 would tell the
  // user a false reason for reading in full (that B's rank 0 holds steps 0-3);
  // the next case is where it would give a false answer.
  const std::string a = chained_copy(make_run(tmp, "a", 2, 6), tmp.path() / "a");
  const std::string raw_b = make_run(tmp, "b", 2, 6, std::pair{0, 4});
  std::ifstream in(fs::path(raw_b) / "rank0.jsonl", std::ios::binary);
  std::string header, line, early, late;
  std::getline(in, header);
  while (std::getline(in, line)) (line.find("\"step\":4,") != std::string::npos ||
                                  line.find("\"step\":5,") != std::string::npos ? late : early) += line + "\n";
  const fs::path laid = tmp.path() / "laid-b";
  fs::create_directories(laid);
  write_text((laid / "rank0.jsonl").string(), header + "\n" + early);
  write_text((laid / "resumed-rank0.jsonl").string(), header + "\n" + late);
  fs::copy_file(fs::path(raw_b) / "rank1.jsonl", laid / "rank1.jsonl");
  const std::string b = chained_copy(laid, tmp.path() / "b");
  const Both both = diff_both(a, b);
  require_same(both, "B's rank 0 in two files");
  REQUIRE(both.search.ok());
  REQUIRE(both.search->first);
  CHECK(both.search->first->rank == 0);
  CHECK(both.search->first->step == 4);
  CHECK_FALSE(both.search->searched);
  CHECK(has_note(*both.search, "run B keeps rank 0 in more than one file"));
}

TEST_CASE("run B writing a step of rank 0 again in another file is read in full, as run A would be", "[search]") {
  TempDir tmp;
  // B's rank0.jsonl is A's, chains and all; resumed-rank0.jsonl, after
  // rank1.jsonl in file order and declaring rank 0 too, holds rank 0's step 4
  // again, differing. Searching rank0.jsonl alone as B's rank 0 would call the
  // runs identical.
  const std::string a = chained_copy(make_run(tmp, "a", 2, 6), tmp.path() / "a");
  const std::string raw_b = make_run(tmp, "b", 2, 6);
  const std::string raw_again = make_run(tmp, "again", 2, 6, std::pair{0, 4});
  std::ifstream in(fs::path(raw_again) / "rank0.jsonl", std::ios::binary);
  std::string line, again;
  std::getline(in, line);  // its header names another run: B's is taken below
  while (std::getline(in, line)) {
    if (line.find("\"step\":4,") != std::string::npos) again += line + "\n";
  }
  const fs::path laid = tmp.path() / "laid-b";
  fs::create_directories(laid);
  fs::copy_file(fs::path(raw_b) / "rank0.jsonl", laid / "rank0.jsonl");
  fs::copy_file(fs::path(raw_b) / "rank1.jsonl", laid / "rank1.jsonl");
  std::ifstream b0(fs::path(raw_b) / "rank0.jsonl", std::ios::binary);
  std::string header;
  std::getline(b0, header);
  write_text((laid / "resumed-rank0.jsonl").string(), header + "\n" + again);
  const std::string b = chained_copy(laid, tmp.path() / "b");
  const Both both = diff_both(a, b);
  require_same(both, "B's rank 0 step 4 written again");
  REQUIRE(both.search.ok());
  REQUIRE(both.search->first);
  CHECK(both.search->first->rank == 0);
  CHECK(both.search->first->step == 4);
  CHECK_FALSE(both.search->searched);
  CHECK(has_note(*both.search, "run B keeps rank 0 in more than one file"));
}

// ---------------------------------------------------------------------------
// The property: on any layout dtrace-fp(5) allows, a searched diff answers
// exactly what --stream answers. Random runs and differences, laid out as a
// recorder writes them and as other writers may (a rank spread over files,
// another rank's lines inside a file, steps out of order, ranks sharing a
// file, one file for the whole run, a crash), each checked both ways.
// Seeded: DTRACE_PROPERTY_SEED and DTRACE_PROPERTY_CASES reproduce or widen a run.
namespace {

// One record line without its step/rank (filled in when laid out).
struct GenRecord {
  std::string scope, op, io, name;
  std::string value;  // 16 hex digits (a hash) or 8 (f32 bits for the metric)
};

// A run as records per (rank, step), before any layout.
struct GenRun {
  int world = 1;
  int first = 0, steps = 1;
  std::map<std::pair<int, int>, std::vector<GenRecord>> records;  // (rank, step) -> in seq order
};

std::string hex16(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// Each step: a gemm (in x, out y) per layer, an allreduce of y (in, out: the
// same sum on every rank) and the loss. `taint` (rank, step) changes that
// rank's gemm output of one layer from that step on (or at it alone), and the
// change flows: the allreduce's input there, its output on every rank, and
// every later step's inputs.
GenRun generate(int world, int first, int steps, int layers,
                std::optional<std::tuple<int, int, int>> taint, bool once) {
  GenRun run;
  run.world = world;
  run.first = first;
  run.steps = steps;
  for (int s = first; s < first + steps; ++s) {
    const bool hit_step = taint && (once ? s == std::get<1>(*taint) : s >= std::get<1>(*taint));
    const bool after = taint && !once && s > std::get<1>(*taint);
    for (int r = 0; r < world; ++r) {
      std::vector<GenRecord> recs;
      for (int l = 0; l < layers; ++l) {
        const std::string scope = "fwd/layer." + std::to_string(l);
        const bool mine = hit_step && std::get<0>(*taint) == r && std::get<2>(*taint) == l;
        const bool downstream = hit_step && std::get<0>(*taint) == r && l > std::get<2>(*taint);
        const std::uint64_t base = static_cast<std::uint64_t>(s) * 1000003u + static_cast<std::uint64_t>(r) * 101u +
                                   static_cast<std::uint64_t>(l) * 7u;
        recs.push_back({scope, "gemm", "in", "x", hex16(base * 2 + ((after || downstream) ? 1 : 0))});
        recs.push_back({scope, "gemm", "out", "y", hex16(base * 3 + ((mine || after || downstream) ? 1 : 0))});
      }
      const bool mine = hit_step && std::get<0>(*taint) == r;
      recs.push_back({"comm/allreduce", "allreduce", "in", "x", hex16(static_cast<std::uint64_t>(s) * 17 + r + (mine ? 1 : 0))});
      recs.push_back({"comm/allreduce", "allreduce", "out", "y", hex16(static_cast<std::uint64_t>(s) * 19 + (hit_step ? 1 : 0))});
      recs.push_back({"step", "loss", "metric", "loss", hex16(static_cast<std::uint64_t>(s) + (hit_step || after ? 1 : 0)).substr(8)});
      run.records[{r, s}] = std::move(recs);
    }
  }
  return run;
}

std::string record_line(int rank, int step, std::size_t seq, const GenRecord& g) {
  std::ostringstream o;
  o << R"({"step":)" << step << R"(,"rank":)" << rank << R"(,"seq":)" << seq << R"(,"scope":")" << g.scope
    << R"(","op":")" << g.op << R"(","io":")" << g.io << R"(","name":")" << g.name << '"';
  if (g.io == "metric") {
    o << R"(,"dtype":"f32","bits":")" << g.value << "\"}";
  } else {
    o << R"(,"dtype":"bf16","shape":[4,4],"hash":")" << g.value << "\"}";
  }
  return o.str();
}

// The lines of one (rank, step): its records, then its end record (chained
// and numbered later by add_chains, in the file it lands in).
std::vector<std::string> step_lines(const GenRun& run, int rank, int step) {
  std::vector<std::string> out;
  const auto& recs = run.records.at({rank, step});
  for (std::size_t i = 0; i < recs.size(); ++i) out.push_back(record_line(rank, step, i, recs[i]));
  out.push_back(R"({"step":)" + std::to_string(step) + R"(,"rank":)" + std::to_string(rank) +
                R"(,"end":true,"count":)" + std::to_string(recs.size()) + "}");
  return out;
}

enum class Layout { recorder, undeclared, spread, stray, shuffled, shared, single };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::recorder: return "recorder";
    case Layout::undeclared: return "undeclared";
    case Layout::spread: return "spread";
    case Layout::stray: return "stray";
    case Layout::shuffled: return "shuffled";
    case Layout::shared: return "shared";
    case Layout::single: return "single";
  }
  return "?";
}

std::string header_text(const GenRun& run, const std::string& name) {
  return R"({"dtrace":"fp/1","run":")" + name + R"(","world_size":)" + std::to_string(run.world) +
         R"(,"hash":"xxh3-64k/1","level":"layer"})";
}

// Writes `run` laid out as `layout` under `dir` (a directory, or `dir`.jsonl
// for a single-file run), chained by add_chains (which declares the rank of a
// file that holds one rank in step order, as a recorder does). Returns the
// path to diff. `crash`: the last file written loses its last end record, or
// (crash 2) has its last line cut short.
std::string lay_out(const GenRun& run, Layout layout, const fs::path& dir, std::mt19937_64& rng, int crash) {
  const fs::path raw = dir.string() + "-raw";
  fs::create_directories(raw);
  std::map<std::string, std::vector<std::string>> files;  // name -> lines after the header
  auto rank_name = [](int r) { return "rank" + std::to_string(r) + ".jsonl"; };
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  const int last = run.first + run.steps - 1;
  switch (layout) {
    case Layout::recorder:
    case Layout::undeclared:
      for (int r = 0; r < run.world; ++r) {
        for (int s = run.first; s <= last; ++s) {
          for (auto& l : step_lines(run, r, s)) files[rank_name(r)].push_back(l);
        }
      }
      break;
    case Layout::spread: {  // each rank's steps in two files, split at a random step
      for (int r = 0; r < run.world; ++r) {
        const int split = run.first + pick(run.steps + 1);
        for (int s = run.first; s <= last; ++s) {
          const std::string name = s < split ? rank_name(r) : "rank" + std::to_string(r) + "-late.jsonl";
          for (auto& l : step_lines(run, r, s)) files[name].push_back(l);
        }
      }
      break;
    }
    case Layout::stray: {  // one step of some rank written in the middle of another rank's file
      const int from = pick(run.world), into = (from + 1 + pick(std::max(1, run.world - 1))) % run.world;
      const int moved = run.first + pick(run.steps);
      for (int r = 0; r < run.world; ++r) {
        for (int s = run.first; s <= last; ++s) {
          if (r == from && s == moved && from != into) continue;
          for (auto& l : step_lines(run, r, s)) files[rank_name(r)].push_back(l);
          if (r == into && s == run.first + run.steps / 2 && from != into) {
            for (auto& l : step_lines(run, from, moved)) files[rank_name(r)].push_back(l);
          }
        }
      }
      break;
    }
    case Layout::shuffled: {  // whole steps of a file in random order
      for (int r = 0; r < run.world; ++r) {
        std::vector<int> order;
        for (int s = run.first; s <= last; ++s) order.push_back(s);
        std::shuffle(order.begin(), order.end(), rng);
        for (int s : order) {
          for (auto& l : step_lines(run, r, s)) files[rank_name(r)].push_back(l);
        }
      }
      break;
    }
    case Layout::shared:  // two files, ranks interleaved step by step
    case Layout::single:  // one file for the run
      for (int s = run.first; s <= last; ++s) {
        for (int r = 0; r < run.world; ++r) {
          const std::string name = layout == Layout::single ? "run.jsonl" : "part" + std::to_string(r % 2) + ".jsonl";
          for (auto& l : step_lines(run, r, s)) files[name].push_back(l);
        }
      }
      break;
  }
  std::string last_name;
  for (auto& [name, lines] : files) {
    std::string text = header_text(run, dir.filename().string()) + "\n";
    for (auto& l : lines) text += l + "\n";
    write_text((raw / name).string(), text);
    last_name = name;
  }
  const bool single = layout == Layout::single;
  const fs::path out = single ? fs::path(dir.string() + ".jsonl") : dir;
  if (single) {
    add_chains(raw / "run.jsonl", out);
  } else {
    chained_copy(raw, out);
  }
  if (layout == Layout::undeclared) {
    // A writer that chains but does not declare (an older recorder): drop the field.
    for (const auto& entry : fs::directory_iterator(out)) {
      std::ifstream in(entry.path(), std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const auto at = text.find(",\"rank\":");
      const auto eol = text.find('\n');
      if (at != std::string::npos && at < eol) text.erase(at, text.find('}', at) - at);
      write_text(entry.path().string(), text);
    }
  }
  if (crash > 0) {
    const fs::path victim = single ? out : out / last_name;
    std::ifstream in(victim, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text.pop_back();  // the last newline
    const auto cut = text.rfind('\n');
    if (crash == 1) {
      text.erase(cut + 1);  // the last end record gone: an incomplete last step
    } else {
      text.erase(cut + 1 + (text.size() - cut - 1) / 2);  // the last line cut short
    }
    write_text(victim.string(), text);
  }
  return out.string();
}

}  // namespace

TEST_CASE("property: a searched diff answers what --stream answers, on every layout", "[search][property]") {
  std::uint64_t seed = 20261202;
  int cases = 240;
  if (const char* s = std::getenv("DTRACE_PROPERTY_SEED")) seed = std::stoull(s);
  if (const char* c = std::getenv("DTRACE_PROPERTY_CASES")) cases = std::stoi(c);
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  int searched = 0, diverged = 0;
  std::map<std::string, int> seen;
  for (int k = 0; k < cases; ++k) {
    TempDir tmp;
    const int world = 1 + pick(4), steps = 1 + pick(12), layers = 1 + pick(2);
    const int first = pick(3) == 0 ? pick(5) : 0;
    std::optional<std::tuple<int, int, int>> taint;
    if (pick(4) != 0) taint = std::tuple{pick(world), first + pick(steps), pick(layers)};
    const bool once = pick(3) == 0;
    // A's layout is the recorder's most of the time; B's is anything.
    const Layout la = pick(3) != 0 ? Layout::recorder : static_cast<Layout>(pick(7));
    const Layout lb = pick(2) == 0 ? Layout::recorder : static_cast<Layout>(pick(7));
    const int crash = pick(5) == 0 ? 1 + pick(2) : 0;
    // B may also hold fewer steps (stopped early) or start later (resumed).
    const int b_first = pick(8) == 0 ? first + pick(steps) : first;
    const int b_steps = std::max(1, (pick(8) == 0 ? steps - pick(steps) : steps) - (b_first - first));
    const GenRun a = generate(world, first, steps, layers, std::nullopt, false);
    const GenRun b = generate(world, b_first, b_steps, layers, taint, once);
    const std::string what = "case " + std::to_string(k) + " (seed " + std::to_string(seed) + "): world " +
                             std::to_string(world) + ", steps " + std::to_string(first) + "+" + std::to_string(steps) +
                             ", B " + std::to_string(b_first) + "+" + std::to_string(b_steps) + ", A " +
                             layout_name(la) + ", B " + layout_name(lb) + ", crash " + std::to_string(crash) +
                             (taint ? ", taint rank " + std::to_string(std::get<0>(*taint)) + " step " +
                                          std::to_string(std::get<1>(*taint)) + (once ? " once" : "")
                                    : ", no taint");
    const std::string pa = lay_out(a, la, tmp.path() / "a", rng, 0);
    const std::string pb = lay_out(b, lb, tmp.path() / "b", rng, crash);
    const Both both = diff_both(pa, pb);
    require_same(both, what);
    if (both.search.ok() && both.search->searched) ++searched;
    if (both.stream.ok() && both.stream->first) ++diverged;
    ++seen[std::string(layout_name(la)) + "/" + layout_name(lb)];
  }
  INFO("searched " << searched << " of " << cases << ", diverged " << diverged);
  // The generator reaches both paths: many searched answers, many divergences.
  CHECK(searched >= cases / 5);
  CHECK(diverged >= cases / 4);
  CHECK(seen.size() >= 8);
}
