// Random sources of minitrain.
//
// Two kinds, kept apart on purpose:
// - Xoshiro is the per-rank dropout RNG. It is stateful (its 32-byte state is the
//   only thing that says where the stream is), saved in checkpoints and recorded as
//   state, so a restore that forgets it (`--nondet resume-rng`) changes the run.
// - Chaos is where planted nondeterminism takes its orders and garbage from. It is
//   keyed afresh at each step (and each isolated repetition) from a base that is
//   std::random_device unless `--chaos-seed` pins it: unpinned, two runs disagree;
//   pinned, a run and every replay of any of its steps agree, even after a
//   fast-forward from a checkpoint.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace minitrain {

inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A well-mixed key from a base and the parts that name a use of randomness.
inline std::uint64_t mix_key(std::uint64_t base, std::uint64_t a, std::uint64_t b = 0,
                             std::uint64_t c = 0) {
  std::uint64_t s = base;
  std::uint64_t h = splitmix64(s);
  for (std::uint64_t part : {a, b, c}) {
    s = h ^ (part * 0xd1b54a32d192ed03ULL);
    h = splitmix64(s);
  }
  return h;
}

// xoshiro256** (Blackman and Vigna).
struct Xoshiro {
  std::array<std::uint64_t, 4> s{};

  static Xoshiro seeded(std::uint64_t seed) {
    Xoshiro rng;
    for (auto& word : rng.s) word = splitmix64(seed);
    return rng;
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s[1] * 5, 7) * 9;
    const std::uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 24 bits.
  float uniform() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
};

class Chaos {
 public:
  void reset(std::uint64_t key) { state_ = key; }
  std::uint64_t next() { return splitmix64(state_); }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  template <class T>
  void shuffle(std::span<T> items) {
    for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  std::uint64_t state_ = 0;
};

}  // namespace minitrain
