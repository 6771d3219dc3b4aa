// The hashing alone, without the cost of mapping the file's pages: the file is
// mapped with MAP_POPULATE (page tables filled before timing), then, alternating,
// one XXH3_64bits pass, dtrace::fingerprint on 1 thread and on all cores.
// Separates what the fingerprint's chunking costs from what the kernel costs,
// which tools/bench/fingerprint.sh's whole-process rows include.
//   fingerprint_cpu FILE [REPEATS]     prints `key seconds` lines (medians)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "fingerprint/fingerprint.hpp"

namespace {

template <typename Fn>
double seconds(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fingerprint_cpu FILE [REPEATS]\n");
    return 2;
  }
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const int fd = ::open(argv[1], O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size == 0) {
    std::fprintf(stderr, "fingerprint_cpu: cannot read %s\n", argv[1]);
    return 2;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (map == MAP_FAILED) return 2;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<double> xxh3, one, all;
  volatile std::uint64_t sink = 0;
  for (int i = 0; i < repeats; ++i) {
    xxh3.push_back(seconds([&] { sink = XXH3_64bits(map, size); }));
    one.push_back(seconds([&] { sink = dtrace::fingerprint(map, size, 1); }));
    all.push_back(seconds([&] { sink = dtrace::fingerprint(map, size, cores); }));
  }
  (void)sink;
  std::printf("inproc_xxh3 %.6f\ninproc_one %.6f\ninproc_all %.6f\n", median(xxh3), median(one),
              median(all));
  ::munmap(map, size);
  ::close(fd);
  return 0;
}
