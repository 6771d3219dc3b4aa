// The baseline of tools/bench/fingerprint.sh: one plain XXH3_64bits pass over
// a file, read the way `dtrace hash` reads it (mmap, MADV_SEQUENTIAL), so the
// two differ only in the hashing.
//   xxh3_file FILE      prints the digest and the seconds spent hashing
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: xxh3_file FILE\n");
    return 2;
  }
  const int fd = ::open(argv[1], O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size == 0) {
    std::fprintf(stderr, "xxh3_file: cannot read %s\n", argv[1]);
    return 2;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return 2;
  ::madvise(map, size, MADV_SEQUENTIAL);
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t digest = XXH3_64bits(map, size);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%016" PRIx64 " %.6f\n", digest, seconds);
  ::munmap(map, size);
  ::close(fd);
  return 0;
}
