// Buffers minitrain owns, and Arg: a named view of one that a kernel or a layer
// reads or writes, in the shape the log records it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "chaos.hpp"

namespace minitrain {

template <class T>
struct Buffer {
  std::vector<T, TensorAllocator<T>> data;  // in the backend's tensor memory
  std::vector<std::int64_t> shape;

  Buffer() = default;
  explicit Buffer(std::vector<std::int64_t> dims) : shape(std::move(dims)) {
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d);
    data.assign(n, T{});
  }
  T* p() { return data.data(); }
  const T* p() const { return data.data(); }
  std::size_t size() const { return data.size(); }
};

using Tensor = Buffer<float>;
using Tokens = Buffer<std::int32_t>;

template <class T>
constexpr std::string_view dtype_of();
template <>
constexpr std::string_view dtype_of<float>() {
  return "f32";
}
template <>
constexpr std::string_view dtype_of<std::int32_t>() {
  return "i32";
}
template <>
constexpr std::string_view dtype_of<std::int64_t>() {
  return "i64";
}
template <>
constexpr std::string_view dtype_of<std::uint64_t>() {
  return "u64";
}

// A named view. `data` is writable because isolation loads captured bytes into
// a kernel's inputs before each repetition.
struct Arg {
  std::string_view name;
  void* data = nullptr;
  std::size_t bytes = 0;
  std::string_view dtype;
  std::vector<std::int64_t> shape;
  // Plain host memory (RNG state, counters), never in the backend's tensor
  // memory: a device backend lets the recorder hash it on the host.
  bool host = false;
  // The bytes' fingerprint when it was taken ahead of the record (see
  // Session::optimizer_step); recorded as is, never hashed again.
  std::optional<std::uint64_t> digest{};
};

template <class T>
Arg arg(std::string_view name, Buffer<T>& buffer) {
  return {name, buffer.p(), buffer.size() * sizeof(T), dtype_of<T>(), buffer.shape, false};
}
inline Arg arg(std::string_view name, float* data, std::vector<std::int64_t> shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return {name, data, n * sizeof(float), "f32", std::move(shape), false};
}
inline Arg arg(std::string_view name, Xoshiro& rng) {
  return {name, rng.s.data(), sizeof(rng.s), "u64", {4}, true};
}
inline Arg arg(std::string_view name, std::int64_t& value) {
  return {name, &value, sizeof(value), "i64", {1}, true};
}

}  // namespace minitrain
