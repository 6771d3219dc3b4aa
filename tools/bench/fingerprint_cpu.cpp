// The hashing alone, without the cost of mapping the file's pages: the file is
// mapped with MAP_POPULATE (page tables filled before timing), then, alternating,
// one XXH3_64bits pass, dtrace::fingerprint on 1 thread and on all cores.
// Separates what the fingerprint's chunking costs from what the kernel costs,
// which tools/bench/fingerprint.sh's whole-process rows include. Then each XXH3
// implementation this CPU runs (dtrace::xxh3_implementations: AVX-512, AVX2,
// the library's) over a 64 KiB buffer and a 1 MiB one hashed again and again
// (in the caches: what a step's freshly written tensors are) and over the whole
// mapping (from memory).
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
#include "fingerprint/xxh3.hpp"

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
  // Per implementation: seconds per GiB hashed, so the sizes compare. The
  // implementations alternate within each repeat, as the rows above do.
  const auto implementations = dtrace::xxh3_implementations();
  constexpr double gib = 1073741824.0;
  for (const std::size_t bytes : {std::size_t{65536}, std::size_t{1} << 20, size}) {
    const std::size_t passes = bytes >= size ? 1 : std::max<std::size_t>(1, (std::size_t{256} << 20) / bytes);
    std::vector<std::vector<double>> times(implementations.size());
    for (int i = 0; i < repeats; ++i) {
      for (std::size_t k = 0; k < implementations.size(); ++k) {
        const auto hash = implementations[k].hash;
        sink = hash(map, bytes);  // the buffer in the caches before the clock starts
        times[k].push_back(seconds([&] {
                             for (std::size_t p = 0; p < passes; ++p) sink = hash(map, bytes);
                           }) *
                           gib / (static_cast<double>(bytes) * static_cast<double>(passes)));
      }
    }
    const char* label = bytes == 65536 ? "64k" : bytes == (std::size_t{1} << 20) ? "1m" : "file";
    for (std::size_t k = 0; k < implementations.size(); ++k)
      std::printf("impl_%s_%s %.6f\n", implementations[k].name, label, median(times[k]));
  }
  ::munmap(map, size);
  ::close(fd);
  return 0;
}
