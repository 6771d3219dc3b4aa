// Intern table for the strings and shapes of records. A run repeats the same
// few hundred scopes, ops, names, dtypes and shapes millions of times; storing
// each once keeps a Step's records free of allocations and memory flat.
//
// Diff gives both its readers one table, so the same text in the two runs is
// the same pointer and comparing identities is mostly pointer compares. The
// readers run on threads of their own, hence the lock; it is taken only when
// the full parser reads a line, never on the fast path.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace dtrace::log {

class Intern {
 public:
  // A view that stays valid for the Intern's lifetime (set nodes never move).
  std::string_view string(std::string_view text) {
    std::lock_guard lock(mutex_);
    auto it = strings_.find(text);
    if (it == strings_.end()) it = strings_.emplace(text).first;
    return *it;
  }

  std::span<const std::int64_t> shape(const std::vector<std::int64_t>& dims) {
    std::lock_guard lock(mutex_);
    auto it = shapes_.find(dims);
    if (it == shapes_.end()) it = shapes_.emplace(dims).first;
    return {it->data(), it->size()};
  }

 private:
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct ShapeHash {
    std::size_t operator()(const std::vector<std::int64_t>& v) const {
      std::size_t h = v.size();
      for (auto d : v) h = h * 1000003u ^ static_cast<std::size_t>(d);
      return h;
    }
  };
  std::mutex mutex_;
  std::unordered_set<std::string, StringHash, std::equal_to<>> strings_;
  std::unordered_set<std::vector<std::int64_t>, ShapeHash> shapes_;
};

}  // namespace dtrace::log
