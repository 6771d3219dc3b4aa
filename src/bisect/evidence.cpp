// Numeric evidence: how two outputs of the same kernel from the same inputs
// differ, and what that pattern usually means.
#include <cmath>
#include <cstring>
#include <set>

#include "bisect/session.hpp"

namespace dtrace::bisect {

namespace {

struct Element {
  double value = 0;
  __int128 ordered = 0;  // position on the line of representable values
  bool nan = false, inf = false;
};

float bf16_to_float(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double f16_to_double(std::uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0) v = std::ldexp(mantissa, -24);
  else if (exponent == 31) v = mantissa ? NAN : INFINITY;
  else v = std::ldexp(mantissa + 1024, exponent - 25);
  return sign ? -v : v;
}

// Sign-magnitude bits onto a line where neighbouring values differ by one.
__int128 ordered_bits(std::uint64_t bits, int width) {
  const std::uint64_t sign = std::uint64_t{1} << (width - 1);
  const __int128 magnitude = static_cast<__int128>(bits & (sign - 1));
  return (bits & sign) ? -magnitude - 1 : magnitude;
}

std::optional<int> element_size(const std::string& dtype) {
  if (dtype == "f64") return 8;
  if (dtype == "f32") return 4;
  if (dtype == "bf16" || dtype == "f16") return 2;
  return std::nullopt;
}

Element decode(const std::byte* p, const std::string& dtype) {
  Element e;
  if (dtype == "f64") {
    std::uint64_t bits;
    std::memcpy(&bits, p, 8);
    std::memcpy(&e.value, &bits, 8);
    e.ordered = ordered_bits(bits, 64);
  } else if (dtype == "f32") {
    std::uint32_t bits;
    std::memcpy(&bits, p, 4);
    float f;
    std::memcpy(&f, &bits, 4);
    e.value = f;
    e.ordered = ordered_bits(bits, 32);
  } else {
    std::uint16_t bits;
    std::memcpy(&bits, p, 2);
    e.value = dtype == "bf16" ? bf16_to_float(bits) : f16_to_double(bits);
    e.ordered = ordered_bits(bits, 16);
  }
  e.nan = std::isnan(e.value);
  e.inf = std::isinf(e.value);
  return e;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

std::optional<double> largest_magnitude(const std::byte* data, std::size_t bytes, const std::string& dtype) {
  const auto size = element_size(dtype);
  if (!size) return std::nullopt;
  double largest = 0;
  const auto step = static_cast<std::size_t>(*size);
  for (std::size_t at = 0; at + step <= bytes; at += step) {
    const Element x = decode(data + at, dtype);
    if (!x.nan && !x.inf) largest = std::max(largest, std::fabs(x.value));
  }
  return largest;
}

Evidence compare_outputs(const std::vector<std::byte>& a, const std::vector<std::byte>& b,
                         const std::string& dtype, std::optional<double> input_magnitude) {
  Evidence e;
  e.input_magnitude = input_magnitude;
  e.dtype = dtype;
  const auto size = element_size(dtype);
  if (!size || a.size() != b.size() || a.size() % static_cast<std::size_t>(*size) != 0) {
    // Not a float we can read: count differing bytes only.
    e.elements = std::max(a.size(), b.size());
    for (std::size_t i = 0; i < e.elements; ++i) {
      if (i >= a.size() || i >= b.size() || a[i] != b[i]) ++e.elements_differing;
    }
    e.reading = std::to_string(e.elements_differing) + " of " + std::to_string(e.elements) +
                " bytes differ (" + (size ? "sizes differ" : "dtype " + dtype + " is not a float") + ")";
    return e;
  }
  e.elements = a.size() / static_cast<std::size_t>(*size);
  __int128 max_ulp = 0;
  bool ulp_defined = false;
  double max_magnitude = 0;
  for (std::size_t i = 0; i < e.elements; ++i) {
    const Element x = decode(a.data() + i * static_cast<std::size_t>(*size), dtype);
    const Element y = decode(b.data() + i * static_cast<std::size_t>(*size), dtype);
    e.nan_a += x.nan;
    e.nan_b += y.nan;
    e.inf_a += x.inf;
    e.inf_b += y.inf;
    if (!x.nan && !x.inf) max_magnitude = std::max(max_magnitude, std::fabs(x.value));
    if (std::memcmp(a.data() + i * static_cast<std::size_t>(*size), b.data() + i * static_cast<std::size_t>(*size),
                    static_cast<std::size_t>(*size)) == 0) {
      continue;
    }
    ++e.elements_differing;
    if (!x.nan && !y.nan) {
      const __int128 d = x.ordered > y.ordered ? x.ordered - y.ordered : y.ordered - x.ordered;
      max_ulp = std::max(max_ulp, d);
      ulp_defined = true;
      // d >= 1 here: the bytes differ and neither is NaN, so the values do.
      std::size_t bucket = 0;
      for (__int128 v = d; v > 1; v >>= 1) ++bucket;
      if (e.ulp_histogram.size() <= bucket) e.ulp_histogram.resize(bucket + 1, 0);
      ++e.ulp_histogram[bucket];
      if (!x.inf && !y.inf) e.max_abs_difference = std::max(e.max_abs_difference, std::fabs(x.value - y.value));
    } else {
      ++e.ulp_undefined;
    }
  }
  if (ulp_defined) e.max_ulp = static_cast<std::uint64_t>(std::min<__int128>(max_ulp, UINT64_MAX));
  e.output_magnitude = max_magnitude;
  const std::string counts = std::to_string(e.elements_differing) + " of " + std::to_string(e.elements) +
                             " elements differ";
  // Reordered sums of the same terms differ by a few units of rounding of the
  // magnitude of what was summed (an element near zero can be many ulp off
  // while being off by very little); values read from memory nothing wrote
  // bear no relation to the magnitudes at all, or are NaN. What was summed is
  // the op's inputs: where they are larger than its output (terms that cancel,
  // a sum 1e-6 of its terms), rounding scales with them, not with the output;
  // where the output is larger (many terms of one sign), with the output.
  constexpr double kReductionOrderRelative = 1e-3;
  const bool by_inputs = input_magnitude && *input_magnitude > max_magnitude;
  const double scale = by_inputs ? *input_magnitude : max_magnitude;
  const std::string scale_text =
      by_inputs ? "the op's inputs' largest value " + fmt(scale) + "; the output's is " + fmt(max_magnitude)
                : "the output's largest value " + fmt(scale) +
                      (input_magnitude ? "; the inputs' is " + fmt(*input_magnitude) : std::string());
  const bool special_differs = e.nan_a != e.nan_b || e.inf_a != e.inf_b;
  const double relative = scale > 0 ? e.max_abs_difference / scale : e.max_abs_difference;
  const std::string ulp_text = e.max_ulp ? std::to_string(*e.max_ulp) + " ulp" : "NaN";
  if (e.elements_differing == 0) {
    e.reading = "the outputs are identical";
    return e;
  }
  e.magnitude = by_inputs ? "inputs" : "output";
  if (special_differs || !e.max_ulp || relative > kReductionOrderRelative) {
    e.reading = counts + ", by up to " + ulp_text + " (max |difference| " + fmt(e.max_abs_difference) +
                " against " + scale_text + "; NaN " + std::to_string(e.nan_a) + " vs " +
                std::to_string(e.nan_b) + ", Inf " + std::to_string(e.inf_a) + " vs " + std::to_string(e.inf_b) +
                "): differences unrelated to magnitude, or NaN, mean the kernel reads memory nothing "
                "wrote (uninitialized memory, a padded tail, a stale workspace)";
  } else {
    e.reading = counts + ", by at most " + ulp_text + " (max |difference| " + fmt(e.max_abs_difference) +
                ", " + fmt(relative) + " of " + scale_text + "): rounding-sized differences are the "
                "signature of a changing reduction order (atomics, split-K, an unordered collective)";
  }
  return e;
}

}  // namespace dtrace::bisect
