// for_each_index: work(i) for every i in [0, n), on `threads` threads (the
// caller's among them), each taking the next index as it finishes one. The
// diff's stages that read many files at once share it: the byte stage, the
// reader's header pass and the search.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace dtrace {

template <class Work>
void for_each_index(std::size_t n, std::size_t threads, Work&& work) {
  threads = std::clamp<std::size_t>(threads, 1, std::max<std::size_t>(n, 1));
  std::atomic<std::size_t> next{0};
  auto run = [&] {
    for (std::size_t i; (i = next++) < n;) work(i);
  };
  std::vector<std::jthread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(run);
  run();
}

}  // namespace dtrace
