#include "diff/bytes.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "log/intern.hpp"
#include "log/parse.hpp"
#include "log/parse_fast.hpp"
#include "util/parallel.hpp"

namespace dtrace::diff {

namespace {

// Bytes read per side at a time. A line longer than this ends the prefix
// (the reader takes it from there).
constexpr std::size_t kBlock = 1u << 20;

// What a scan needs per file but keeps from pair to pair (its thread's next
// pair takes it): at thousands of small files, one of each per file was much
// of the stage. Taken and given back under a lock, a few times per file.
template <class T>
class Pool {
 public:
  template <class Make>
  std::unique_ptr<T> take(Make make) {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        auto item = std::move(free_.back());
        free_.pop_back();
        return item;
      }
    }
    return make();
  }
  void give(std::unique_ptr<T> item) {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(item));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<T>> free_;
};

// Blocks' buffers: a block (1 MiB) is above glibc's mmap threshold, which the
// CLI's M_TRIM_THRESHOLD (cli.cpp) holds at 128 KiB, so a buffer per file was
// an mmap and an munmap per file (8,192 of each in a diff of 4,096 rank files
// a side). The stage's threads hold two each.
using BufferPool = Pool<char[]>;

// One file of a pair, read from an offset in blocks.
class Block {
 public:
  explicit Block(BufferPool& pool) : pool_(pool) {}
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() {
    if (owned_) ::close(fd_);
    if (data_ != nullptr) pool_.give(std::move(data_));
  }

  // `fd`: the reader's descriptor of the file (RunReader::descriptor), read
  // with pread beside it; -1 (a run past the descriptor budget, whose reader
  // closes files between visits): the file is opened here.
  bool open(const std::string& path, int fd, std::uint64_t offset) {
    owned_ = fd < 0;
    fd_ = owned_ ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC) : fd;
    offset_ = offset;
    data_ = pool_.take(
        [] { return std::make_unique_for_overwrite<char[]>(kBlock + log::kLinePadding); });
    return fd_ >= 0 && refill(0);
  }

  // Drops the bytes before `from` and reads until the block is full or the
  // file ends; false on a read error.
  bool refill(std::size_t from) {
    std::memmove(data_.get(), data_.get() + from, size_ - from);
    size_ -= from;
    while (size_ < kBlock && !eof_) {
      const ssize_t got =
          ::pread(fd_, data_.get() + size_, kBlock - size_, static_cast<off_t>(offset_));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return false;
      // A regular file reads short only at its end: no second read to be
      // told so (one system call per file of thousands). Were it written on
      // meanwhile, the prefix is only shorter: the reader, resuming at its
      // end, reads on to the file's end.
      if (static_cast<std::size_t>(got) < kBlock - size_) eof_ = true;
      size_ += static_cast<std::size_t>(got);
      offset_ += static_cast<std::uint64_t>(got);
    }
    std::memset(data_.get() + size_, 0, log::kLinePadding);
    return true;
  }

  const char* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  bool eof() const { return eof_; }

 private:
  BufferPool& pool_;
  int fd_ = -1;
  bool owned_ = false;
  std::uint64_t offset_ = 0;
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  bool eof_ = false;
};

// How many bytes the two blocks share from a's `pa` and b's `pb` on: memcmp
// over pages, then the differing page byte by byte.
std::size_t shared_length(const Block& a, std::size_t pa, const Block& b, std::size_t pb) {
  constexpr std::size_t kPage = 4096;
  const std::size_t n = std::min(a.size() - pa, b.size() - pb);
  const char* x = a.data() + pa;
  const char* y = b.data() + pb;
  std::size_t i = 0;
  while (i + kPage <= n && std::memcmp(x + i, y + i, kPage) == 0) i += kPage;
  while (i < n && x[i] == y[i]) ++i;
  return i;
}

// A scan's parsers, kept from file to file like the reader's own, which reads
// every file of a run with one parser: a template CanonicalLines learned from
// one file's line serves the lines of the same identity in the next file
// (the bytes after the head, which names step and rank, are the same), and
// the parser keeps its buffers, so a small file's first step is not all
// parsed in full and allocated anew.
struct Parsing {
  log::LineParser parser;
  log::CanonicalLines canonical;
  log::Intern intern;
  log::ParsedLine parsed, other;
};

// One side's lines of a shared prefix, checked as bytes.hpp says, step by step.
class StepChecker {
 public:
  StepChecker(std::int64_t world_size, const StepWindow& window, Parsing& parsing)
      : world_size_(world_size),
        window_(window),
        parser_(parsing.parser),
        canonical_(parsing.canonical),
        intern_(parsing.intern),
        parsed_(parsing.parsed),
        other_(parsing.other) {}

  enum class Line { record, step_end, refused };

  // `line` (without its newline) must be followed by log::kLinePadding
  // readable bytes.
  Line check(std::string_view line) {
    // The reader's canonical reading (log::CanonicalLines), from the step's
    // known prefix on: a line of this step, or the first of the next one.
    log::CanonicalLines::Reading r;
    if (in_step_) {
      if (starts_with(line, head_) && canonical_.read_after(line, head_.size(), step_, rank_, r)) {
        if (!r.end_record) return counted(r.io);
        if (r.count == step_records_) return end_step();
      }
    } else if (have_step_ && starts_with(line, next_head_) &&
               canonical_.read_after(line, next_head_.size(), last_step_ + 1, rank_, r) &&
               !r.end_record) {
      // Most steps follow the one before.
      start_step(last_step_ + 1, rank_);
      return counted(r.io);
    }
    return parsed(line);
  }

  // Two lines that differ only where the diff looks at neither: records of
  // one identity whose io is not compared (timing, other), so that just their
  // value and digest differ (align.cpp skips such records). Both are read by
  // the parser, as neither side's bytes vouch for the other's.
  Line check_uncompared(std::string_view a, std::string_view b) {
    if (!braced(a) || !braced(b)) return Line::refused;
    parser_.parse(b, intern_, other_);
    if (other_.kind != log::LineKind::record) return Line::refused;
    parser_.parse(a, intern_, parsed_);
    if (parsed_.kind != log::LineKind::record || parsed_.rank != other_.rank) return Line::refused;
    if (log::is_compared(parsed_.record.io) || !same_identity(parsed_.record, other_.record))
      return Line::refused;
    return accept(parsed_.record, a);
  }

  std::int32_t rank() const { return static_cast<std::int32_t>(rank_); }
  const IntervalSet& steps() const { return steps_; }
  const IntervalSet& in_window() const { return in_window_; }
  std::uint64_t records() const { return records_; }

 private:
  static bool starts_with(std::string_view line, const std::string& prefix) {
    return line.size() >= prefix.size() &&
           std::memcmp(line.data(), prefix.data(), prefix.size()) == 0;
  }

  // The bytes every line of (step, rank) starts with, in the writer's layout.
  static std::string head(std::int64_t step, std::int64_t rank) {
    return "{\"step\":" + std::to_string(step) + ",\"rank\":" + std::to_string(rank);
  }

  void start_step(std::int64_t step, std::int64_t rank) {
    in_step_ = true;
    step_ = step;
    rank_ = rank;
    step_records_ = step_compared_ = 0;
    head_ = head(step, rank);
    // A line starts with '{', so the last step's "next head" matches none.
    next_head_ = step == INT64_MAX ? std::string("\n") : head(step + 1, rank);
  }

  Line end_step() {
    in_step_ = false;
    steps_.insert(step_);
    if (window_.contains(step_)) {
      in_window_.insert(step_);
      records_ += step_compared_;
    }
    last_step_ = step_;
    have_step_ = true;
    return Line::step_end;
  }

  // Whether a line of (step, rank) may come next: the current step's, or the
  // first of a later step of the file's one rank.
  bool fits(std::int64_t step, std::int64_t rank) {
    if (rank < 0 || rank >= world_size_) return false;
    if (in_step_) return step == step_ && rank == rank_;
    if (have_step_ && (rank != rank_ || step <= last_step_)) return false;
    start_step(step, rank);
    return true;
  }

  // Blank lines, CRLF ends and the like are the reader's business.
  static bool braced(std::string_view line) {
    return !line.empty() && line.front() == '{' && line.back() == '}';
  }

  // Everything but the value and digest, which the diff ignores in records
  // it does not compare.
  static bool same_identity(const log::Record& x, const log::Record& y) {
    return x.step == y.step && x.seq == y.seq && x.rank == y.rank && x.io == y.io &&
           x.io_text == y.io_text && x.scalar == y.scalar && x.has_shape == y.has_shape &&
           x.has_value == y.has_value && x.scope == y.scope && x.op == y.op && x.name == y.name &&
           x.dtype == y.dtype && std::ranges::equal(x.shape, y.shape);
  }

  // Any other line, read by the parser that defines what lines mean.
  Line parsed(std::string_view line) {
    if (!braced(line)) return Line::refused;
    parser_.parse(line, intern_, parsed_);
    if (parsed_.kind == log::LineKind::end) {
      if (!fits(parsed_.step, parsed_.rank) || parsed_.count != step_records_) return Line::refused;
      return end_step();
    }
    if (parsed_.kind != log::LineKind::record) return Line::refused;
    return accept(parsed_.record, line);
  }

  // A record the parser read from `line`, if it may come next; its identity
  // bytes become its seq's template, as the reader's parser learns them.
  Line accept(const log::Record& r, std::string_view line) {
    if (!fits(r.step, parsed_.rank)) return Line::refused;
    canonical_.learn(line, r, [&](std::string_view identity) {
      return parser_.identity_only(identity, intern_);
    });
    return counted(r.io);
  }

  Line counted(log::Io io) {
    ++step_records_;
    step_compared_ += log::is_compared(io) ? 1 : 0;
    return Line::record;
  }

  std::int64_t world_size_;
  StepWindow window_;
  log::LineParser& parser_;
  log::CanonicalLines& canonical_;
  log::Intern& intern_;
  log::ParsedLine &parsed_, &other_;
  bool in_step_ = false, have_step_ = false;
  std::int64_t step_ = 0, last_step_ = 0, rank_ = -1;
  std::int64_t step_records_ = 0, step_compared_ = 0;
  std::string head_, next_head_;
  IntervalSet steps_, in_window_;
  std::uint64_t records_ = 0;
};

struct FilePair {
  std::size_t file_a = 0, file_b = 0;
  std::string path_a, path_b;
  int fd_a = -1, fd_b = -1;  // the readers' descriptors (RunReader::descriptor)
  log::RunReader::Position start_a, start_b;
};

// One pair's shared prefix, if it has a step.
std::optional<SharedPrefix> scan(const FilePair& pair, std::int64_t world_size,
                                 const StepWindow& window, BufferPool& pool,
                                 Pool<Parsing>& parsings) {
  Block a(pool), b(pool);
  if (!a.open(pair.path_a, pair.fd_a, pair.start_a.offset) ||
      !b.open(pair.path_b, pair.fd_b, pair.start_b.offset))
    return std::nullopt;
  std::unique_ptr<Parsing> parsing = parsings.take([] { return std::make_unique<Parsing>(); });
  struct GiveBack {
    Pool<Parsing>& pool;
    std::unique_ptr<Parsing>& item;
    ~GiveBack() { pool.give(std::move(item)); }
  } give_back{parsings, parsing};
  StepChecker checker(world_size, window, *parsing);
  std::uint64_t before_a = 0, before_b = 0;  // bytes of each file dropped from its block's front
  std::uint64_t lines = 0;
  std::uint64_t prefix_a = 0, prefix_b = 0, prefix_lines = 0;  // up to the last step's end
  // The files' offsets part where the two lines of an uncompared record differ
  // in length: a position in each block, and the bytes shared from there.
  std::size_t pa = 0, pb = 0;
  std::size_t same = shared_length(a, 0, b, 0);
  while (true) {
    const auto* newline = static_cast<const char*>(std::memchr(a.data() + pa, '\n', same));
    StepChecker::Line what = StepChecker::Line::refused;
    if (newline != nullptr) {
      const std::string_view line(a.data() + pa,
                                  static_cast<std::size_t>(newline - (a.data() + pa)));
      pa += line.size() + 1;
      pb += line.size() + 1;
      same -= line.size() + 1;
      what = checker.check(line);
    } else {
      // The next line differs, or runs on past a block's end.
      const bool at_end = pa + same == a.size() || pb + same == b.size();
      const auto* end_a =
          at_end ? nullptr
                 : static_cast<const char*>(std::memchr(a.data() + pa, '\n', a.size() - pa));
      const auto* end_b =
          at_end ? nullptr
                 : static_cast<const char*>(std::memchr(b.data() + pb, '\n', b.size() - pb));
      if (end_a == nullptr || end_b == nullptr) {
        // Read on unless the line is a whole block long or both files ended.
        if ((pa == 0 && pb == 0) || (a.eof() && b.eof())) break;
        before_a += pa;
        before_b += pb;
        if (!a.refill(pa) || !b.refill(pb)) break;
        pa = pb = 0;
        same = shared_length(a, 0, b, 0);
        continue;
      }
      const std::string_view line_a(a.data() + pa,
                                    static_cast<std::size_t>(end_a - (a.data() + pa)));
      const std::string_view line_b(b.data() + pb,
                                    static_cast<std::size_t>(end_b - (b.data() + pb)));
      pa += line_a.size() + 1;
      pb += line_b.size() + 1;
      what = checker.check_uncompared(line_a, line_b);
      if (what != StepChecker::Line::refused) same = shared_length(a, pa, b, pb);
    }
    ++lines;
    if (what == StepChecker::Line::refused) break;
    if (what == StepChecker::Line::step_end) {
      prefix_a = before_a + pa;
      prefix_b = before_b + pb;
      prefix_lines = lines;
    }
  }
  if (checker.steps().empty() || prefix_lines == 0) return std::nullopt;
  SharedPrefix prefix;
  prefix.file_a = pair.file_a;
  prefix.file_b = pair.file_b;
  prefix.rank = checker.rank();
  prefix.end_a = {pair.start_a.offset + prefix_a, pair.start_a.line + prefix_lines};
  prefix.end_b = {pair.start_b.offset + prefix_b, pair.start_b.line + prefix_lines};
  prefix.steps = checker.steps();
  prefix.in_window = checker.in_window();
  prefix.records = checker.records();
  return prefix;
}

// Files of the two runs that hold the same rank's log: those of one name, or
// the two files of two one-file runs.
std::vector<FilePair> pair_files(const log::RunReader& a, const log::RunReader& b) {
  namespace fs = std::filesystem;
  std::vector<FilePair> pairs;
  auto add = [&](std::size_t i, std::size_t j) {
    pairs.push_back({i, j, a.files()[i], b.files()[j], a.descriptor(i), b.descriptor(j),
                     a.records_start(i), b.records_start(j)});
  };
  if (a.files().size() == 1 && b.files().size() == 1) {
    add(0, 0);
    return pairs;
  }
  std::map<std::string, std::size_t> in_b;
  for (std::size_t j = 0; j < b.files().size(); ++j)
    in_b.emplace(fs::path(b.files()[j]).filename().string(), j);
  for (std::size_t i = 0; i < a.files().size(); ++i) {
    auto it = in_b.find(fs::path(a.files()[i]).filename().string());
    if (it != in_b.end()) add(i, it->second);
  }
  return pairs;
}

}  // namespace

std::vector<SharedPrefix> shared_prefixes(const log::RunReader& a, const log::RunReader& b,
                                          const StepWindow& window,
                                          const std::vector<SharedPrefix>& vouched) {
  std::vector<FilePair> pairs = pair_files(a, b);
  std::vector<bool> vouched_a(a.files().size()), vouched_b(b.files().size());
  for (const SharedPrefix& v : vouched) vouched_a.at(v.file_a) = vouched_b.at(v.file_b) = true;
  std::erase_if(pairs,
                [&](const FilePair& p) { return vouched_a[p.file_a] || vouched_b[p.file_b]; });
  std::vector<std::optional<SharedPrefix>> found(pairs.size());
  for (const SharedPrefix& v : vouched) found.emplace_back(v);
  // Pairs are independent: two threads, as diff's two readers use two cores.
  BufferPool pool;
  Pool<Parsing> parsings;
  for_each_index(pairs.size(), 2, [&](std::size_t k) {
    found[k] = scan(pairs[k], a.world_size(), window, pool, parsings);
  });
  std::map<std::int32_t, int> holders;
  for (const auto& p : found) {
    if (p) ++holders[p->rank];
  }
  std::vector<SharedPrefix> prefixes;
  for (auto& p : found) {
    if (p && holders[p->rank] == 1) prefixes.push_back(std::move(*p));
  }
  return prefixes;
}

}  // namespace dtrace::diff
