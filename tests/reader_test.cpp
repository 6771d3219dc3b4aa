#include "log/prefetch.hpp"
#include "log/reader.hpp"

#include <algorithm>
#include <filesystem>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support.hpp"

using dtrace::log::list_run_files;
using dtrace::log::PrefetchReader;
using dtrace::log::ReadLimits;
using dtrace::log::RunReader;
using dtrace::log::Step;
using dtrace::log::StepStatus;
using dtrace::test::TempDir;
using dtrace::test::write_text;

namespace {

std::string header(int world_size = 2) {
  return R"({"dtrace":"fp/1","run":"t","world_size":)" + std::to_string(world_size) +
         R"(,"hash":"xxh3-64k/1","level":"layer"})";
}

std::string record(int rank, int step, int seq, const std::string& name = "") {
  return R"({"step":)" + std::to_string(step) + R"(,"rank":)" + std::to_string(rank) +
         R"(,"seq":)" + std::to_string(seq) + R"(,"scope":"fwd","op":"op","io":"out","name":")" +
         (name.empty() ? "t" + std::to_string(seq) : name) + R"(","hash":"00000000000000)" +
         std::to_string(10 + seq) + R"("})";
}

std::string end(int rank, int step, int count) {
  return R"({"step":)" + std::to_string(step) + R"(,"rank":)" + std::to_string(rank) +
         R"(,"end":true,"count":)" + std::to_string(count) + "}";
}

// Lines of `steps` complete steps of `records` records for each rank.
std::vector<std::string> body(int ranks, int steps, int records) {
  std::vector<std::string> lines;
  for (int rank = 0; rank < ranks; ++rank) {
    for (int step = 0; step < steps; ++step) {
      for (int seq = 0; seq < records; ++seq) lines.push_back(record(rank, step, seq));
      lines.push_back(end(rank, step, records));
    }
  }
  return lines;
}

std::string join(const std::vector<std::string>& lines, const std::string& eol = "\n") {
  std::string out;
  for (const auto& l : lines) out += l + eol;
  return out;
}

std::unique_ptr<RunReader> open(const std::string& path, const ReadLimits& limits = {}) {
  auto reader = RunReader::open(path, limits);
  INFO((reader ? std::string() : reader.error().message));
  REQUIRE(reader.ok());
  return std::move(*reader);
}

std::vector<Step> read_all(RunReader& reader) {
  std::vector<Step> steps;
  while (true) {
    auto next = reader.next();
    INFO((next ? std::string() : next.error().message));
    REQUIRE(next.ok());
    if (!*next) break;
    steps.push_back(std::move(**next));
  }
  return steps;
}

std::string open_error(const std::string& path) {
  auto reader = RunReader::open(path);
  REQUIRE_FALSE(reader.ok());
  return reader.error().message;
}

// The error that reading the whole run ends with.
std::string read_error(const std::string& path) {
  auto reader = open(path);
  while (true) {
    auto next = reader->next();
    if (!next) return next.error().message;
    if (!*next) FAIL("read the whole run without an error");
  }
}

bool has_note(const RunReader& reader, const std::string& text) {
  return std::any_of(reader.notes().begin(), reader.notes().end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("steps come out complete and seq-sorted from shuffled lines", "[reader]") {
  TempDir dir;
  std::vector<std::string> lines = body(3, 4, 6);
  std::shuffle(lines.begin(), lines.end(), std::mt19937(42));
  const std::string file = dir.path("run.jsonl");
  write_text(file, header(3) + "\n" + join(lines));

  auto reader = open(file);
  const auto steps = read_all(*reader);
  REQUIRE(steps.size() == 12);
  std::set<std::pair<int, std::int64_t>> seen;
  for (const Step& s : steps) {
    CHECK(s.status == StepStatus::complete);
    CHECK(s.declared_count == 6);
    REQUIRE(s.records.size() == 6);
    for (std::size_t i = 0; i < s.records.size(); ++i) {
      CHECK(s.records[i].seq == static_cast<std::int64_t>(i));
      CHECK(s.records[i].rank == s.rank);
      CHECK(s.records[i].step == s.step);
    }
    seen.insert({s.rank, s.step});
  }
  CHECK(seen.size() == 12);
  CHECK(reader->records_read() == 72);
  CHECK(reader->notes().empty());
  CHECK(reader->world_size() == 3);
  CHECK(reader->hash_algorithm() == "xxh3-64k/1");
}

TEST_CASE("per-rank files in step order come out in step order per rank", "[reader]") {
  TempDir dir;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> lines;
    for (int step = 0; step < 5; ++step) {
      for (int seq = 0; seq < 3; ++seq) lines.push_back(record(rank, step, seq));
      lines.push_back(end(rank, step, 3));
    }
    write_text(dir.path("run/rank" + std::to_string(rank) + ".jsonl"), header() + "\n" + join(lines));
  }
  auto reader = open(dir.path("run"));
  CHECK(reader->files().size() == 2);
  const auto steps = read_all(*reader);
  REQUIRE(steps.size() == 10);
  std::map<int, std::int64_t> last;
  for (const Step& s : steps) {
    if (last.contains(s.rank)) CHECK(s.step == last[s.rank] + 1);
    last[s.rank] = s.step;
  }
}

TEST_CASE("a record's location is its file and line", "[reader]") {
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  write_text(file, header(1) + "\n\n" + record(0, 0, 1) + "\n" + record(0, 0, 0) + "\n" + end(0, 0, 2) + "\n");
  auto reader = open(file);
  const auto steps = read_all(*reader);
  REQUIRE(steps.size() == 1);
  CHECK(reader->location(steps[0].records[0]) == file + ":4");  // seq 0
  CHECK(reader->location(steps[0].records[1]) == file + ":3");
}

TEST_CASE("a truncated last line is a note, not an error", "[reader]") {
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  const std::string cut = record(0, 1, 1).substr(0, 30);
  write_text(file, header(1) + "\n" + join(body(1, 1, 2)) + record(0, 1, 0) + "\n" + cut);
  auto reader = open(file);
  const auto steps = read_all(*reader);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].status == StepStatus::complete);
  CHECK(steps[1].step == 1);
  CHECK(steps[1].status == StepStatus::incomplete);
  CHECK(steps[1].records.size() == 1);
  CHECK(has_note(*reader, file + ":6: last line cut short"));
}

TEST_CASE("a cut line that is not the last is an error", "[reader]") {
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  write_text(file, header(1) + "\n" + record(0, 0, 0).substr(0, 30) + "\n" + join(body(1, 1, 1)));
  CHECK(read_error(file) == file + ":2: not valid JSON");
}

TEST_CASE("reader: a step without its end record comes out incomplete", "[reader]") {
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  write_text(file, header(1) + "\n" + join(body(1, 2, 3)) + record(0, 2, 1) + "\n" + record(0, 2, 0) + "\n");
  auto reader = open(file);
  const auto steps = read_all(*reader);
  REQUIRE(steps.size() == 3);
  CHECK(steps[2].step == 2);
  CHECK(steps[2].status == StepStatus::incomplete);
  CHECK(steps[2].declared_count == -1);
  REQUIRE(steps[2].records.size() == 2);
  CHECK(steps[2].records[0].seq == 0);  // still in seq order
}

TEST_CASE("an end record that miscounts makes a count-mismatch step", "[reader]") {
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  // Step 0 claims 3 records and has 2; step 1 claims 1 and has 2.
  write_text(file, header(1) + "\n" + record(0, 0, 0) + "\n" + record(0, 0, 1) + "\n" + end(0, 0, 3) +
                       "\n" + record(0, 1, 0) + "\n" + end(0, 1, 1) + "\n" + record(0, 1, 1) + "\n");
  auto reader = open(file);
  const auto steps = read_all(*reader);
  std::map<std::int64_t, StepStatus> status;
  for (const Step& s : steps) {
    if (s.status != StepStatus::complete) status[s.step] = s.status;
  }
  CHECK(status[0] == StepStatus::count_mismatch);
  // The record after step 1's end arrives once step 1 was handed out.
  CHECK(status[1] == StepStatus::late);
}

TEST_CASE("a malformed line is an error naming file and line", "[reader]") {
  TempDir dir;
  auto lines = body(1, 2, 3);
  lines[5] = R"({"step":1,"rank":0,"seq":"one","scope":"fwd","op":"op","io":"out","name":"n","hash":"00"})";
  const std::string file = dir.path("run/rank0.jsonl");
  write_text(file, header(1) + "\n" + join(lines));
  // Line 7: the header, then lines[0..5].
  CHECK(read_error(dir.path("run")) == file + ":7: field 'seq' must be an integer");
}

TEST_CASE("CRLF line ends and blank lines", "[reader]") {
  TempDir dir;
  std::vector<std::string> lines = body(2, 2, 3);
  lines.insert(lines.begin() + 2, "");
  lines.insert(lines.begin() + 5, "   \t");
  const std::string file = dir.path("run.jsonl");
  write_text(file, "\r\n" + header() + "\r\n" + join(lines, "\r\n") + "\r\n\r\n");
  auto reader = open(file);
  const auto steps = read_all(*reader);
  REQUIRE(steps.size() == 4);
  for (const Step& s : steps) CHECK(s.status == StepStatus::complete);
  CHECK(reader->notes().empty());

  // Line numbers count the blank lines: a bad line after them is named right.
  lines.push_back("{oops}");
  write_text(file, "\r\n" + header() + "\r\n" + join(lines, "\r\n"));
  CHECK(read_error(file) == file + ":" + std::to_string(2 + lines.size()) + ": not valid JSON");
}

TEST_CASE("header errors name the file's first line", "[reader]") {
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  const std::string rest = "\n" + join(body(1, 1, 1));

  write_text(file, R"({"dtrace":"fp/2","run":"t","world_size":1,"hash":"xxh3-64k/1"})" + rest);
  std::string e = open_error(file);
  CHECK(e.rfind(file + ":1: ", 0) == 0);
  CHECK(e.find("fp/2") != std::string::npos);

  write_text(file, R"({"dtrace":"fp/1","run":"t","hash":"xxh3-64k/1"})" + rest);
  e = open_error(file);
  CHECK(e.rfind(file + ":1: header without field 'world_size'", 0) == 0);

  // Two logs concatenated into one file: the second header is named as such.
  write_text(file, header(1) + "\n" + join(body(1, 1, 1)) + header(1) + rest);
  CHECK(read_error(file) == file + ":4: a second header in one file");

  write_text(file, join(body(1, 1, 1)));  // no header at all
  CHECK(open_error(file).rfind(file + ":1: ", 0) == 0);

}

TEST_CASE("a record whose rank is not below world_size is an error", "[reader]") {
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  write_text(file, header(2) + "\n" + join(body(1, 1, 2)) + record(2, 0, 0) + "\n");
  CHECK(read_error(file) == file + ":5: rank 2 is outside world_size 2");
  write_text(file, header(2) + "\n" + end(3, 0, 0) + "\n");
  CHECK(read_error(file) == file + ":2: rank 3 is outside world_size 2");
}

TEST_CASE("files of one run must agree on world_size and hash", "[reader]") {
  TempDir dir;
  write_text(dir.path("ws/rank0.jsonl"), header(2) + "\n");
  write_text(dir.path("ws/rank1.jsonl"), header(4) + "\n");
  CHECK(open_error(dir.path("ws")).find("world_size 4 disagrees") != std::string::npos);
  write_text(dir.path("h/rank0.jsonl"), header(2) + "\n");
  write_text(dir.path("h/rank1.jsonl"), R"({"dtrace":"fp/1","world_size":2,"hash":"other/1"})" "\n");
  CHECK(open_error(dir.path("h")).rfind(dir.path("h/rank1.jsonl") + ":1: hash \"other/1\" disagrees", 0) == 0);
}

TEST_CASE("a run's files: *.jsonl only, sorted; empty files are noted", "[reader]") {
  TempDir dir;
  write_text(dir.path("run/rank1.jsonl"), header() + "\n");
  write_text(dir.path("run/rank0.jsonl"), header() + "\n" + join(body(2, 1, 1)));
  write_text(dir.path("run/notes.txt"), "not a log\n");
  write_text(dir.path("run/empty.jsonl"), "");
  auto files = list_run_files(dir.path("run"));
  REQUIRE(files.ok());
  CHECK(*files == std::vector<std::string>{dir.path("run/empty.jsonl"), dir.path("run/rank0.jsonl"),
                                           dir.path("run/rank1.jsonl")});
  auto reader = open(dir.path("run"));
  CHECK(reader->files().size() == 2);
  CHECK(has_note(*reader, "empty.jsonl: empty file, ignored"));
  CHECK(read_all(*reader).size() == 2);

  CHECK(list_run_files(dir.path("nothing")).error().message.find("no such run") != std::string::npos);
  write_text(dir.path("bare/readme.txt"), "x");
  CHECK(list_run_files(dir.path("bare")).error().message ==
        dir.path("bare") + ": a directory without *.jsonl files is not a run");
}

TEST_CASE("a byte-order mark before the header is skipped", "[reader]") {
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  write_text(file, "\xEF\xBB\xBF" + header(1) + "\n" + join(body(1, 1, 2)));
  auto reader = open(file);
  CHECK(read_all(*reader).size() == 1);
  CHECK(has_note(*reader, "byte-order mark"));
}

TEST_CASE("more rank files than may be open at once are all read", "[reader]") {
  // The reader keeps at most 64 files open, parking the least recently used and
  // resuming it later at the same place.
  TempDir dir;
  const int ranks = 70;
  for (int rank = 0; rank < ranks; ++rank) {
    std::vector<std::string> lines;
    for (int step = 0; step < 3; ++step) {
      for (int seq = 0; seq < 2; ++seq) lines.push_back(record(rank, step, seq));
      lines.push_back(end(rank, step, 2));
    }
    write_text(dir.path("run/rank" + std::to_string(100 + rank) + ".jsonl"), header(ranks) + "\n" + join(lines));
  }
  auto reader = open(dir.path("run"));
  const auto steps = read_all(*reader);
  CHECK(steps.size() == 3 * ranks);
  std::set<std::pair<int, std::int64_t>> seen;
  for (const Step& s : steps) {
    CHECK(s.status == StepStatus::complete);
    CHECK(s.records.size() == 2);
    seen.insert({s.rank, s.step});
  }
  CHECK(seen.size() == 3 * ranks);
  CHECK(reader->records_read() == 6 * ranks);
}

TEST_CASE("files that give up their buffer or descriptor between visits resume where they stopped",
          "[reader]") {
  // A run of thousands of ranks reaches these paths with the default limits;
  // small limits reach them here. Each step (40 records, about 5 KiB) is longer
  // than one 4 KiB read, so resuming mid-file at the wrong byte would show.
  TempDir dir;
  const int ranks = 12, steps = 4, records = 40;
  for (int rank = 0; rank < ranks; ++rank) {
    std::vector<std::string> lines;
    for (int step = 0; step < steps; ++step) {
      for (int seq = 0; seq < records; ++seq) lines.push_back(record(rank, step, seq));
      lines.push_back(end(rank, step, records));
    }
    write_text(dir.path("run/rank" + std::to_string(100 + rank) + ".jsonl"), header(ranks) + "\n" + join(lines));
  }
  struct Case {
    const char* what;
    ReadLimits limits;
  };
  for (const Case& c : {Case{"every file buffered and open", ReadLimits{}},
                        Case{"3 buffers, every descriptor kept", ReadLimits{3 * 4096, 0}},
                        Case{"3 buffers, 5 descriptors", ReadLimits{3 * 4096, 5}},
                        Case{"1 buffer, 1 descriptor", ReadLimits{4096, 1}}}) {
    SECTION(c.what) {
      auto reader = open(dir.path("run"), c.limits);
      const auto got = read_all(*reader);
      REQUIRE(got.size() == static_cast<std::size_t>(ranks * steps));
      std::set<std::pair<int, std::int64_t>> seen;
      for (const Step& s : got) {
        CHECK(s.status == StepStatus::complete);
        REQUIRE(s.records.size() == static_cast<std::size_t>(records));
        for (int seq = 0; seq < records; ++seq) {
          const auto& r = s.records[static_cast<std::size_t>(seq)];
          CHECK(r.seq == seq);
          CHECK(r.step == s.step);
          // Line 1 is the header; each step is its records and an end record.
          CHECK(r.line == static_cast<std::uint64_t>(2 + s.step * (records + 1) + seq));
        }
        seen.insert({s.rank, s.step});
      }
      CHECK(seen.size() == static_cast<std::size_t>(ranks * steps));
    }
  }
}

TEST_CASE("a reader holds no more descriptors than its limit, however many buffers it may keep",
          "[reader]") {
  // The buffer budget holds every file's buffer, the descriptor limit does
  // not: a file keeping its buffer keeps its descriptor, so the reader must
  // give up buffers to stay within the limit (4,096 rank files under a hard
  // limit of 1,024 failed with "Too many open files").
  TempDir dir;
  const int ranks = 12, steps = 3;
  for (int rank = 0; rank < ranks; ++rank) {
    std::vector<std::string> lines;
    for (int step = 0; step < steps; ++step) {
      lines.push_back(record(rank, step, 0));
      lines.push_back(end(rank, step, 1));
    }
    write_text(dir.path("run/rank" + std::to_string(rank) + ".jsonl"), header(ranks) + "\n" + join(lines));
  }
  auto open_descriptors = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator());
  };
  const auto before = open_descriptors();
  auto reader = open(dir.path("run"), ReadLimits{32u << 20, 3});
  long most = 0;
  std::size_t got = 0;
  while (true) {
    auto next = reader->next();
    REQUIRE(next.ok());
    if (!*next) break;
    ++got;
    most = std::max<long>(most, open_descriptors() - before);
  }
  CHECK(got == static_cast<std::size_t>(ranks * steps));
  CHECK(most <= 3);
}

TEST_CASE("a line longer than the read buffer is read whole", "[reader]") {
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  std::string long_record = record(0, 0, 1);
  long_record.insert(1, R"("blob":")" + std::string(3u << 20, 'x') + R"(",)");
  write_text(file, header(1) + "\n" + record(0, 0, 0) + "\n" + long_record + "\n" + end(0, 0, 2) + "\n");
  auto reader = open(file);
  const auto steps = read_all(*reader);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].status == StepStatus::complete);
  CHECK(steps[0].records.size() == 2);
  CHECK(reader->location(steps[0].records[1]) == file + ":3");
}

TEST_CASE("the prefetching reader hands out the same steps in the same order", "[reader][prefetch]") {
  // 3 ranks x 400 steps of 30 records: several batches (a batch closes at 256
  // steps or 8,192 records) and more than the queue holds at once.
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  write_text(file, header(3) + "\n" + join(body(3, 400, 30)));
  auto plain = open(file);
  const auto expected = read_all(*plain);
  REQUIRE(expected.size() == 1200);
  auto reader = open(file);
  PrefetchReader prefetch(*reader);
  for (const Step& want : expected) {
    auto got = prefetch.next();
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
    CHECK((*got)->rank == want.rank);
    CHECK((*got)->step == want.step);
    CHECK((*got)->records.size() == want.records.size());
  }
  // The end stays the answer.
  for (int i = 0; i < 2; ++i) {
    auto end = prefetch.next();
    REQUIRE(end.ok());
    CHECK(!end->has_value());
  }
}

TEST_CASE("steps handed back to the prefetching reader are reused and what it hands out stays right",
          "[reader][prefetch]") {
  // The comparing thread gives each step's record storage back (recycle);
  // the reader's next steps are built in it. Storage not emptied, or handed
  // out twice, would show as steps with more records or someone else's.
  TempDir dir;
  const std::string file = dir.path("run.jsonl");
  write_text(file, header(3) + "\n" + join(body(3, 400, 30)));
  auto plain = open(file);
  const auto expected = read_all(*plain);
  REQUIRE(expected.size() == 1200);
  auto reader = open(file);
  PrefetchReader prefetch(*reader);
  for (const Step& want : expected) {
    auto got = prefetch.next();
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
    Step step = std::move(**got);
    REQUIRE(step.rank == want.rank);
    REQUIRE(step.step == want.step);
    REQUIRE(step.records.size() == want.records.size());
    for (std::size_t i = 0; i < want.records.size(); ++i) {
      REQUIRE(step.records[i].seq == want.records[i].seq);
      REQUIRE(step.records[i].step == want.step);
      REQUIRE(step.records[i].digest == want.records[i].digest);
      REQUIRE(step.records[i].line == want.records[i].line);
    }
    prefetch.recycle(std::move(step));
  }
  auto end = prefetch.next();
  REQUIRE(end.ok());
  CHECK(!end->has_value());
}

TEST_CASE("the prefetching reader repeats an error and stops early without hanging", "[reader][prefetch]") {
  TempDir dir;
  const std::string bad = dir.path("bad.jsonl");
  auto lines = body(1, 600, 20);
  lines[500 * 21 + 3] = "{not json";
  write_text(bad, header(1) + "\n" + join(lines));
  {
    auto reader = open(bad);
    PrefetchReader prefetch(*reader);
    int steps = 0;
    dtrace::Result<std::optional<Step>> item = prefetch.next();
    while (item.ok() && item->has_value()) {
      ++steps;
      item = prefetch.next();
    }
    CHECK(steps == 500);
    REQUIRE(!item.ok());
    CHECK(item.error().message == bad + ":" + std::to_string(2 + 500 * 21 + 3) + ": not valid JSON");
    auto again = prefetch.next();
    REQUIRE(!again.ok());
    CHECK(again.error().message == item.error().message);
  }
  {
    // A consumer that stops after one step: the worker, blocked on a full
    // queue, must end when the prefetcher is destroyed.
    auto reader = open(dir.path("bad.jsonl"));
    PrefetchReader prefetch(*reader);
    CHECK(prefetch.next().ok());
  }
}
