// The chained step digest of dtrace-fp(5) ("Chained step digest"): one 64-bit
// digest per rank and step, over that step's compared records (identity and
// value) and the previous step's chain. Equal chains at step S mean equal
// records at every step up to S, which is what lets a diff skip steps.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "log/record.hpp"

namespace dtrace::log {

// Computes one step's chain as records arrive in seq order. The recorder feeds
// it record by record; readers feed it a Step's records (step_chain below).
class ChainHasher {
 public:
  ChainHasher();
  ~ChainHasher();
  ChainHasher(const ChainHasher&) = delete;
  ChainHasher& operator=(const ChainHasher&) = delete;

  // Starts step `step` chained to `previous` (0 for a rank's first step).
  void begin(std::uint64_t previous, std::int64_t step);
  // Adds a record; timing and other records are skipped, as the man page says.
  void add(const Record& record);
  std::uint64_t finish();

 private:
  void field(std::string_view bytes);
  struct State;
  State* state_;
  std::string scratch_;
};

// The chain of `step` (its records in seq order) chained to `previous`.
std::uint64_t step_chain(std::uint64_t previous, const Step& step);

// What a step's logged chain says once recomputed from its records.
struct ChainVerdict {
  enum class Kind : std::uint8_t { absent, matches, mismatch } kind = Kind::absent;
  std::uint64_t logged = 0;    // the end record's chain (matches, mismatch)
  std::uint64_t expected = 0;  // the chain its records give (matches, mismatch)
  std::uint64_t previous = 0;  // the chain_prev it was computed from
};

// Checks the chains of a run's steps as a reader hands them out (each rank's
// steps in increasing order). chain_prev is the logged chain of the rank's
// previous step with an end record, as dtrace-fp(5) says, so one bad step is
// one mismatch, not a cascade. A step without an end record (incomplete) is
// not checked and does not move the chain.
class ChainVerifier {
 public:
  ChainVerdict verify(const Step& step);

 private:
  std::map<std::int32_t, std::uint64_t> previous_;  // per rank: the last logged chain, 0 if none
};

// The chain as the end record writes it: 16 lowercase hex digits.
std::string chain_hex(std::uint64_t chain);

}  // namespace dtrace::log
