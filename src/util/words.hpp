// Words for counts in what people read: "1 rank", "4 ranks".
#pragma once

#include <cstdint>
#include <string>

namespace dtrace {

// The noun that agrees with `count`.
constexpr const char* noun(std::int64_t count, const char* one, const char* many) {
  return count == 1 ? one : many;
}

// `count` and the noun that agrees with it.
inline std::string plural(std::int64_t count, const char* one, const char* many) {
  return std::to_string(count) + " " + noun(count, one, many);
}

}  // namespace dtrace
