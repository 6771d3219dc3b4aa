#include "log/prefetch.hpp"

namespace dtrace::log {

PrefetchReader::PrefetchReader(RunReader& reader, std::size_t depth)
    : reader_(reader), depth_(depth), worker_([this] { work(); }) {}

PrefetchReader::~PrefetchReader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  // worker_ joins on destruction.
}

void PrefetchReader::work() {
  while (true) {
    auto item = reader_.next();
    const bool last = !item || !*item;
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
    if (stop_) return;
    queue_.push_back(std::move(item));
    lock.unlock();
    changed_.notify_all();
    if (last) return;
  }
}

Result<std::optional<Step>> PrefetchReader::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !queue_.empty(); });
  // The end and errors stay queued: asking again gives the same answer.
  const bool last = !queue_.front() || !*queue_.front();
  if (last) return queue_.front();
  auto item = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  changed_.notify_all();
  return item;
}

}  // namespace dtrace::log
