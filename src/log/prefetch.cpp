#include "log/prefetch.hpp"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace dtrace::log {

namespace {

// Steps travel in batches of up to about 0.7 MB of records (kBatchRecords),
// allocated here and freed on the consumer's thread. With glibc's default
// trim threshold (128 KiB) each freed batch handed its pages back to the
// kernel and the next batch faulted them in again: on a layer-level diff
// (tools/bench/diff.sh), about 44,000 page faults instead of 9,000 and a third
// of the system time. Keeping up to 32 MiB of freed memory per arena ends that.
// Process-wide, and set here because only diff reads through a PrefetchReader
// (not the recorder inside a training process).
void keep_freed_batches() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] { mallopt(M_TRIM_THRESHOLD, 32 << 20); });
#endif
}

// A batch closes at this many records or steps, whichever comes first: large
// enough that handing it over costs nothing next to reading it, small enough
// that memory stays at a few steps per rank. Half the former 8,192: the freed
// memory now kept raised peak RSS by about 1 MiB, and smaller batches lower it
// by more (layer shape 37.5 -> 33.1 MiB) at no measurable cost.
constexpr std::size_t kBatchRecords = 4096;
constexpr std::size_t kBatchSteps = 256;

bool is_last(const Result<std::optional<Step>>& item) { return !item || !*item; }

}  // namespace

// Before the worker starts: no thread of ours allocates while mallopt runs.
PrefetchReader::PrefetchReader(RunReader& reader, std::size_t depth)
    : reader_((keep_freed_batches(), reader)), depth_(depth), worker_([this] { work(); }) {}

PrefetchReader::~PrefetchReader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  // worker_ joins on destruction.
}

void PrefetchReader::work() {
  Batch batch;
  std::size_t records = 0;
  while (true) {
    auto item = reader_.next();
    const bool last = is_last(item);
    if (!last) records += (*item)->records.size() + 1;
    batch.push_back(std::move(item));
    if (!last && records < kBatchRecords && batch.size() < kBatchSteps) continue;
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
    if (stop_) return;
    queue_.push_back(std::move(batch));
    lock.unlock();
    changed_.notify_all();
    if (last) return;
    batch = Batch();
    records = 0;
  }
}

Result<std::optional<Step>> PrefetchReader::next() {
  if (taken_next_ == taken_.size()) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !queue_.empty(); });
    taken_ = std::move(queue_.front());
    queue_.pop_front();
    taken_next_ = 0;
    lock.unlock();
    changed_.notify_all();
  }
  // The end and errors end the last batch and stay there: asking again gives
  // the same answer.
  if (is_last(taken_[taken_next_])) return taken_[taken_next_];
  return std::move(taken_[taken_next_++]);
}

}  // namespace dtrace::log
