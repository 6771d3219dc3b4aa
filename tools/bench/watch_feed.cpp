// watch_feed: plays a finished run into a directory at a given rate, as a job
// writing its logs would, for tools/bench/watch.sh (the lag of `dtrace watch`)
// and tests/e2e/watch_scale.sh. Before the clock starts every rank file is
// read into memory and cut at its steps (lines of one "step" value), so the
// writer formats nothing while it writes: it only writes. Then, step after
// step, each rank file gets that step's lines (one write, as a recorder writes
// a step's lines at its end; in pieces of --piece bytes when given, so lines
// are cut anywhere), and the writer sleeps until the step is due at --rate
// MB/s. --flip STEP:RANK changes one hex digit of the first "hash" of that
// rank's step, in memory: a planted divergence without a second run on disk.
// --steps FILE writes one JSON line per step: when its last byte was written
// (seconds since the epoch) and how far the writer was behind its schedule.
// Prints, as JSON, when the first and last byte were written, the rate reached
// and the writer's largest delay behind the schedule (the writer is not the
// bottleneck when that stays small).
//
//   watch_feed SRC_DIR DST_DIR [--rate MBPS] [--piece BYTES] [--flip STEP:RANK] [--steps FILE]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace {

double epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A rank file in memory: its bytes and where each step's lines begin.
struct RankFile {
  std::string bytes;
  std::vector<std::size_t> cuts;  // cuts[0]: after the header; cuts[i + 1]: after step i's lines
  int out = -1;
};

// The value of a line's "step" field, or -1 (the header, an unknown line).
long step_of(std::string_view line) {
  const auto at = line.find("\"step\":");
  if (at == std::string_view::npos) return -1;
  long step = -1;
  std::from_chars(line.data() + at + 7, line.data() + line.size(), step);
  return step;
}

RankFile load(const fs::path& path) {
  RankFile f;
  f.cuts.push_back(0);  // the header, then each step from the line its "step" changes
  f.bytes.resize(fs::file_size(path));
  std::ifstream in(path, std::ios::binary);
  in.read(f.bytes.data(), static_cast<std::streamsize>(f.bytes.size()));
  long current = -1;
  std::size_t at = 0;
  while (at < f.bytes.size()) {
    std::size_t end = f.bytes.find('\n', at);
    end = end == std::string::npos ? f.bytes.size() : end + 1;
    const long step = step_of(std::string_view(f.bytes).substr(at, end - at));
    if (step != current) {
      f.cuts.push_back(at);
      current = step;
    }
    at = end;
  }
  f.cuts.push_back(f.bytes.size());
  return f;
}

bool write_all(int fd, const char* data, std::size_t n, std::size_t piece) {
  while (n > 0) {
    const std::size_t chunk = piece > 0 ? std::min(piece, n) : n;
    const ssize_t got = ::write(fd, data, chunk);
    if (got <= 0) return false;
    data += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

// Changes one hex digit of the first "hash" in [from, to).
void flip(std::string& bytes, std::size_t from, std::size_t to) {
  const auto at = bytes.find("\"hash\":\"", from);
  if (at == std::string::npos || at + 8 >= to) {
    std::fprintf(stderr, "watch_feed: --flip: no hash in that step\n");
    std::exit(2);
  }
  char& c = bytes[at + 8];
  c = c == '0' ? '1' : '0';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: watch_feed SRC_DIR DST_DIR [--rate MBPS] [--piece BYTES] [--flip STEP:RANK] [--steps FILE]\n");
    return 2;
  }
  const std::string src = argv[1], dst = argv[2];
  double rate_mb = 1000;
  std::size_t piece = 0;
  long flip_step = -1, flip_rank = -1;
  std::string steps_path;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rate")) rate_mb = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--piece")) piece = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--steps")) steps_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--flip") && std::sscanf(argv[i + 1], "%ld:%ld", &flip_step, &flip_rank) == 2) {
    } else {
      std::fprintf(stderr, "watch_feed: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(src)) {
    if (e.path().extension() == ".jsonl") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;  // rank2 before rank10
  });
  std::vector<RankFile> files;
  std::size_t steps = 0, total = 0;
  for (const auto& n : names) {
    files.push_back(load(fs::path(src) / n));
    steps = std::max(steps, files.back().cuts.size() - 2);
    total += files.back().bytes.size();
  }
  if (flip_step >= 0) {
    if (flip_rank < 0 || static_cast<std::size_t>(flip_rank) >= files.size() ||
        static_cast<std::size_t>(flip_step) + 2 >= files[flip_rank].cuts.size()) {
      std::fprintf(stderr, "watch_feed: --flip %ld:%ld: no such step and rank file\n", flip_step, flip_rank);
      return 2;
    }
    RankFile& f = files[static_cast<std::size_t>(flip_rank)];
    flip(f.bytes, f.cuts[flip_step + 1], f.cuts[flip_step + 2]);
  }
  fs::create_directories(dst);
  for (std::size_t i = 0; i < files.size(); ++i) {
    files[i].out = ::open((fs::path(dst) / names[i]).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (files[i].out < 0) {
      std::perror(names[i].c_str());
      return 2;
    }
  }
  FILE* steps_out = steps_path.empty() ? nullptr : std::fopen(steps_path.c_str(), "w");
  const double bytes_per_second = rate_mb * 1e6;
  const auto start = std::chrono::steady_clock::now();
  const double first = epoch();
  std::size_t written = 0;
  double max_behind = 0, last_now = 0;
  // Part 0 is the headers, part s + 1 step s.
  for (std::size_t part = 0; part <= steps; ++part) {
    for (RankFile& f : files) {
      if (part + 1 >= f.cuts.size()) continue;
      const std::size_t from = f.cuts[part], to = f.cuts[part + 1];
      if (!write_all(f.out, f.bytes.data() + from, to - from, piece)) {
        std::perror("watch_feed: write");
        return 2;
      }
      written += to - from;
    }
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double due = static_cast<double>(written) / bytes_per_second;
    max_behind = std::max(max_behind, now - due);
    last_now = now;
    if (steps_out != nullptr && part > 0) {
      std::fprintf(steps_out, "{\"step\":%zu,\"written_at\":%.6f,\"behind\":%.6f}\n", part - 1, first + now,
                   std::max(0.0, now - due));
    }
    // Hold the rate: the next step starts when this one is due.
    if (due > now) std::this_thread::sleep_for(std::chrono::duration<double>(due - now));
  }
  const double last = first + last_now;  // the last byte, not the sleep after it
  for (RankFile& f : files) ::close(f.out);
  if (steps_out != nullptr) std::fclose(steps_out);
  std::printf("{\"first_write\":%.6f,\"last_write\":%.6f,\"bytes\":%zu,\"steps\":%zu,\"mb_per_s\":%.1f,"
              "\"max_behind\":%.6f}\n",
              first, last, total, steps, static_cast<double>(total) / 1e6 / std::max(last - first, 1e-9),
              max_behind);
  return 0;
}
