// The chained step digest, byte for byte as dtrace-fp(5) specifies it, so that
// another recorder written from the man page alone writes the same digests.
#include "log/chain.hpp"

#include <xxhash.h>

#include <array>
#include <charconv>
#include <map>

#include "util/intervals.hpp"

namespace dtrace::log {

// XXH3's streaming state is opaque in the shared library's API.
struct ChainHasher::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

namespace {

void u64le(std::array<unsigned char, 8>& out, std::uint64_t value) {
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

}  // namespace

ChainHasher::ChainHasher() : state_(new State) {}
ChainHasher::~ChainHasher() { delete state_; }

void ChainHasher::begin(std::uint64_t previous, std::int64_t step) {
  XXH3_64bits_reset(state_->xxh);
  std::array<unsigned char, 8> bytes;
  u64le(bytes, previous);
  XXH3_64bits_update(state_->xxh, bytes.data(), bytes.size());
  u64le(bytes, static_cast<std::uint64_t>(step));
  XXH3_64bits_update(state_->xxh, bytes.data(), bytes.size());
}

// Appends one field (its length as u64le, then its bytes) to the record's bytes.
void ChainHasher::field(std::string_view text) {
  std::array<unsigned char, 8> length;
  u64le(length, text.size());
  record_.append(reinterpret_cast<const char*>(length.data()), length.size());
  record_.append(text);
}

// A record's fields go to the streaming hash in one update: the same bytes as
// one update per field (so the same digest), at a fraction of the cost (16
// updates a record were most of the chain's share of a recorded step).
void ChainHasher::add(const Record& r) {
  if (!is_compared(r.io)) return;
  record_.clear();
  field(r.scope);
  field(r.op);
  field(io_name(r.io));
  field(r.name);
  field(r.dtype);
  field(r.scalar ? "bits" : "hash");
  std::array<char, 32> digits;
  field(r.digest.hex_to(digits));
  scratch_.clear();
  if (r.has_shape) {
    scratch_ += '[';
    for (std::size_t i = 0; i < r.shape.size(); ++i) {
      if (i != 0) scratch_ += ',';
      char digits[24];
      const auto end = std::to_chars(digits, digits + sizeof digits, r.shape[i]).ptr;
      scratch_.append(digits, end);
    }
    scratch_ += ']';
  }
  field(scratch_);
  XXH3_64bits_update(state_->xxh, record_.data(), record_.size());
}

std::uint64_t ChainHasher::finish() { return XXH3_64bits_digest(state_->xxh); }

std::uint64_t step_chain(std::uint64_t previous, const Step& step) {
  ChainHasher hasher;
  hasher.begin(previous, step.step);
  for (const Record& r : step.records) hasher.add(r);
  return hasher.finish();
}

namespace {

// What is known of one step of a rank in the chain checks: an entry is kept
// for the steps at either end of an interval of the rank's steps read (the
// only ones a step read later can have as its closest earlier or later step)
// and for the steps held.
struct Entry {
  enum class State : std::uint8_t {
    unchecked,  // no chain, or a wrong count: not checked
    first,      // matched from 0 with no earlier step read next to it, or only a chained
                // one with room between them: settled when one arrives, or at the end
    matched,    // matched from `previous`, the closest earlier step's chain
    resumed,    // matched from 0 after a chained step: reported as restart or resumed
    held,       // no match yet: waiting for a closer earlier step
    reported,   // reported as a mismatch
  } state = State::unchecked;
  std::optional<std::uint64_t> chain;
  std::uint64_t previous = 0;  // first, matched: the chain_prev it matched from
  // A chainless step after a chained one begins a gap (reported there); the
  // chainless steps that follow it are inside it.
  enum class Gap : std::uint8_t { none, begins, inside } gap = Gap::none;
  std::uint32_t file = 0;
  std::uint64_t line = 0;      // the first record's; 0: none
  std::unique_ptr<Step> held;  // held: the step, to check again
};

ChainFinding finding(ChainFinding::Kind kind, std::int32_t rank, std::int64_t step, const Entry& e) {
  ChainFinding f;
  f.kind = kind;
  f.rank = rank;
  f.step = step;
  f.logged = e.chain.value_or(0);
  f.file = e.file;
  f.line = e.line;
  return f;
}

}  // namespace

struct ChainVerifier::Ranks {
  struct Rank {
    IntervalSet read;                      // steps with an end record taken into the checks
    std::map<std::int64_t, Entry> entries;  // see Entry
  };
  std::map<std::int32_t, Rank> ranks;
  std::size_t held = 0;

  using Entries = std::map<std::int64_t, Entry>;

  // The step `x` of `rank`, checked from its closest earlier step `before`
  // (entries.end(): none): matched, resumed, held or reported.
  void judge(std::int32_t rank, Entries& entries, Entries::iterator x, Entries::iterator before,
             const Step& step, std::vector<ChainFinding>& found) {
    Entry& e = x->second;
    const bool has_before = before != entries.end();
    const std::uint64_t previous = has_before ? before->second.chain.value_or(0) : 0;
    const std::uint64_t expected = step_chain(previous, step);
    if (expected == *e.chain) {
      e.state = has_before ? Entry::State::matched : Entry::State::first;
      e.previous = previous;
      return;
    }
    const bool next_to = has_before && before->first == x->first - 1;  // no step can come between them
    if (has_before && before->second.chain && step_chain(0, step) == *e.chain) {
      if (next_to) {
        resume(rank, x, before, found);
      } else {
        e.state = Entry::State::first;
        e.previous = 0;
      }
      return;
    }
    if (next_to) {
      ChainFinding f = finding(ChainFinding::Kind::mismatch, rank, x->first, e);
      f.previous_step = before->first;
      f.previous = previous;
      f.expected = expected;
      found.push_back(f);
      e.state = Entry::State::reported;
      return;
    }
    e.state = Entry::State::held;
    e.held = std::make_unique<Step>(step);
    ++held;
  }

  // Step `x` starts its chain anew at 0 after `before`, a chained step: a
  // restart where both lie in one file (what a search of that file would
  // trust), a resumed segment where `x` opens a file of its own.
  static void resume(std::int32_t rank, Entries::iterator x, Entries::iterator before,
                     std::vector<ChainFinding>& found) {
    Entry& e = x->second;
    const bool one_file = e.line != 0 && before->second.line != 0 && e.file == before->second.file;
    ChainFinding f = finding(one_file ? ChainFinding::Kind::restart : ChainFinding::Kind::resumed, rank, x->first, e);
    f.previous_step = before->first;
    f.previous = *before->second.chain;
    found.push_back(f);
    e.state = Entry::State::resumed;
  }

  // Step `x` has a new closest earlier step, `before`, just read: one that
  // lies between `x` and the step it was checked against.
  void relink(std::int32_t rank, Entries& entries, Entries::iterator x, Entries::iterator before,
              std::vector<ChainFinding>& found) {
    Entry& e = x->second;
    const Entry& b = before->second;
    if (!e.chain && b.chain && e.gap != Entry::Gap::begins) {
      found.push_back(finding(ChainFinding::Kind::gap, rank, x->first, e));
      e.gap = Entry::Gap::begins;
    } else if (!e.chain && !b.chain) {
      e.gap = b.gap == Entry::Gap::none ? Entry::Gap::none : Entry::Gap::inside;
    }
    switch (e.state) {
      case Entry::State::held: {
        std::unique_ptr<Step> step = std::move(e.held);
        --held;
        judge(rank, entries, x, before, *step, found);
        return;
      }
      case Entry::State::first:
      case Entry::State::matched:
        if (e.previous == 0 && b.chain) {
          if (before->first == x->first - 1) {
            resume(rank, x, before, found);
          } else {
            e.state = Entry::State::first;
          }
        } else if (b.chain.value_or(0) != e.previous) {
          ChainFinding f = finding(ChainFinding::Kind::misplaced, rank, x->first, e);
          f.previous_step = before->first;
          f.previous = b.chain.value_or(0);
          f.matched_from = e.previous;
          found.push_back(f);
          e.state = Entry::State::reported;
        } else {
          e.state = Entry::State::matched;
        }
        return;
      case Entry::State::unchecked:
      case Entry::State::resumed:
      case Entry::State::reported: return;
    }
  }

  // Drops the entry of `s` when both its neighbours are read: no step can
  // come next to it any more.
  static void prune(Rank& r, std::int64_t s) {
    auto it = r.entries.find(s);
    if (it == r.entries.end() || it->second.state == Entry::State::held || it->second.state == Entry::State::first) {
      return;
    }
    if (s == INT64_MIN || s == INT64_MAX || !r.read.contains(s - 1) || !r.read.contains(s + 1)) return;
    r.entries.erase(it);
  }
};

ChainVerifier::ChainVerifier() : ranks_(std::make_unique<Ranks>()) {}
ChainVerifier::~ChainVerifier() = default;

std::size_t ChainVerifier::held() const { return ranks_->held; }

void ChainVerifier::add(const Step& step, std::vector<ChainFinding>& found) {
  if (step.declared_count < 0) return;  // no end record: nothing written to check
  if (step.status != StepStatus::complete && step.status != StepStatus::count_mismatch) return;
  Ranks::Rank& r = ranks_->ranks[step.rank];
  const std::int64_t s = step.step;
  if (r.read.contains(s)) return;  // read twice: reported by its status, not chained
  auto after = r.entries.upper_bound(s);
  auto before = after == r.entries.begin() ? r.entries.end() : std::prev(after);
  auto [x, inserted] = r.entries.try_emplace(s);
  r.read.insert(s);
  Entry& e = x->second;
  e.chain = step.chain;
  if (!step.records.empty()) {
    e.file = step.records.front().file;
    e.line = step.records.front().line;
  }
  if (!e.chain && before != r.entries.end()) {
    const Entry& b = before->second;
    if (b.chain) {
      // A gap begins here, unless the one reported at the next step merely
      // begins earlier than was known.
      e.gap = Entry::Gap::begins;
      if (after == r.entries.end() || after->second.chain || after->second.gap != Entry::Gap::begins) {
        found.push_back(finding(ChainFinding::Kind::gap, step.rank, s, e));
      }
    } else if (b.gap != Entry::Gap::none) {
      e.gap = Entry::Gap::inside;
    }
  } else if (e.chain && step.status == StepStatus::complete) {
    ranks_->judge(step.rank, r.entries, x, before, step, found);
  }
  if (after != r.entries.end()) ranks_->relink(step.rank, r.entries, after, x, found);
  for (std::int64_t n : {s - 1, s, s + 1}) Ranks::prune(r, n);
}

void ChainVerifier::finish(std::vector<ChainFinding>& found) {
  for (auto& [rank, r] : ranks_->ranks) {
    for (auto it = r.entries.begin(); it != r.entries.end(); ++it) {
      Entry& e = it->second;
      if (e.state == Entry::State::first && it != r.entries.begin() && std::prev(it)->second.chain) {
        Ranks::resume(rank, it, std::prev(it), found);
        continue;
      }
      if (e.state != Entry::State::held) continue;
      ChainFinding f = finding(ChainFinding::Kind::mismatch, rank, it->first, e);
      if (it != r.entries.begin()) {
        f.previous_step = std::prev(it)->first;
        f.previous = std::prev(it)->second.chain.value_or(0);
      }
      f.expected = step_chain(f.previous, *e.held);
      found.push_back(f);
      e.held.reset();
      e.state = Entry::State::reported;
      --ranks_->held;
    }
  }
}

std::string chain_hex(std::uint64_t chain) { return Digest::from_u64(chain).hex(); }

}  // namespace dtrace::log
