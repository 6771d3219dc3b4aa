// Reads a run on a thread of its own, a bounded number of steps ahead of the
// consumer. Diff reads its two runs this way: parsing is the whole cost, and
// two runs parsed side by side use both cores.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "log/reader.hpp"

namespace dtrace::log {

class PrefetchReader {
 public:
  // `reader` must outlive this object; it is used only from the worker thread
  // until next() has returned the end or an error. At most `depth` batches
  // wait in the queue.
  explicit PrefetchReader(RunReader& reader, std::size_t depth = 4);
  ~PrefetchReader();

  Result<std::optional<Step>> next();

  // Hands a step the consumer is done with back to the reader's thread, whose
  // next steps reuse its record storage (RunReader::recycle). Consumer thread
  // only; the storage travels back when the consumer takes its next batch.
  void recycle(Step&& step);

  PrefetchReader(const PrefetchReader&) = delete;
  PrefetchReader& operator=(const PrefetchReader&) = delete;

 private:
  using Item = Result<std::optional<Step>>;
  // Steps travel in batches: handing over each step alone woke the consumer
  // once per step, and at thousands of small steps per second the thread
  // switches cost more than the comparing.
  using Batch = std::vector<Item>;

  void work();

  RunReader& reader_;
  const std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> queue_;
  bool stop_ = false;
  Batch taken_;  // the consumer's current batch (consumer thread only)
  std::size_t taken_next_ = 0;
  std::vector<std::vector<Record>> done_;      // recycled, not yet handed over (consumer only)
  std::vector<std::vector<Record>> returned_;  // handed over to the worker (under mutex_)
  std::jthread worker_;  // last: starts once the members above exist
};

}  // namespace dtrace::log
