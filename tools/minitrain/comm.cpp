#include "comm.hpp"

#include <algorithm>
#include <numeric>
#include <span>

namespace minitrain {

void Barrier::wait() {
  std::unique_lock lock(mutex_);
  if (aborted_) throw CommAborted();
  const std::uint64_t generation = generation_;
  if (++waiting_ == count_) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
  if (generation_ == generation) throw CommAborted();
}

void Barrier::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

Comm::Comm(int world_size)
    : world_size_(world_size),
      barrier_(world_size),
      posted_(static_cast<std::size_t>(world_size)),
      order_(static_cast<std::size_t>(world_size)) {}

void Comm::allreduce_mean(int rank, const float* in, float* out, std::size_t n, Chaos* arrival) {
  const int R = world_size_;
  posted_[static_cast<std::size_t>(rank)] = in;
  if (rank == 0) {
    for (int c = 0; c < R; ++c) {
      auto& order = order_[static_cast<std::size_t>(c)];
      order.resize(static_cast<std::size_t>(R));
      for (int i = 0; i < R; ++i) order[static_cast<std::size_t>(i)] = (c + 1 + i) % R;
      if (arrival != nullptr) arrival->shuffle(std::span<int>(order));
    }
  }
  barrier_.wait();
  const float inv = 1.0f / static_cast<float>(R);
  const std::size_t chunk = (n + static_cast<std::size_t>(R) - 1) / static_cast<std::size_t>(R);
  for (int c = 0; c < R; ++c) {
    const std::size_t begin = std::min(n, chunk * static_cast<std::size_t>(c));
    const std::size_t end = std::min(n, begin + chunk);
    const auto& order = order_[static_cast<std::size_t>(c)];
    const float* first = posted_[static_cast<std::size_t>(order[0])];
    std::copy(first + begin, first + end, out + begin);
    for (std::size_t k = 1; k < order.size(); ++k) {
      const float* src = posted_[static_cast<std::size_t>(order[k])];
      for (std::size_t i = begin; i < end; ++i) out[i] += src[i];
    }
    for (std::size_t i = begin; i < end; ++i) out[i] *= inv;
  }
  // Nobody may reuse its input or post the next one before all have read.
  barrier_.wait();
}

}  // namespace minitrain
