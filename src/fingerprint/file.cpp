#include "fingerprint/file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fingerprint/fingerprint.hpp"

namespace dtrace {

namespace {

Result<std::uint64_t> fingerprint_stream(int fd, const std::string& name) {
  FingerprintStream stream;
  std::vector<char> buffer(1u << 20);
  while (true) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      return Error{name + ": read failed: " + std::strerror(errno)};
    }
    if (got == 0) break;
    stream.update(buffer.data(), static_cast<std::size_t>(got));
  }
  return stream.finish();
}

}  // namespace

Result<std::uint64_t> fingerprint_file(const std::string& path) {
  if (path == "-") return fingerprint_stream(STDIN_FILENO, "-");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{path + ": cannot open: " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Error{path + ": cannot stat: " + std::strerror(e)};
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Error{path + ": is a directory"};
  }
  Result<std::uint64_t> result = std::uint64_t{0};
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    const auto size = static_cast<std::size_t>(st.st_size);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      result = fingerprint_stream(fd, path);
    } else {
      ::madvise(map, size, MADV_SEQUENTIAL);
      result = fingerprint(map, size, /*threads=*/0);
      ::munmap(map, size);
    }
  } else {
    result = fingerprint_stream(fd, path);
  }
  ::close(fd);
  return result;
}

}  // namespace dtrace
