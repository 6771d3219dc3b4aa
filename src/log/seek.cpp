// Binary search over a rank file's bytes (dtrace-fp(5), "Finding a step").
#include "log/seek.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dtrace::log {

namespace {

// Small reads: a probe needs one line (a few hundred bytes; longer lines make
// the read grow), and a search makes a few dozen probes.
constexpr std::size_t kChunk = 1024;
// Reads fetch whole pages, aligned: a probe's neighbours (the line before it,
// the next lines of a step) are then mostly in the same fetch, and the page
// cache and the disk move pages anyway.
constexpr std::uint64_t kPage = 4096;

std::string where(const std::string& path, std::uint64_t offset) {
  return path + " (byte " + std::to_string(offset) + ")";
}

bool blank(std::string_view text) { return text.find_first_not_of(" \t\r") == std::string_view::npos; }

}  // namespace

RankFile::~RankFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<RankFile>> RankFile::open(const std::string& path, std::uint32_t file_index,
                                                 std::shared_ptr<Intern> intern) {
  std::unique_ptr<RankFile> file(new RankFile);
  file->path_ = path;
  file->file_index_ = file_index;
  file->intern_ = std::move(intern);
  file->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file->fd_ < 0) return Error{path + ": cannot open: " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(file->fd_, &st) != 0) return Error{path + ": cannot stat: " + std::strerror(errno)};
  file->size_ = static_cast<std::uint64_t>(st.st_size);
  // The header is the first line; records start after it.
  std::uint64_t at = 0;
  for (std::size_t length = kChunk;; length *= 2) {
    const std::size_t avail = static_cast<std::size_t>(std::min<std::uint64_t>(length, file->size_));
    auto text = file->read(0, avail);
    if (!text) return text.error();
    if (const void* nl = std::memchr(text->data(), '\n', text->size())) {
      at = static_cast<std::uint64_t>(static_cast<const char*>(nl) - text->data()) + 1;
      break;
    }
    if (avail == file->size_) {
      at = file->size_;
      break;
    }
  }
  file->data_begin_ = at;
  return file;
}

// Reads [offset, offset+length) (less at the end of the file) through a
// one-fetch cache of whole aligned pages, so the lines of a probe and its
// neighbours cost one system call; padded for LineParser.
Result<std::string_view> RankFile::read(std::uint64_t offset, std::size_t length) {
  offset = std::min(offset, size_);
  const std::uint64_t stop = std::min<std::uint64_t>(offset + length, size_);
  if (offset >= cache_offset_ && stop <= cache_offset_ + cache_length_) {
    return std::string_view(buffer_.data() + (offset - cache_offset_), static_cast<std::size_t>(stop - offset));
  }
  const std::uint64_t begin = offset / kPage * kPage;
  const std::uint64_t end = std::min(size_, std::max((stop + kPage - 1) / kPage * kPage, begin + kPage));
  const auto want = static_cast<std::size_t>(end - begin);
  buffer_.assign(want + kLinePadding, '\0');
  std::size_t got = 0;
  while (got < want) {
    const ssize_t n = ::pread(fd_, buffer_.data() + got, want - got, static_cast<off_t>(begin + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{where(path_, begin + got) + ": read failed: " + std::strerror(errno)};
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes_read_ += got;
  cache_offset_ = begin;
  cache_length_ = got;
  const std::uint64_t have = std::min<std::uint64_t>(stop, begin + got);
  return std::string_view(buffer_.data() + (offset - begin), static_cast<std::size_t>(have - std::min(have, offset)));
}

Result<SeekLine> RankFile::parse_at(std::uint64_t offset, std::string_view text, std::uint64_t next) {
  SeekLine line;
  line.offset = offset;
  line.next = next;
  parser_.parse(text, *intern_, line.parsed);
  if (line.parsed.kind == LineKind::header) return Error{where(path_, offset) + ": a second header"};
  if (line.parsed.kind == LineKind::malformed) {
    return Error{where(path_, offset) + ": " + line.parsed.problem};
  }
  if (!line.end_record()) line.parsed.record.file = file_index_;
  return line;
}

Result<std::optional<SeekLine>> RankFile::line_at(std::uint64_t offset) {
  std::uint64_t start = data_begin_;
  if (offset > data_begin_) {
    // The line start after the newline at or after offset - 1.
    std::uint64_t from = offset - 1;
    for (;;) {
      if (from >= size_) return std::optional<SeekLine>{};
      auto text = read(from, static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, size_ - from)));
      if (!text) return text.error();
      if (const void* nl = std::memchr(text->data(), '\n', text->size())) {
        start = from + static_cast<std::uint64_t>(static_cast<const char*>(nl) - text->data()) + 1;
        break;
      }
      from += text->size();
    }
  }
  for (;;) {
    if (start >= size_) return std::optional<SeekLine>{};
    std::uint64_t length = kChunk;
    for (;;) {
      const std::size_t avail = static_cast<std::size_t>(std::min<std::uint64_t>(length, size_ - start));
      auto text = read(start, avail);
      if (!text) return text.error();
      if (const void* nl = std::memchr(text->data(), '\n', text->size())) {
        const auto size = static_cast<std::size_t>(static_cast<const char*>(nl) - text->data());
        const std::string_view line = text->substr(0, size);
        if (blank(line)) {
          start += size + 1;
          break;
        }
        auto parsed = parse_at(start, line, start + size + 1);
        if (!parsed) return parsed.error();
        return std::optional<SeekLine>{std::move(*parsed)};
      }
      if (start + avail == size_) {  // no newline before the end: cut short by a crash
        if (!blank(*text)) truncated_ = true;
        return std::optional<SeekLine>{};
      }
      length *= 2;
    }
  }
}

Result<std::optional<SeekLine>> RankFile::line_before(std::uint64_t offset) {
  while (offset > data_begin_) {
    // The newline before the one that ends the wanted line (at offset - 1).
    std::uint64_t start = data_begin_;
    std::uint64_t scan_end = offset - 1;  // exclusive: the wanted line's own newline
    while (scan_end > data_begin_) {
      const std::uint64_t from = scan_end > kChunk ? std::max(data_begin_, scan_end - kChunk) : data_begin_;
      auto text = read(from, static_cast<std::size_t>(scan_end - from));
      if (!text) return text.error();
      if (const void* nl = ::memrchr(text->data(), '\n', text->size())) {
        start = from + static_cast<std::uint64_t>(static_cast<const char*>(nl) - text->data()) + 1;
        break;
      }
      scan_end = from;
    }
    auto text = read(start, static_cast<std::size_t>(offset - 1 - start));
    if (!text) return text.error();
    if (blank(*text)) {
      offset = start;
      continue;
    }
    std::string line(*text);  // parse_at needs padding after the line
    line.append(kLinePadding, '\0');
    auto parsed = parse_at(start, std::string_view(line.data(), text->size()), offset);
    if (!parsed) return parsed.error();
    return std::optional<SeekLine>{std::move(*parsed)};
  }
  return std::optional<SeekLine>{};
}

Result<std::optional<SeekLine>> RankFile::first_line() {
  // Asked for by every stage of a search: parsed once.
  if (!first_) {
    auto line = line_at(data_begin_);
    if (!line) return line.error();
    first_ = std::move(*line);
  }
  return *first_;
}

Result<std::optional<SeekLine>> RankFile::last_line() {
  if (size_ <= data_begin_) return std::optional<SeekLine>{};
  auto last = read(size_ - 1, 1);
  if (!last) return last.error();
  if ((*last)[0] != '\n') {
    truncated_ = true;
    return std::optional<SeekLine>{};
  }
  return line_before(size_);
}

Result<std::optional<SeekLine>> RankFile::last_whole_line() {
  auto last = last_line();
  if (!last || *last || !truncated_) return last;
  // The newline that ends the last whole line: the last one in the file.
  std::uint64_t end = size_;
  while (end > data_begin_) {
    const std::uint64_t from = end > data_begin_ + kChunk ? end - kChunk : data_begin_;
    auto text = read(from, static_cast<std::size_t>(end - from));
    if (!text) return text.error();
    if (const void* nl = ::memrchr(text->data(), '\n', text->size())) {
      return line_before(from + static_cast<std::uint64_t>(static_cast<const char*>(nl) - text->data()) + 1);
    }
    end = from;
  }
  return std::optional<SeekLine>{};
}

Result<std::uint64_t> RankFile::lower_bound(std::int64_t step) {
  // The answer is a line start in [lo, hi]; hi is a line start or the size.
  // Earlier answers bound it: lines are sorted by step, so the answer for a
  // smaller step is at or before this one's, for a larger step at or after
  // (a search asks about nearby steps again and again).
  std::uint64_t lo = data_begin_, hi = size_;
  if (auto it = known_.lower_bound(step); it != known_.end()) {
    if (it->first == step) return it->second;
    hi = it->second;
    if (it != known_.begin()) lo = std::prev(it)->second;
  } else if (!known_.empty()) {
    lo = known_.rbegin()->second;
  }
  auto answer = search_between(step, lo, hi);
  if (answer) known_.emplace(step, *answer);
  return answer;
}

Result<std::uint64_t> RankFile::search_between(std::int64_t step, std::uint64_t lo, std::uint64_t hi) {
  while (hi - lo > 2 * kChunk) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    auto line = line_at(mid);
    if (!line) return line.error();
    if (!*line || (*line)->offset >= hi) {
      hi = mid;  // no line starts in [mid, hi): the answer is hi or before mid
      continue;
    }
    if ((*line)->step() < step) {
      lo = (*line)->next;
    } else {
      hi = (*line)->offset;
    }
  }
  std::uint64_t at = lo;
  while (at < size_) {
    auto line = line_at(at);
    if (!line) return line.error();
    if (!*line) return size_;
    if ((*line)->step() >= step) return (*line)->offset;
    at = (*line)->next;
  }
  return size_;
}

Result<SeekStep> RankFile::read_step(std::uint64_t offset, std::int64_t step,
                                     std::optional<std::int64_t> line_before) {
  SeekStep out;
  out.begin = offset;
  out.step.step = step;
  out.step.status = StepStatus::incomplete;
  std::uint64_t at = offset;
  bool contiguous = true;  // no blank line skipped: line numbers count on by one
  std::int64_t number = line_before.value_or(0);
  bool ended = false;
  while (!ended) {
    auto line = line_at(at);
    if (!line) return line.error();
    if (!*line || (*line)->step() != step) break;
    SeekLine& l = **line;
    contiguous = contiguous && l.offset == at;
    ++number;
    out.step.rank = static_cast<std::int32_t>(l.rank());
    if (l.end_record()) {
      out.step.declared_count = l.parsed.count;
      out.step.chain = l.parsed.chain;
      out.step.logged_line = l.parsed.line;
      ended = true;
    } else {
      l.parsed.record.line = static_cast<std::uint64_t>(number);
      out.step.records.push_back(l.parsed.record);
    }
    at = l.next;
  }
  out.end = at;
  if (ended) {
    out.step.status = static_cast<std::int64_t>(out.step.records.size()) == out.step.declared_count
                          ? StepStatus::complete
                          : StepStatus::count_mismatch;
    // The count from the line before agrees with the end record's own claim.
    out.numbered = line_before && contiguous && out.step.logged_line == number;
  }
  if (out.numbered) {
    out.step.end_line = number;
  } else {
    for (Record& r : out.step.records) r.line = 0;
  }
  std::stable_sort(out.step.records.begin(), out.step.records.end(),
                   [](const Record& a, const Record& b) { return a.seq < b.seq; });
  return out;
}

}  // namespace dtrace::log
