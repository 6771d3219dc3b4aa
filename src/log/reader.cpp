#include "log/reader.hpp"

#include "log/declared.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <unordered_map>

#include "log/declared.hpp"
#include "log/intern.hpp"
#include "log/parse.hpp"
#include "util/parallel.hpp"

namespace dtrace::log {

namespace {

namespace fs = std::filesystem;

// A line longer than this is not a record a recorder wrote; refusing it keeps
// memory bounded on garbage input.
constexpr std::size_t kMaxLine = 16u << 20;
// A file parked between visits (more files than the buffer budget holds)
// reads again from where it stopped: reading a whole buffer then would re-read
// and discard most of it on every visit, quadratic in the file's length. It
// reads about twice what its last visit consumed instead, in whole
// kMinReadSize pages (reader.hpp).

// Descriptors one reader may hold by default. A parked file keeps its
// descriptor while this allows, so a visit costs one pread instead of open,
// seek, read and close (at 4,096 ranks the reopening was most of the time). A
// quarter of the process's limit leaves room for the other run of a diff and
// everything else.
std::size_t default_descriptors() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1024;
  const auto cur = static_cast<std::size_t>(limit.rlim_cur);
  return std::max<std::size_t>(64, cur > 256 ? (cur - 256) / 4 : 0);
}

std::string errno_text() { return std::strerror(errno); }

// Sequential line access to one file, able to close its descriptor and buffer
// while other files are read and to resume where it stopped.
class FileCursor {
 public:
  // `max_read`: the most one read asks for, this file's share of the budget.
  // The first read, the header's, is small: the buffer is given back once the
  // header is read (park), so bytes read past it were read again later, and a
  // diff that skips a file's first steps (diff/bytes.hpp, the search's
  // prefixes) never wanted them (at 64 ranks, 32 MiB of a 145 MiB read).
  FileCursor(std::string path, std::uint32_t index, std::size_t max_read)
      : path_(std::move(path)), index_(index), max_read_(max_read), read_size_(std::min(max_read, kMinReadSize)) {}

  struct Line {
    std::string_view text;    // without the newline (and without a CR before it)
    bool terminated = false;  // ended by a newline
    std::uint64_t number = 0;
  };

  // The next non-empty line, or nullopt at end of file.
  Result<std::optional<Line>> next_line() {
    while (true) {
      if (!is_open() || !has_buffer()) {
        if (auto r = reopen(); !r) return r.error();
      }
      char* data = buffer_.get();
      const char* newline =
          static_cast<const char*>(std::memchr(data + begin_, '\n', end_ - begin_));
      if (newline == nullptr && !eof_) {
        if (auto r = fill(); !r) return r.error();
        continue;
      }
      Line line;
      line.number = ++line_number_;
      std::size_t stop = newline != nullptr ? static_cast<std::size_t>(newline - data) : end_;
      if (newline == nullptr && begin_ == end_) {
        --line_number_;
        finished_ = true;
        return std::optional<Line>{};
      }
      line.terminated = newline != nullptr;
      std::size_t length = stop - begin_;
      if (length > 0 && data[begin_ + length - 1] == '\r') --length;  // CRLF line ends
      line.text = std::string_view(data + begin_, length);
      begin_ = newline != nullptr ? stop + 1 : end_;
      if (line.number == 1 && line.text.substr(0, 3) == "\xEF\xBB\xBF") {
        line.text.remove_prefix(3);  // a UTF-8 byte-order mark some editors add
        saw_bom_ = true;
      }
      // Blank lines are skipped. A record starts with '{', so the scan (a call
      // into libc per character) is only needed when the first byte is blank.
      if (line.text.empty() || ((line.text[0] == ' ' || line.text[0] == '\t') &&
                                line.text.find_first_not_of(" \t") == std::string_view::npos)) {
        continue;
      }
      return std::optional<Line>{line};
    }
  }

  // Where the next read starts, and the last line's number, while parked.
  std::uint64_t resume_offset() const { return resume_at_; }
  std::uint64_t line_number() const { return line_number_; }
  // Resumes (while parked) at `offset`, whose line is number `line` + 1.
  void resume_from(std::uint64_t offset, std::uint64_t line) {
    resume_at_ = file_offset_ = offset;
    line_number_ = line;
  }

  bool is_open() const { return fd_ >= 0; }
  int descriptor() const { return fd_; }
  bool finished() const { return finished_; }
  bool saw_bom() const { return saw_bom_; }
  const std::string& path() const { return path_; }
  std::uint32_t index() const { return index_; }
  void set_index(std::uint32_t index) { index_ = index; }

  bool has_buffer() const { return buffer_ != nullptr; }

  // Releases the buffer, keeping the descriptor; the next read resumes at the
  // first byte not yet consumed.
  void park() {
    if (buffer_ == nullptr) return;
    const std::uint64_t consumed = file_offset_ - (end_ - begin_) - resume_at_;
    resume_at_ += consumed;
    file_offset_ = resume_at_;
    read_size_ = std::clamp<std::size_t>((2 * consumed + kMinReadSize - 1) / kMinReadSize * kMinReadSize,
                                         kMinReadSize, max_read_);
    buffer_.reset();
    capacity_ = 0;
    begin_ = end_ = 0;
    eof_ = false;
  }

  // Parks and closes the descriptor too; the next read reopens the file.
  void close_descriptor() {
    park();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  ~FileCursor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileCursor(const FileCursor&) = delete;
  FileCursor& operator=(const FileCursor&) = delete;

 private:
  // Opens the file if its descriptor was closed, and gives it a buffer again.
  Result<void> reopen() {
    if (fd_ < 0) {
      fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) return Error{path_ + ": cannot open: " + errno_text()};
    }
    file_offset_ = resume_at_;
    // Left uninitialised: reads fill it, and fill() zeroes the padding after
    // the bytes read (zero-filling the whole buffer cost more than parsing a
    // small run's first steps).
    capacity_ = read_size_;
    buffer_ = std::make_unique_for_overwrite<char[]>(capacity_ + kLinePadding);
    std::memset(buffer_.get(), 0, kLinePadding);
    begin_ = end_ = 0;
    eof_ = false;
    return {};
  }

  // Reads more bytes after the unread ones, moving them to the front first and
  // growing the buffer for a long line.
  Result<void> fill() {
    if (begin_ > 0) {
      std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (capacity_ - end_ < read_size_ / 2) {
      if (end_ > kMaxLine) {
        return Error{path_ + ":" + std::to_string(line_number_ + 1) + ": line longer than " +
                     std::to_string(kMaxLine >> 20) + " MiB: not a dtrace-fp/1 record"};
      }
      // Only the unread bytes move to the larger buffer; the rest is left
      // uninitialised for the read to fill.
      const std::size_t grown = std::max(capacity_ * 2, read_size_);
      auto larger = std::make_unique_for_overwrite<char[]>(grown + kLinePadding);
      std::memcpy(larger.get(), buffer_.get(), end_);
      buffer_ = std::move(larger);
      capacity_ = grown;
    }
    const std::size_t room = capacity_ - end_;
    ssize_t got;
    do {
      got = ::pread(fd_, buffer_.get() + end_, room, static_cast<off_t>(file_offset_));
    } while (got < 0 && errno == EINTR);
    if (got < 0) return Error{path_ + ": read failed: " + errno_text()};
    if (got == 0) eof_ = true;
    // A file read on and on (not parked) goes back to large reads.
    if (static_cast<std::size_t>(got) == room) read_size_ = std::min(read_size_ * 2, max_read_);
    end_ += static_cast<std::size_t>(got);
    file_offset_ += static_cast<std::uint64_t>(got);
    std::memset(buffer_.get() + end_, 0, kLinePadding);
    return {};
  }

  std::string path_;
  std::uint32_t index_;
  int fd_ = -1;
  // Read bytes are [begin_, end_); capacity_ bytes for reads, then kLinePadding
  // bytes the parser may read past a line's end, zeroed after each read.
  std::unique_ptr<char[]> buffer_;
  std::size_t capacity_ = 0;
  std::size_t begin_ = 0, end_ = 0;
  std::uint64_t file_offset_ = 0;
  std::uint64_t resume_at_ = 0;
  std::size_t max_read_;
  std::size_t read_size_;
  std::uint64_t line_number_ = 0;
  bool eof_ = false;
  bool finished_ = false;
  bool saw_bom_ = false;
};

struct StepKey {
  std::int32_t rank;
  std::int64_t step;
  bool operator==(const StepKey&) const = default;
};

struct StepKeyHash {
  std::size_t operator()(const StepKey& k) const {
    // Unsigned arithmetic: wraps instead of overflowing at steps near INT64_MAX.
    return std::hash<std::uint64_t>{}(static_cast<std::uint64_t>(k.step) * 1000003u +
                                      static_cast<std::uint32_t>(k.rank));
  }
};

struct PendingStep {
  Step step;
  bool end_seen = false;
};

}  // namespace

struct RunReader::Impl {
  std::shared_ptr<Intern> intern;
  LineParser parser;
  ParsedLine parsed;
  std::vector<std::unique_ptr<FileCursor>> cursors;
  std::deque<FileCursor*> buffered;  // cursors holding a buffer, least recently used first
  std::size_t max_buffered = 1;      // how many may hold one within ReadLimits::buffer_bytes
  // Whether parked files keep their descriptors: when the run has no more
  // files than the descriptor budget. Otherwise a parked file is closed.
  bool keep_descriptors = true;
  // Gives up a file's buffer between visits, and its descriptor unless kept.
  void set_aside(FileCursor& cursor) const {
    if (keep_descriptors) {
      cursor.park();
    } else {
      cursor.close_descriptor();
    }
  }
  std::size_t finished = 0;  // cursors at end of file
  std::size_t current = 0;
  std::unordered_map<StepKey, PendingStep, StepKeyHash> pending;
  StepKey last_key{};                   // the step the previous line belonged to
  PendingStep* last_pending = nullptr;  // its entry in `pending`, or null
  std::map<std::int32_t, IntervalSet> handed_out;  // complete steps already returned
  std::deque<Step> ready;
  bool drained = false;
  std::size_t typical_step_size = 0;  // records of the last step completed: a capacity hint
  std::vector<std::vector<Record>> spare;  // record storage given back (recycle), empty
  // Skipped prefixes (skip_prefix): per cursor, the visits still owed to its
  // skipped steps and the rank they belong to (-1: none); which cursor owns
  // each such rank.
  std::vector<std::int64_t> skipped_visits;
  std::vector<std::int64_t> skipped_rank;
  std::unordered_map<std::int64_t, std::size_t> skipped_owner;
  // Per file: held to its header's rank declaration, if any (Header::rank).
  std::vector<DeclaredRank> declared;
};

namespace {
// Spare record vectors kept: a few batches' worth of steps (PrefetchReader
// hands them back about a batch at a time), so memory stays what the steps
// in flight need.
constexpr std::size_t kMaxSpare = 512;
}  // namespace

void RunReader::recycle(std::vector<Record>&& records) {
  if (impl_->spare.size() >= kMaxSpare || records.capacity() == 0) return;
  records.clear();
  impl_->spare.push_back(std::move(records));
}

namespace {

// What a path is that is not a regular file or directory, for messages.
std::string kind_of(const fs::file_status& status) {
  switch (status.type()) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::block: return "a block device";
    case fs::file_type::character: return "a character device";
    case fs::file_type::not_found: return "a dangling symbolic link";
    default: return "not a regular file";
  }
}

}  // namespace

Result<std::vector<std::string>> list_run_files(const std::string& path,
                                                std::vector<std::string>* skipped) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return Error{path + ": cannot open: " + ec.message()};
  if (!fs::exists(status)) return Error{path + ": no such run (file or directory)"};
  if (fs::is_regular_file(status)) return std::vector<std::string>{path};
  if (!fs::is_directory(status)) {
    return Error{path + ": " + kind_of(status) + ", not a run (a .jsonl file or a directory of them)"};
  }
  std::vector<std::string> files, not_files;
  fs::directory_iterator it(path, ec), end;
  if (ec) return Error{path + ": cannot read directory: " + ec.message()};
  for (; it != end; it.increment(ec)) {
    if (ec) return Error{path + ": cannot read directory: " + ec.message()};
    const fs::path& entry = it->path();
    if (entry.extension() != ".jsonl") continue;
    std::error_code entry_ec;
    // The type the directory listing gave (d_type) answers for most entries
    // without a stat each (4,096 of them a run, for a diff twice per run):
    // the entry's own is_regular_file follows a symbolic link, or stats when
    // the listing did not say, as fs::status does.
    if (it->is_regular_file(entry_ec)) {
      files.push_back(entry.string());
      continue;
    }
    const auto entry_status = fs::status(entry, entry_ec);
    if (fs::is_regular_file(entry_status)) {
      files.push_back(entry.string());
    } else {
      const std::string why = entry_ec && entry_ec != std::errc::no_such_file_or_directory
                                  ? entry_ec.message()
                                  : kind_of(entry_status);
      not_files.push_back(entry.string() + ": " + why);
    }
  }
  if (ec) return Error{path + ": cannot read directory: " + ec.message()};
  std::sort(not_files.begin(), not_files.end());
  if (files.empty() && !not_files.empty()) {
    return Error{not_files.front() + ", not a file: " + path + " has no *.jsonl file to read"};
  }
  if (files.empty()) return Error{path + ": a directory without *.jsonl files is not a run"};
  std::sort(files.begin(), files.end());
  if (skipped != nullptr) {
    for (const std::string& s : not_files) skipped->push_back(s + ", ignored");
  }
  return files;
}

RunReader::RunReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RunReader::Position RunReader::records_start(std::size_t file) const {
  const FileCursor& cursor = *impl_->cursors.at(file);
  return Position{cursor.resume_offset(), cursor.line_number()};
}

void RunReader::skip_prefix(std::size_t file, Position resume, std::int32_t rank, const IntervalSet& steps) {
  Impl& impl = *impl_;
  impl.skipped_visits.resize(impl.cursors.size(), 0);
  impl.skipped_rank.resize(impl.cursors.size(), -1);
  impl.cursors.at(file)->resume_from(resume.offset, resume.line);
  impl.skipped_visits[file] = steps.size();
  impl.skipped_rank[file] = rank;
  impl.skipped_owner[rank] = file;
  impl.handed_out[rank] = steps;
  // The skipped steps were this file's lines up to `resume`: a declared file
  // is held to its order from the last of them on, as if they had been read.
  if (!steps.empty()) impl.declared.at(file).skipped_through(steps.max());
}
RunReader::~RunReader() = default;

int RunReader::descriptor(std::size_t file) const { return impl_->cursors.at(file)->descriptor(); }

std::string RunReader::location(const Record& record) const {
  return files_.at(record.file) + ":" + std::to_string(record.line);
}

Result<std::unique_ptr<RunReader>> RunReader::open(const std::string& path, const ReadLimits& limits,
                                                   std::shared_ptr<Intern> intern) {
  std::vector<std::string> skipped;
  auto files = list_run_files(path, &skipped);
  if (!files) return files.error();
  std::unique_ptr<RunReader> reader(new RunReader(std::make_unique<Impl>()));
  reader->notes_ = std::move(skipped);
  reader->path_ = path;
  Impl& impl = *reader->impl_;
  impl.intern = intern != nullptr ? std::move(intern) : std::make_shared<Intern>();
  const std::size_t descriptors = limits.descriptors > 0 ? limits.descriptors : default_descriptors();
  impl.keep_descriptors = files->size() <= descriptors;
  // Each file's reads are its share of the buffer budget, so a run of
  // thousands of ranks keeps every buffer between visits and each visit reads
  // ahead for the next ones.
  const std::size_t share = limits.buffer_bytes / files->size() / kMinReadSize * kMinReadSize;
  const std::size_t read_size = std::clamp(share, kMinReadSize, kMaxReadSize);
  impl.max_buffered = std::max<std::size_t>(1, limits.buffer_bytes / read_size);
  // A file holding a buffer holds its descriptor: when descriptors are not
  // kept, the buffered files must fit the descriptor budget too (4,096 rank
  // files under a hard limit of 1,024 failed with EMFILE).
  if (!impl.keep_descriptors) impl.max_buffered = std::min(impl.max_buffered, std::max<std::size_t>(1, descriptors));
  // Each file's header line, read and parsed on up to 32 threads (they wait
  // on the disk far more than they compute: 4,096 ranks from a cold cache in
  // 0.87 s with 32 and the search's 64, 1.25 s with 8 and 16): a run of
  // thousands of rank files waits on that many small reads (the search diff
  // reads little else), and on parsing as many headers. What they found is
  // then taken in file order, so notes, errors and file indices are what one
  // thread reading them in turn gives.
  struct Opened {
    std::unique_ptr<FileCursor> cursor;
    Result<std::optional<FileCursor::Line>> line = std::optional<FileCursor::Line>{};
    std::optional<Result<Header>> header;
  };
  std::vector<Opened> opened(files->size());
  auto open_one = [&](std::size_t i) {
    Opened& o = opened[i];
    o.cursor = std::make_unique<FileCursor>((*files)[i], 0, read_size);
    o.line = o.cursor->next_line();
    if (o.line && *o.line) o.header = parse_header((**o.line).text);
    // A file whose header is read gives back its buffer (and, past the
    // descriptor budget, its descriptor) at once, as it waits for its turn;
    // the line's text was the buffer's, and only its number and whether it
    // ended are looked at again.
    if (o.header && *o.header) impl.set_aside(*o.cursor);
  };
  const std::size_t threads = files->size() < 16 ? 1 : std::min<std::size_t>(32, files->size() / 16);
  for_each_index(files->size(), threads, open_one);
  for (std::size_t i = 0; i < files->size(); ++i) {
    const std::string& file = (*files)[i];
    Opened& o = opened[i];
    if (!o.line) return o.line.error();
    if (!*o.line) {
      reader->notes_.push_back(file + ": empty file, ignored");
      continue;
    }
    auto& header = *o.header;
    if (!header) {
      if (!(**o.line).terminated) {
        reader->notes_.push_back(file + ":1: header cut short (truncated by a crash?); file ignored");
        continue;
      }
      return Error{file + ":" + std::to_string((**o.line).number) + ": " + header.error().message +
                   " (a log's first line must be its dtrace-fp/1 header)"};
    }
    if (o.cursor->saw_bom()) reader->notes_.push_back(file + ":1: byte-order mark ignored");
    header->file = file;
    o.cursor->set_index(static_cast<std::uint32_t>(reader->files_.size()));
    reader->headers_.push_back(std::move(*header));
    reader->files_.push_back(file);
    impl.cursors.push_back(std::move(o.cursor));
    impl.declared.emplace_back(reader->headers_.back().rank);
  }
  if (reader->headers_.empty()) return Error{path + ": no file of this run has a header"};
  const Header& first = reader->headers_.front();
  for (const Header& h : reader->headers_) {
    if (h.world_size != first.world_size) {
      return Error{h.file + ":1: world_size " + std::to_string(h.world_size) + " disagrees with " +
                   first.file + " (" + std::to_string(first.world_size) + ")"};
    }
    if (h.hash != first.hash) {
      return Error{h.file + ":1: hash \"" + h.hash + "\" disagrees with " + first.file + " (\"" +
                   first.hash + "\")"};
    }
    for (const char* key : {"run", "level"}) {
      if (h.raw.value(key, nlohmann::json()) != first.raw.value(key, nlohmann::json())) {
        reader->notes_.push_back(h.file + ":1: header field '" + key + "' differs from " + first.file);
      }
    }
  }
  return reader;
}

namespace {

void finish_step(PendingStep& pending) {
  auto& records = pending.step.records;
  auto by_seq = [](const Record& a, const Record& b) { return a.seq < b.seq; };
  if (!std::is_sorted(records.begin(), records.end(), by_seq)) {
    std::stable_sort(records.begin(), records.end(), by_seq);
  }
}

}  // namespace

Result<std::optional<Step>> RunReader::next() {
  Impl& impl = *impl_;
  while (impl.ready.empty()) {
    // Every file read: what is still pending was never completed.
    if (impl.finished == impl.cursors.size()) {
      if (impl.drained) return std::optional<Step>{};
      impl.drained = true;
      std::vector<Step> left;
      for (auto& [key, pending] : impl.pending) {
        finish_step(pending);
        Step& s = pending.step;
        if (s.status == StepStatus::complete) {
          s.status = pending.end_seen ? StepStatus::count_mismatch : StepStatus::incomplete;
        }
        left.push_back(std::move(s));
      }
      impl.pending.clear();
      impl.last_pending = nullptr;
      std::sort(left.begin(), left.end(), [](const Step& a, const Step& b) {
        return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
      });
      for (Step& s : left) impl.ready.push_back(std::move(s));
      continue;
    }
    while (impl.cursors[impl.current]->finished()) {
      impl.current = (impl.current + 1) % impl.cursors.size();
    }
    FileCursor& cursor = *impl.cursors[impl.current];
    // A skipped step's visit: reading it would have completed it and moved on.
    if (!impl.skipped_visits.empty() && impl.skipped_visits[impl.current] > 0) {
      --impl.skipped_visits[impl.current];
      impl.current = (impl.current + 1) % impl.cursors.size();
      continue;
    }
    if (!cursor.has_buffer()) {
      if (impl.buffered.size() >= impl.max_buffered) {
        impl.set_aside(*impl.buffered.front());
        impl.buffered.pop_front();
      }
      impl.buffered.push_back(&cursor);
    }
    // Read this file until it completes a step (one rank file: one step), then
    // move on to the next file.
    while (impl.ready.empty()) {
      auto line_result = cursor.next_line();
      if (!line_result) return line_result.error();
      if (!*line_result) {
        cursor.close_descriptor();
        std::erase(impl.buffered, &cursor);
        ++impl.finished;
        break;
      }
      const auto& line = **line_result;
      auto where = [&] { return cursor.path() + ":" + std::to_string(line.number); };
      impl.parser.parse(line.text, *impl.intern, impl.parsed);
      ParsedLine& p = impl.parsed;
      if (p.kind == LineKind::malformed) {
        if (!line.terminated) {
          notes_.push_back(where() + ": last line cut short (truncated by a crash?); ignored");
          continue;
        }
        return Error{where() + ": " + p.problem};
      }
      if (p.kind == LineKind::header) {
        return Error{where() + ": a second header in one file"};
      }
      if (p.rank < 0 || p.rank >= world_size()) {
        return Error{where() + ": rank " + std::to_string(p.rank) + " is outside world_size " +
                     std::to_string(world_size())};
      }
      if (!impl.skipped_owner.empty() && p.rank != impl.skipped_rank[cursor.index()] &&
          impl.skipped_owner.contains(p.rank)) {
        prefix_contradicted_ = true;
        return Error{where() + ": rank " + std::to_string(p.rank) + " also in " +
                     files_[impl.skipped_owner[p.rank]] + ", whose first steps were skipped"};
      }
      const std::int64_t step = p.kind == LineKind::end ? p.step : p.record.step;
      // A search skips what chains vouch for in a declared file without
      // reading it, so the file must be what its header says, or it is an
      // error here (and in dtrace check) rather than a line the search never sees.
      if (std::string why = impl.declared[cursor.index()].check(p.rank, step, p.kind == LineKind::end);
          !why.empty()) {
        return Error{where() + ": " + why};
      }
      const StepKey key{static_cast<std::int32_t>(p.rank), step};
      // Lines of one step come together: look the step up once, not per line.
      bool inserted = false;
      if (impl.last_pending == nullptr || !(impl.last_key == key)) {
        auto [it, fresh] = impl.pending.try_emplace(key);
        inserted = fresh;
        impl.last_key = key;
        impl.last_pending = &it->second;  // map nodes do not move on rehash
      }
      PendingStep& pending = *impl.last_pending;
      if (inserted) {
        pending.step.rank = key.rank;
        pending.step.step = key.step;
        if (!impl.spare.empty()) {
          pending.step.records = std::move(impl.spare.back());
          impl.spare.pop_back();
        }
        pending.step.records.reserve(impl.typical_step_size);
        // A record for a step already handed out: the end record undercounted.
        if (impl.handed_out[key.rank].contains(step)) pending.step.status = StepStatus::late;
      }
      if (p.kind == LineKind::end) {
        if (pending.end_seen && pending.step.declared_count != p.count) {
          pending.step.status = StepStatus::count_mismatch;
        }
        pending.end_seen = true;
        pending.step.declared_count = p.count;
        pending.step.chain = p.chain;
        pending.step.logged_line = p.line;
        pending.step.end_line = static_cast<std::int64_t>(line.number);
      } else {
        p.record.file = cursor.index();
        p.record.line = line.number;
        pending.step.records.push_back(p.record);
        ++records_read_;
      }
      const auto have = static_cast<std::int64_t>(pending.step.records.size());
      if (pending.end_seen && pending.step.status == StepStatus::complete &&
          have >= pending.step.declared_count) {
        if (have > pending.step.declared_count) pending.step.status = StepStatus::count_mismatch;
        finish_step(pending);
        impl.typical_step_size = pending.step.records.size();
        if (pending.step.status == StepStatus::complete) impl.handed_out[key.rank].insert(step);
        impl.ready.push_back(std::move(pending.step));
        impl.pending.erase(key);
        impl.last_pending = nullptr;
      }
    }
    impl.current = (impl.current + 1) % impl.cursors.size();
  }
  Step step = std::move(impl.ready.front());
  impl.ready.pop_front();
  return std::optional<Step>{std::move(step)};
}

}  // namespace dtrace::log
