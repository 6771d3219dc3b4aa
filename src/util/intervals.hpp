// A set of integers kept as sorted, disjoint, closed intervals. Steps of a run
// are almost always contiguous, so "which steps does rank r have" costs a few
// words however long the run is.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtrace {

class IntervalSet {
 public:
  using Interval = std::pair<std::int64_t, std::int64_t>;  // [first, last]

  void insert(std::int64_t v) {
    auto it = std::upper_bound(items_.begin(), items_.end(), Interval{v, INT64_MAX});
    // `it` is the first interval starting after v; the one before may contain v.
    if (it != items_.begin()) {
      auto prev = std::prev(it);
      if (v <= prev->second) return;
      if (v == prev->second + 1) {
        prev->second = v;
        if (it != items_.end() && it->first == v + 1) {
          prev->second = it->second;
          items_.erase(it);
        }
        return;
      }
    }
    if (it != items_.end() && it->first == v + 1) {
      it->first = v;
      return;
    }
    items_.insert(it, Interval{v, v});
  }

  // Inserts [first, last], merging with the intervals it touches.
  void insert_range(std::int64_t first, std::int64_t last) {
    auto lo = std::lower_bound(items_.begin(), items_.end(), first,
                               [](const Interval& i, std::int64_t v) { return static_cast<__int128>(i.second) + 1 < v; });
    auto hi = lo;
    while (hi != items_.end() && hi->first <= static_cast<__int128>(last) + 1) {
      first = std::min(first, hi->first);
      last = std::max(last, hi->second);
      ++hi;
    }
    lo = items_.erase(lo, hi);
    items_.insert(lo, Interval{first, last});
  }

  bool contains(std::int64_t v) const {
    auto it = std::upper_bound(items_.begin(), items_.end(), Interval{v, INT64_MAX});
    return it != items_.begin() && std::prev(it)->second >= v;
  }

  bool empty() const { return items_.empty(); }
  std::int64_t min() const { return items_.front().first; }
  std::int64_t max() const { return items_.back().second; }
  std::int64_t size() const {
    std::int64_t n = 0;
    for (auto [a, b] : items_) n += b - a + 1;
    return n;
  }
  const std::vector<Interval>& intervals() const { return items_; }
  bool operator==(const IntervalSet&) const = default;

  // "3", "0-9", "0-4,7,9-12"
  std::string to_string() const {
    std::string out;
    for (auto [a, b] : items_) {
      if (!out.empty()) out += ',';
      out += std::to_string(a);
      if (b != a) out += '-' + std::to_string(b);
    }
    return out;
  }

 private:
  std::vector<Interval> items_;
};

}  // namespace dtrace
