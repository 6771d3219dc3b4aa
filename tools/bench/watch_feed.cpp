// watch_feed: plays a finished run into a directory at a given rate, as a job
// writing its logs would, for tools/bench/watch.sh. Every rank file is created
// at the start and written round robin in pieces of --piece bytes (so lines
// are cut anywhere), the total held to --rate MB/s. Prints, as JSON, when the
// first and the last byte were written (seconds since the epoch) and the rate
// reached.
//
//   watch_feed SRC_DIR DST_DIR [--rate MBPS] [--piece BYTES]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

static double epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: watch_feed SRC_DIR DST_DIR [--rate MBPS] [--piece BYTES]\n");
    return 2;
  }
  const std::string src = argv[1], dst = argv[2];
  double rate_mb = 1000;
  std::size_t piece = 64 << 10;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rate")) rate_mb = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--piece")) piece = std::strtoul(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "watch_feed: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  struct File {
    int in = -1, out = -1;
    std::size_t size = 0, done = 0;
  };
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(src)) {
    if (e.path().extension() == ".jsonl") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  fs::create_directories(dst);
  std::vector<File> files;
  std::size_t total = 0;
  for (const auto& n : names) {
    File f;
    f.in = ::open((fs::path(src) / n).c_str(), O_RDONLY);
    f.out = ::open((fs::path(dst) / n).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f.in < 0 || f.out < 0) {
      std::perror(n.c_str());
      return 2;
    }
    f.size = fs::file_size(fs::path(src) / n);
    total += f.size;
    files.push_back(f);
  }
  std::vector<char> buffer(piece);
  const double bytes_per_second = rate_mb * 1e6;
  const auto start = std::chrono::steady_clock::now();
  const double first = epoch();
  std::size_t written = 0;
  bool left = true;
  while (left) {
    left = false;
    for (File& f : files) {
      if (f.done >= f.size) continue;
      left = true;
      const std::size_t n = std::min(piece, f.size - f.done);
      if (::pread(f.in, buffer.data(), n, static_cast<off_t>(f.done)) != static_cast<ssize_t>(n) ||
          ::write(f.out, buffer.data(), n) != static_cast<ssize_t>(n)) {
        std::perror("watch_feed");
        return 2;
      }
      f.done += n;
      written += n;
      // Hold the rate: never ahead of rate * elapsed.
      const double due = static_cast<double>(written) / bytes_per_second;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (due > elapsed) std::this_thread::sleep_for(std::chrono::duration<double>(due - elapsed));
    }
  }
  const double last = epoch();
  for (File& f : files) {
    ::close(f.in);
    ::close(f.out);
  }
  std::printf("{\"first_write\":%.6f,\"last_write\":%.6f,\"bytes\":%zu,\"mb_per_s\":%.1f}\n", first, last, total,
              static_cast<double>(total) / 1e6 / std::max(last - first, 1e-9));
  return 0;
}
