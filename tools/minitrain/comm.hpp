// The in-process collective of minitrain's data parallelism: ranks are threads,
// and the gradient all-reduce sums their buffers in ring order (chunk c is summed
// starting at rank c+1, as a ring reduce-scatter does), the same order on every
// run. `--nondet allreduce-arrival` sums each chunk in an order drawn from rank
// 0's chaos instead, as a tree or an arrival-order reduction would.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "chaos.hpp"

namespace minitrain {

// Thrown in the ranks waiting at a barrier when another rank failed.
class CommAborted : public std::runtime_error {
 public:
  CommAborted() : std::runtime_error("another rank failed") {}
};

class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait();
  void abort();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_;
  int waiting_ = 0;
  std::uint64_t generation_ = 0;
  bool aborted_ = false;
};

class Comm {
 public:
  explicit Comm(int world_size);
  int world_size() const { return world_size_; }
  void barrier() { barrier_.wait(); }
  void abort() { barrier_.abort(); }

  // out = (sum over ranks of in) / world_size, on every rank. Every rank calls
  // it; `arrival` (rank 0's chaos, or null for ring order) picks the order.
  void allreduce_mean(int rank, const float* in, float* out, std::size_t n, Chaos* arrival);

 private:
  int world_size_;
  Barrier barrier_;
  std::vector<const float*> posted_;
  std::vector<std::vector<int>> order_;  // per chunk
};

}  // namespace minitrain
