// The words closest to a mistyped one, for "did you mean ...?" (dtrace(1):
// a mistyped command names the closest, as git does).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dtrace {

// Edits that turn `a` into `b`: inserting, deleting or replacing one
// character, or swapping two neighbours (the commonest typing slip, "shwo",
// counts one edit, not two). The optimal-string-alignment distance.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  // Three rows suffice: the swap looks two rows back.
  std::vector<std::size_t> before(m + 1), previous(m + 1), current(m + 1);
  for (std::size_t j = 0; j <= m; ++j) previous[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t replace = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, replace});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        current[j] = std::min(current[j], before[j - 2] + 1);
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[m];
}

// The candidates nearest to `word`, in the candidates' order, when they are
// near enough to be what was meant: at most two edits, and fewer edits than
// `word` has characters (so "ab" does not suggest every two-letter word).
// Empty when none is.
inline std::vector<std::string> closest_words(std::string_view word, const std::vector<std::string>& candidates) {
  constexpr std::size_t kMostEdits = 2;
  std::vector<std::string> best;
  std::size_t best_distance = kMostEdits + 1;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance > kMostEdits || distance >= word.size() || distance > best_distance) continue;
    if (distance < best_distance) best.clear();
    best_distance = distance;
    best.push_back(candidate);
  }
  return best;
}

}  // namespace dtrace
