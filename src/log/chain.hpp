// The chained step digest of dtrace-fp(5) ("Chained step digest"): one 64-bit
// digest per rank and step, over that step's compared records (identity and
// value) and the previous step's chain. Equal chains at step S mean equal
// records at every step up to S, which is what lets a diff skip steps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  std::string scratch_;  // the shape's text
  std::string record_;   // the fields of the record being added, hashed in one update
};

// The chain of `step` (its records in seq order) chained to `previous`.
std::uint64_t step_chain(std::uint64_t previous, const Step& step);

// What checking a rank's chains in step order found (dtrace-fp(5), "Chained
// step digest"), for certification to report. `previous_step` is the closest
// earlier step of the rank with an end record, by step number, if any.
struct ChainFinding {
  enum class Kind : std::uint8_t {
    mismatch,   // the chain is not the one its records give from chain_prev
    misplaced,  // it matched `matched_from`, not the chain of its closest earlier
                // step, read after it had matched
    gap,        // no chain, after a chained step of its rank
    restart,    // it starts anew at 0 in the file of its closest earlier step, which is chained
    resumed,    // it starts anew at 0 in another file than its closest earlier step: a resumed segment
  } kind = Kind::mismatch;
  std::int32_t rank = 0;
  std::int64_t step = 0;
  std::optional<std::int64_t> previous_step;
  std::uint64_t matched_from = 0;  // misplaced: the chain_prev its chain was written from
  std::uint64_t logged = 0;    // the end record's chain (mismatch, misplaced)
  std::uint64_t expected = 0;  // the chain its records give from `previous` (mismatch)
  std::uint64_t previous = 0;  // chain_prev: the closest earlier step's chain, 0 if none
  // Where the step's first record was read (Record::file and line); line 0: no record.
  std::uint32_t file = 0;
  std::uint64_t line = 0;
};

// Checks the chains of a run's steps in each rank's step order, whatever order
// the reader hands them out in (a rank spread over files, steps out of order
// or reversed). chain_prev is the logged chain of the rank's closest earlier
// step by step number that has an end record, as dtrace-fp(5) says, so one bad
// step is one mismatch, not a cascade. A step without an end record
// (incomplete) or read after its step was complete (late) is not checked and
// chains nothing; one whose count is wrong is not checked (its count is the
// violation) but chains the next.
//
// Steps are checked as they come, against the closest earlier step read so
// far. A step that does not match is held, records and all, until a step
// between them arrives or the run ends: only then is it a mismatch. A step
// that does match, and then sees a step arrive between it and the one it
// matched, is misplaced. Memory: per rank, the steps read as intervals and an
// entry (a few words) at each interval's ends, plus the steps held, which
// are the steps read before a lower-numbered step of theirs, or after a gap
// in their rank's step numbers, whose chain the steps read so far do not
// give: none in a log written in step order with its chains right.
class ChainVerifier {
 public:
  ChainVerifier();
  ~ChainVerifier();
  ChainVerifier(const ChainVerifier&) = delete;
  ChainVerifier& operator=(const ChainVerifier&) = delete;

  // Takes the next step the reader hands out; appends to `found` what can be told now.
  void add(const Step& step, std::vector<ChainFinding>& found);
  // After the last step: the steps still held are mismatches.
  void finish(std::vector<ChainFinding>& found);
  // Steps held now, all ranks (tests: the bound above).
  std::size_t held() const;

 private:
  struct Ranks;
  std::unique_ptr<Ranks> ranks_;
};

// The chain as the end record writes it: 16 lowercase hex digits.
std::string chain_hex(std::uint64_t chain);

}  // namespace dtrace::log
