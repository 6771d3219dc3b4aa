// Reads a run on a thread of its own, a bounded number of steps ahead of the
// consumer. Diff reads its two runs this way: parsing is the whole cost, and
// two runs parsed side by side use both cores.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "log/reader.hpp"

namespace dtrace::log {

class PrefetchReader {
 public:
  // `reader` must outlive this object; it is used only from the worker thread
  // until next() has returned the end or an error.
  explicit PrefetchReader(RunReader& reader, std::size_t depth = 64);
  ~PrefetchReader();

  Result<std::optional<Step>> next();

  PrefetchReader(const PrefetchReader&) = delete;
  PrefetchReader& operator=(const PrefetchReader&) = delete;

 private:
  void work();

  RunReader& reader_;
  const std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Result<std::optional<Step>>> queue_;
  bool stop_ = false;
  std::jthread worker_;
};

}  // namespace dtrace::log
