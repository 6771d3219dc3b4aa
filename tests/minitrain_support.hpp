// Helpers shared by the minitrain unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "minitrain/chaos.hpp"

namespace test_support {

// n values uniform in [-scale, scale), the same for the same seed.
inline std::vector<float> random_values(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  minitrain::Xoshiro rng = minitrain::Xoshiro::seeded(seed);
  std::vector<float> v(n);
  for (float& x : v) x = (rng.uniform() * 2.0f - 1.0f) * scale;
  return v;
}

}  // namespace test_support
