#include "checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>

namespace minitrain {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[16] = {'M', 'I', 'N', 'I', 'T', 'R', 'A', 'I',
                             'N', '-', 'C', 'K', 'P', 'T', '/', '1'};

std::vector<std::int64_t> shape_words(const ModelShape& s, std::int64_t world_size) {
  return {s.vocab, s.d_model, s.n_layer, s.n_head, s.seq, s.batch, world_size};
}

class Writer {
 public:
  template <class T>
  void put(std::span<const T> items) {
    const auto* p = reinterpret_cast<const char*>(items.data());
    bytes_.insert(bytes_.end(), p, p + items.size_bytes());
  }
  template <class T>
  void put_one(const T& item) {
    put(std::span<const T>(&item, 1));
  }
  std::vector<char>& bytes() { return bytes_; }

 private:
  std::vector<char> bytes_;
};

class Reader {
 public:
  Reader(std::vector<char> bytes, std::string path)
      : bytes_(std::move(bytes)), path_(std::move(path)) {}
  template <class T>
  void get(std::span<T> items) {
    if (bytes_.size() - pos_ < items.size_bytes()) fail("truncated");
    std::memcpy(items.data(), bytes_.data() + pos_, items.size_bytes());
    pos_ += items.size_bytes();
  }
  template <class T>
  T get_one() {
    T item{};
    get(std::span<T>(&item, 1));
    return item;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("checkpoint " + path_ + ": " + why);
  }
  std::size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::vector<char> bytes_;
  std::string path_;
  std::size_t pos_ = 0;
};

// Writes BYTES to PATH so that a crash at any moment leaves either no file of
// that name or the whole file: into PATH.tmp, flushed to the disk (fsync)
// before the rename, and the directory flushed after it so the new name itself
// survives a power cut. A failed write removes its temporary file.
void write_whole_file(const std::string& path, const std::vector<char>& bytes) {
  const std::string tmp = path + ".tmp";
  int fd = -1;
  auto fail = [&](const std::string& what) {
    const std::string why = std::strerror(errno != 0 ? errno : EIO);
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("checkpoint " + path + ": " + what + ": " + why);
  };
  fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create " + tmp);
  for (std::size_t done = 0; done < bytes.size();) {
    errno = 0;
    const ssize_t got = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail("cannot write " + tmp);
    done += static_cast<std::size_t>(got);
  }
  if (::fsync(fd) != 0) fail("cannot flush " + tmp);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("cannot close " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename into place");
  const std::string parent = fs::path(path).parent_path().string();
  const int dir_fd =
      ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);  // best effort: the file itself is whole either way
    ::close(dir_fd);
  }
}

}  // namespace

std::string checkpoint_path(const std::string& dir, std::int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "ckpt-%08lld.bin", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

void write_checkpoint(const std::string& dir, const ModelShape& shape, const TrainState& state) {
  Writer w;
  w.put(std::span<const char>(kMagic));
  const auto words = shape_words(shape, static_cast<std::int64_t>(state.rngs.size()));
  w.put(std::span<const std::int64_t>(words));
  const std::int64_t n = static_cast<std::int64_t>(state.params.size());
  for (std::int64_t v : {state.step, n, state.adam_step, state.data_position}) w.put_one(v);
  w.put(std::span<const float>(state.params));
  w.put(std::span<const float>(state.adam_m));
  w.put(std::span<const float>(state.adam_v));
  for (const Xoshiro& rng : state.rngs) w.put(std::span<const std::uint64_t>(rng.s));
  const std::uint64_t sum = XXH3_64bits(w.bytes().data(), w.bytes().size());
  w.put_one(sum);

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("checkpoint directory " + dir + ": " + ec.message());
  const std::string path = checkpoint_path(dir, state.step);
  write_whole_file(path, w.bytes());
}

TrainState read_checkpoint(const std::string& path, const ModelShape& shape, int world_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("checkpoint " + path + ": cannot open");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof kMagic + 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    throw Error("checkpoint " + path + ": not a minitrain checkpoint");
  }
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (XXH3_64bits(bytes.data(), bytes.size() - 8) != stored) {
    throw Error("checkpoint " + path + ": checksum mismatch (corrupt or truncated)");
  }
  bytes.resize(bytes.size() - 8);
  Reader r(std::move(bytes), path);
  char magic[sizeof kMagic];
  r.get(std::span<char>(magic));
  const auto expected = shape_words(shape, world_size);
  std::vector<std::int64_t> words(expected.size());
  r.get(std::span<std::int64_t>(words));
  if (words != expected) {
    r.fail("made for another configuration (vocab, d_model, n_layer, n_head, seq, batch, ranks = " +
           [&] {
             std::string s;
             for (auto v : words) s += (s.empty() ? "" : ", ") + std::to_string(v);
             return s;
           }() +
           ")");
  }
  TrainState state;
  state.step = r.get_one<std::int64_t>();
  const auto n = r.get_one<std::int64_t>();
  state.adam_step = r.get_one<std::int64_t>();
  state.data_position = r.get_one<std::int64_t>();
  if (n != static_cast<std::int64_t>(Layout::of(shape).total)) r.fail("parameter count differs");
  state.params.resize(static_cast<std::size_t>(n));
  state.adam_m.resize(static_cast<std::size_t>(n));
  state.adam_v.resize(static_cast<std::size_t>(n));
  r.get(std::span<float>(state.params));
  r.get(std::span<float>(state.adam_m));
  r.get(std::span<float>(state.adam_v));
  state.rngs.resize(static_cast<std::size_t>(world_size));
  for (Xoshiro& rng : state.rngs) r.get(std::span<std::uint64_t>(rng.s));
  if (r.remaining() != 0) r.fail("trailing bytes");
  return state;
}

std::optional<std::int64_t> newest_checkpoint(const std::string& dir,
                                              std::optional<std::int64_t> max_step) {
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return std::nullopt;
  std::optional<std::int64_t> best;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() != 17 || !name.starts_with("ckpt-") || !name.ends_with(".bin")) continue;
    const std::string digits = name.substr(5, 8);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::int64_t step = std::stoll(digits);
    if (max_step && step > *max_step) continue;
    if (!best || step > *best) best = step;
  }
  return best;
}

}  // namespace minitrain
