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

// Calls `consume(data, bytes)` for each piece read from fd until end of file.
template <typename Consume>
Result<void> read_pieces(int fd, const std::string& name, Consume&& consume) {
  std::vector<char> buffer(1u << 20);
  while (true) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      return Error{name + ": read failed: " + std::strerror(errno)};
    }
    if (got == 0) return {};
    consume(buffer.data(), static_cast<std::size_t>(got));
  }
}

// An open file descriptor that closes itself.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd > STDIN_FILENO) ::close(fd);
  }
};

// Opens `path` ("-" is stdin) and says whether it is a non-empty regular file
// that can be mapped, and how big.
Result<std::size_t> open_input(const std::string& path, Fd& input, bool& mappable) {
  mappable = false;
  if (path == "-") {
    input.fd = STDIN_FILENO;
    return std::size_t{0};
  }
  input.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (input.fd < 0) return Error{path + ": cannot open: " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(input.fd, &st) != 0) return Error{path + ": cannot stat: " + std::strerror(errno)};
  if (S_ISDIR(st.st_mode)) return Error{path + ": is a directory"};
  mappable = S_ISREG(st.st_mode) && st.st_size > 0;
  return static_cast<std::size_t>(st.st_size);
}

// Maps `size` bytes of fd read-only; nullptr when the file cannot be mapped.
const void* map_input(int fd, std::size_t size) {
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return nullptr;
  ::madvise(map, size, MADV_SEQUENTIAL);
  return map;
}

}  // namespace

Result<std::uint64_t> fingerprint_file(const std::string& path, unsigned threads) {
  Fd input;
  bool mappable = false;
  auto size = open_input(path, input, mappable);
  if (!size) return size.error();
  if (mappable) {
    if (const void* map = map_input(input.fd, *size)) {
      const std::uint64_t digest = fingerprint(map, *size, threads);
      ::munmap(const_cast<void*>(map), *size);
      return digest;
    }
  }
  FingerprintStream stream;
  auto read = read_pieces(input.fd, path,
                          [&](const char* data, std::size_t bytes) { stream.update(data, bytes); });
  if (!read) return read.error();
  return stream.finish();
}

Result<std::uint64_t> fingerprint_file_with(const std::string& path,
                                            const BufferFingerprint& fingerprint_buffer) {
  Fd input;
  bool mappable = false;
  auto size = open_input(path, input, mappable);
  if (!size) return size.error();
  if (mappable) {
    if (const void* map = map_input(input.fd, *size)) {
      auto digest = fingerprint_buffer(map, *size);
      ::munmap(const_cast<void*>(map), *size);
      return digest;
    }
  }
  std::vector<char> whole;
  auto read = read_pieces(input.fd, path, [&](const char* data, std::size_t bytes) {
    whole.insert(whole.end(), data, data + bytes);
  });
  if (!read) return read.error();
  return fingerprint_buffer(whole.data(), whole.size());
}

}  // namespace dtrace
