#include "watch/follow.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "log/declared.hpp"
#include "log/reader.hpp"
#include "util/intervals.hpp"

namespace dtrace::watch {

namespace fs = std::filesystem;

namespace {

// As log::RunReader: a longer line is not a record a recorder wrote.
constexpr std::size_t kMaxLine = 16u << 20;
// One visit reads at most a file's share of this budget (4 KiB to 1 MiB);
// the caller polls again at once while anything was read, so a file far
// behind is caught up a chunk at a time with the steps it completes taken in
// between. As log::RunReader's ReadLimits: memory for reading stays within
// the budget however many rank files (4,096 files: 8 KiB each; a floor of
// 16 KiB once held twice the budget there, tests/e2e/watch_scale.sh).
constexpr std::size_t kBufferBudget = log::kReadBudget;
constexpr std::size_t kMinChunk = log::kMinReadSize, kMaxChunk = log::kMaxReadSize, kHeaderChunk = 4u << 10;
// New files are looked for this often (and whenever a poll finds none yet).
constexpr auto kListingInterval = std::chrono::milliseconds(250);

bool is_jsonl(const fs::path& p) { return p.extension() == ".jsonl"; }

// Files a follower keeps open between polls: half the process's limit on open
// files (watch has two runs), less some for everything else. A run with more
// files than that (4,096 ranks under a hard limit of 4,096) is not refused:
// the files beyond it are opened for each visit and closed after it.
std::size_t descriptor_budget() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 15;
  const auto open_max = static_cast<std::size_t>(limit.rlim_cur);
  return open_max > 160 ? (open_max - 128) / 2 : 16;
}

}  // namespace

struct RunFollower::File {
  std::string path;
  std::uint32_t index = 0;
  int fd = -1;
  std::uint64_t offset = 0;     // bytes read from the file
  std::uint64_t size_seen = 0;  // its size at the last poll
  std::vector<char> buffer;     // [begin, end) unconsumed, then kLinePadding bytes
  std::size_t begin = 0, end = 0;
  std::uint64_t line = 0;       // lines consumed
  bool header_done = false;
  log::DeclaredRank declared;  // held to its header's rank declaration, as the reader holds it
  bool consumed = false;  // the last consume() took lines
  bool parked = false;    // beyond the descriptor budget: open during a visit only
  std::size_t last_records = 0;  // the records of the last step it completed
  std::int32_t last_rank = -1;

  // Complete lines wait in the buffer (the gate closed before they were taken).
  bool holds_lines() const {
    return begin < end && std::memchr(buffer.data() + begin, '\n', end - begin) != nullptr;
  }

  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

RunFollower::RunFollower(std::string path, std::shared_ptr<log::Intern> intern)
    : path_(std::move(path)),
      intern_(intern ? std::move(intern) : std::make_shared<log::Intern>()),
      descriptors_(descriptor_budget()) {
  std::error_code ec;
  single_file_ = fs::is_regular_file(path_, ec) || (!fs::exists(path_, ec) && is_jsonl(path_));
}

RunFollower::~RunFollower() = default;

std::string RunFollower::directory() const {
  if (!single_file_) return path_;
  const fs::path parent = fs::path(path_).parent_path();
  return parent.empty() ? "." : parent.string();
}

std::string RunFollower::location(const log::Record& record) const {
  return files_[record.file]->path + ":" + std::to_string(record.line);
}

bool RunFollower::all_ranks_seen() const {
  return world_size() > 0 && static_cast<std::int64_t>(ranks_seen_.size()) >= world_size();
}

bool RunFollower::at_rest() const {
  for (const auto& f : files_) {
    if (f->offset != f->size_seen || f->holds_lines()) return false;
  }
  return true;
}

bool RunFollower::end_markers() const {
  if (world_size() <= 0) return false;
  for (std::int64_t r = 0; r < world_size(); ++r) {
    std::ifstream in(fs::path(directory()) / ("rank" + std::to_string(r) + ".status"));
    std::string word;
    if (!(in >> word) || word != "exit") return false;
  }
  return true;
}

Result<void> RunFollower::discover() {
  std::vector<std::string> found;
  std::error_code ec;
  if (single_file_) {
    if (fs::is_regular_file(path_, ec)) found.push_back(path_);
  } else if (fs::is_directory(path_, ec)) {
    for (fs::directory_iterator it(path_, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code type_ec;
      if (is_jsonl(it->path()) && it->is_regular_file(type_ec)) found.push_back(it->path().string());
    }
  } else if (fs::exists(path_, ec)) {
    return Error{path_ + ": not a run (a directory of *.jsonl files or one .jsonl file)"};
  }
  std::sort(found.begin(), found.end());
  for (const std::string& p : found) {
    if (!known_.insert(p).second) continue;
    auto file = std::make_unique<File>();
    file->path = p;
    file->index = static_cast<std::uint32_t>(files_.size());
    file->parked = files_.size() >= descriptors_;
    if (file->parked && !parking_noted_) {
      parking_noted_ = true;
      notes_.push_back(path_ + ": more files than the " + std::to_string(descriptors_) +
                       " descriptors a run may keep open (half the limit on open files, ulimit -n): "
                       "the others are reopened at each poll, which is slower");
    }
    if (!file->parked) {
      if (auto r = open_file(*file); !r) return r.error();
    }
    files_.push_back(std::move(file));
  }
  return {};
}

Result<void> RunFollower::open_file(File& file) {
  if (file.fd >= 0) return {};
  file.fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) return Error{file.path + ": cannot open: " + std::strerror(errno)};
  return {};
}

Result<void> RunFollower::take_line(File& file, std::string_view text, std::uint64_t number,
                                    std::vector<log::Step>& out) {
  auto where = [&] { return file.path + ":" + std::to_string(number); };
  if (!file.header_done) {
    if (number == 1 && text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
    auto header = log::parse_header(text);
    if (!header) {
      return Error{where() + ": " + header.error().message + " (a log's first line must be its dtrace-fp/1 header)"};
    }
    header->file = file.path;
    if (!headers_.empty()) {
      const log::Header& first = headers_.front();
      if (header->world_size != first.world_size) {
        return Error{where() + ": world_size " + std::to_string(header->world_size) + " disagrees with " +
                     first.file + " (" + std::to_string(first.world_size) + ")"};
      }
      if (header->hash != first.hash) {
        return Error{where() + ": hash \"" + header->hash + "\" disagrees with " + first.file + " (\"" +
                     first.hash + "\")"};
      }
    }
    file.declared = log::DeclaredRank(header->rank);
    headers_.push_back(std::move(*header));
    file.header_done = true;
    return {};
  }
  parser_.parse(text, *intern_, parsed_);
  log::ParsedLine& p = parsed_;
  if (p.kind == log::LineKind::malformed) return Error{where() + ": " + p.problem};
  if (p.kind == log::LineKind::header) return Error{where() + ": a second header in one file"};
  if (p.rank < 0 || p.rank >= world_size()) {
    return Error{where() + ": rank " + std::to_string(p.rank) + " is outside world_size " +
                 std::to_string(world_size())};
  }
  const auto rank = static_cast<std::int32_t>(p.rank);
  const std::int64_t step = p.kind == log::LineKind::end ? p.step : p.record.step;
  if (std::string why = file.declared.check(p.rank, step, p.kind == log::LineKind::end); !why.empty()) {
    return Error{where() + ": " + why};
  }
  auto [it, fresh] = pending_.try_emplace({rank, step});
  PendingStep& pending = it->second;
  if (fresh) {
    pending.step.rank = rank;
    pending.step.step = step;
    // A rank's steps are mostly alike: room for the last one's records at once
    // rather than a vector grown record by record (copies, and twice the room).
    pending.step.records.reserve(file.last_records);
    auto done = last_complete_.find(rank);
    // A record of a step already handed out: the end record undercounted.
    if (done != last_complete_.end() && step <= done->second) pending.step.status = log::StepStatus::late;
  }
  if (p.kind == log::LineKind::end) {
    if (pending.end_seen && pending.step.declared_count != p.count) {
      pending.step.status = log::StepStatus::count_mismatch;
    }
    pending.end_seen = true;
    pending.step.declared_count = p.count;
  } else {
    p.record.file = file.index;
    p.record.line = number;
    pending.step.records.push_back(p.record);
    ++records_read_;
  }
  const auto have = static_cast<std::int64_t>(pending.step.records.size());
  if (pending.end_seen && pending.step.status == log::StepStatus::complete && have >= pending.step.declared_count) {
    if (have > pending.step.declared_count) pending.step.status = log::StepStatus::count_mismatch;
    auto& records = pending.step.records;
    auto by_seq = [](const log::Record& a, const log::Record& b) { return a.seq < b.seq; };
    // Recorders write a step's records in seq order: checking is linear, while
    // sorting sorted records was an eighth of watch's time at 1 GB/s (perf).
    if (!std::is_sorted(records.begin(), records.end(), by_seq)) {
      std::stable_sort(records.begin(), records.end(), by_seq);
    }
    file.last_records = records.size();
    if (pending.step.status == log::StepStatus::complete) {
      auto& last = last_complete_[rank];
      last = std::max(last, step);
      ranks_seen_.insert(rank);
    }
    file.last_rank = rank;
    out.push_back(std::move(pending.step));
    pending_.erase(it);
  }
  return {};
}

// Consumes the file's buffered complete lines. With a gate, stops after a
// line that completed a step once the gate closes for that step's rank, so a
// side ahead of the other holds a step or two per rank, not a chunk's worth.
// Returns whether it stopped at the gate.
Result<bool> RunFollower::consume(File& file, const Sink& sink, const Gate& gate) {
  char* data = file.buffer.data();
  const std::size_t started = file.begin;
  while (file.begin < file.end) {
    const char* newline = static_cast<const char*>(std::memchr(data + file.begin, '\n', file.end - file.begin));
    if (newline == nullptr) break;  // a line still being written: wait for its end
    const std::size_t stop = static_cast<std::size_t>(newline - data);
    std::string_view text(data + file.begin, stop - file.begin);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    const std::uint64_t number = ++file.line;
    file.begin = stop + 1;
    if (text.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (auto r = take_line(file, text, number, completed_); !r) return r.error();
    if (completed_.empty()) continue;
    for (log::Step& step : completed_) sink(std::move(step));
    completed_.clear();
    if (gate && !gate(file.last_rank)) {
      file.consumed = true;
      return true;
    }
  }
  file.consumed = file.begin != started;
  return false;
}

// Consumes what is buffered, then (unless the gate closed) reads one chunk of
// the file if it has grown and consumes its complete lines. Returns whether
// anything was read.
Result<bool> RunFollower::read_file(File& file, const Sink& sink, const Gate& gate) {
  auto stopped = consume(file, sink, gate);
  if (!stopped) return stopped.error();
  // Lines consumed from the buffer are progress too: the run is not at rest.
  bool read = file.consumed;
  if (!*stopped && file.offset < file.size_seen) {
    if (file.begin > 0) {
      std::memmove(file.buffer.data(), file.buffer.data() + file.begin, file.end - file.begin);
      file.end -= file.begin;
      file.begin = 0;
    }
    // Until its header is read a file gives a small chunk: the caller compares
    // nothing before both runs' headers are known, and what was read meanwhile
    // waits in memory.
    const std::size_t chunk =
        file.header_done ? std::clamp(kBufferBudget / std::max<std::size_t>(1, files_.size()), kMinChunk, kMaxChunk)
                         : kHeaderChunk;
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, file.size_seen - file.offset));
    file.buffer.resize(file.end + want + log::kLinePadding);
    const ssize_t got = ::pread(file.fd, file.buffer.data() + file.end, want, static_cast<off_t>(file.offset));
    if (got < 0) return Error{file.path + ": cannot read: " + std::strerror(errno)};
    if (got == 0) {
      file.size_seen = file.offset;  // truncated under us; read again when it grows
      return false;
    }
    read = true;
    file.offset += static_cast<std::uint64_t>(got);
    bytes_read_ += static_cast<std::uint64_t>(got);
    file.end += static_cast<std::size_t>(got);
    std::memset(file.buffer.data() + file.end, 0, log::kLinePadding);
    stopped = consume(file, sink, gate);
    if (!stopped) return stopped.error();
  }
  // Many files: between visits a file keeps only what it has not consumed, so
  // thousands of rank files hold kilobytes each, not a chunk each.
  if (files_.size() * kMinChunk > kBufferBudget / 4 && file.buffer.size() > 2 * (file.end - file.begin) + 4096) {
    std::vector<char> rest(file.buffer.begin() + static_cast<std::ptrdiff_t>(file.begin),
                           file.buffer.begin() + static_cast<std::ptrdiff_t>(file.end));
    rest.resize(rest.size() + log::kLinePadding);
    file.buffer.swap(rest);
    file.end -= file.begin;
    file.begin = 0;
  }
  if (!*stopped && file.end - file.begin > kMaxLine) {
    return Error{file.path + ":" + std::to_string(file.line + 1) + ": line longer than " +
                 std::to_string(kMaxLine >> 20) + " MiB without a newline: not a dtrace-fp/1 log"};
  }
  return read;
}

Result<bool> RunFollower::poll(const Sink& sink, const Gate& gate) {
  const auto now = std::chrono::steady_clock::now();
  if (files_.empty() || now - last_listing_ >= kListingInterval) {
    last_listing_ = now;
    if (auto r = discover(); !r) return r.error();
  }
  bool grew = false;
  bool read = false;
  for (auto& file : files_) {
    if (auto r = open_file(*file); !r) return r.error();
    // A parked file is closed again after its visit, whichever way it ends.
    struct Park {
      File& f;
      ~Park() {
        if (f.parked && f.fd >= 0) {
          ::close(f.fd);
          f.fd = -1;
        }
      }
    } park{*file};
    struct stat st{};
    if (::fstat(file->fd, &st) != 0) return Error{file->path + ": cannot stat: " + std::strerror(errno)};
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size != file->size_seen) {
      grew = true;
      file->size_seen = size;
    }
    if (gate && file->header_done && !gate(file->last_rank)) continue;
    auto r = read_file(*file, sink, gate);
    if (!r) return r.error();
    read = read || *r;
  }
  // What was read may have left more to read: report it as growth so the
  // caller polls again at once instead of waiting.
  return grew || read;
}

std::vector<log::Step> RunFollower::finish() {
  std::vector<log::Step> left;
  for (auto& file : files_) {
    // Complete lines still buffered are taken first (no gate now).
    auto taken = consume(*file, [&left](log::Step step) { left.push_back(std::move(step)); }, {});
    if (!taken) notes_.push_back(taken.error().message);
    if (file->begin == file->end) continue;
    std::string_view text(file->buffer.data() + file->begin, file->end - file->begin);
    const std::uint64_t number = file->line + 1;
    // A last line without its newline: used when it is whole, noted when cut short.
    bool used = false;
    if (file->header_done) {
      parser_.parse(text, *intern_, parsed_);
      used = parsed_.kind != log::LineKind::malformed;
    }
    if (used) {
      if (auto r = take_line(*file, text, number, left); !r) used = false;
    }
    if (!used) notes_.push_back(file->path + ":" + std::to_string(number) + ": last line cut short (truncated by a crash?); ignored");
    file->begin = file->end;
  }
  for (auto& [key, pending] : pending_) {
    log::Step& s = pending.step;
    if (s.status == log::StepStatus::complete) {
      s.status = pending.end_seen ? log::StepStatus::count_mismatch : log::StepStatus::incomplete;
    }
    left.push_back(std::move(s));
  }
  pending_.clear();
  return left;
}

}  // namespace dtrace::watch
