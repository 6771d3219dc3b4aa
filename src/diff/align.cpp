#include "diff/align.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace dtrace::diff {

using log::Record;
using log::Step;

namespace {

// Equal text; diff's two readers share one intern table, so equal text is
// almost always the same pointer and the bytes need no comparing.
inline bool same_text(std::string_view x, std::string_view y) {
  return x.size() == y.size() && (x.data() == y.data() || std::memcmp(x.data(), y.data(), x.size()) == 0);
}

bool same_identity(const Record& x, const Record& y) {
  return same_text(x.name, y.name) && same_text(x.op, y.op) && same_text(x.scope, y.scope) &&
         same_text(x.io_text, y.io_text);
}

std::string shape_text(const Record& r) {
  if (!r.has_shape) return "(none)";
  std::string s = "[";
  for (std::size_t i = 0; i < r.shape.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(r.shape[i]);
  }
  return s + "]";
}

// A mismatch between two records of the same identity, if any: structure
// (what was recorded differs in kind, dtype or shape) before value.
std::optional<MismatchAt> compare_pair(const Record& a, const Record& b) {
  MismatchAt m;
  m.kind = Kind::structure;
  if (a.scalar != b.scalar) {
    m.detail = a.scalar ? "a scalar in A, a tensor in B" : "a tensor in A, a scalar in B";
    return m;
  }
  if (!same_text(a.dtype, b.dtype)) {
    m.detail = "dtype " + std::string(a.dtype) + " in A, " + std::string(b.dtype) + " in B";
    return m;
  }
  if (a.has_shape != b.has_shape ||
      (a.shape.data() != b.shape.data() &&
       !std::equal(a.shape.begin(), a.shape.end(), b.shape.begin(), b.shape.end()))) {
    m.detail = "shape " + shape_text(a) + " in A, " + shape_text(b) + " in B";
    return m;
  }
  if (a.digest != b.digest) {
    m.kind = Kind::value;
    m.detail = std::string(a.scalar ? "bits " : "hash ") + a.digest.hex() + " in A, " +
               b.digest.hex() + " in B";
    return m;
  }
  return std::nullopt;
}

std::string identity_key(const Record& r, int occurrence) {
  std::string key;
  key.reserve(r.scope.size() + r.op.size() + r.io_text.size() + r.name.size() + 12);
  key.append(r.scope).append(1, '\n').append(r.op).append(1, '\n').append(r.io_text);
  key.append(1, '\n').append(r.name).append(1, '\n').append(std::to_string(occurrence));
  return key;
}

// Occurrence of every record of a step, in one pass.
std::vector<int> occurrences(const Step& step) {
  std::unordered_map<std::string, int> seen;
  std::vector<int> out(step.records.size());
  for (std::size_t i = 0; i < step.records.size(); ++i) {
    const std::string key = identity_key(step.records[i], 0);
    out[i] = seen[key]++;
  }
  return out;
}

void note_collective_input(StepComparison& result, const Step& step, std::size_t index,
                           int occurrence) {
  const Record& r = step.records[index];
  if (r.io == log::Io::in && is_collective(r.scope)) {
    result.collective_inputs_differing.insert(collective_key(r.scope, r.op, occurrence));
  }
}

// The common case: both sides recorded the same identities in the same order.
bool compare_aligned(const Step& a, const Step& b, StepComparison& result) {
  if (a.records.size() != b.records.size()) return false;
  for (std::size_t i = 0; i < a.records.size(); ++i) {
    if (!same_identity(a.records[i], b.records[i])) return false;
  }
  for (std::size_t i = 0; i < a.records.size(); ++i) {
    const Record& ra = a.records[i];
    if (!log::is_compared(ra.io)) continue;
    ++result.records;
    // Nearly every pair is equal: settle that inline from the interned
    // pointers and the digest, without building compare_pair's result.
    const Record& rb = b.records[i];
    if (ra.digest == rb.digest && ra.scalar == rb.scalar && ra.has_shape == rb.has_shape &&
        ra.dtype.data() == rb.dtype.data() && ra.dtype.size() == rb.dtype.size() &&
        ra.shape.data() == rb.shape.data() && ra.shape.size() == rb.shape.size()) {
      continue;
    }
    if (auto m = compare_pair(ra, rb)) {
      if (!result.first) {
        m->a = m->b = static_cast<std::ptrdiff_t>(i);
        result.first = std::move(m);
      }
      if (ra.io == log::Io::in && is_collective(ra.scope)) {
        note_collective_input(result, a, i, occurrence_of(a, i));
      }
    }
  }
  return true;
}

// Records missing on one side, inserted or reordered: align by identity key.
void compare_by_identity(const Step& a, const Step& b, StepComparison& result) {
  const std::vector<int> occ_a = occurrences(a), occ_b = occurrences(b);
  std::unordered_map<std::string, std::size_t> index_b;
  for (std::size_t j = 0; j < b.records.size(); ++j) {
    if (log::is_compared(b.records[j].io)) index_b.emplace(identity_key(b.records[j], occ_b[j]), j);
  }
  std::vector<bool> matched_b(b.records.size(), false);
  std::optional<MismatchAt> first_a;
  for (std::size_t i = 0; i < a.records.size(); ++i) {
    const Record& ra = a.records[i];
    if (!log::is_compared(ra.io)) continue;
    ++result.records;
    auto it = index_b.find(identity_key(ra, occ_a[i]));
    std::optional<MismatchAt> m;
    if (it == index_b.end()) {
      m = MismatchAt{static_cast<std::ptrdiff_t>(i), -1, Kind::structure, "recorded in A only"};
    } else {
      matched_b[it->second] = true;
      m = compare_pair(ra, b.records[it->second]);
      if (m) m->a = static_cast<std::ptrdiff_t>(i), m->b = static_cast<std::ptrdiff_t>(it->second);
    }
    if (m) {
      note_collective_input(result, a, i, occ_a[i]);
      if (!first_a) first_a = std::move(m);
    }
  }
  std::optional<MismatchAt> first_b;
  for (std::size_t j = 0; j < b.records.size(); ++j) {
    if (!log::is_compared(b.records[j].io) || matched_b[j]) continue;
    note_collective_input(result, b, j, occ_b[j]);
    if (!first_b) {
      first_b = MismatchAt{-1, static_cast<std::ptrdiff_t>(j), Kind::structure, "recorded in B only"};
    }
  }
  // The earlier of the two in execution order; A's wins a tie.
  if (first_a && first_b) {
    const std::int64_t seq_a = a.records[static_cast<std::size_t>(first_a->a)].seq;
    const std::int64_t seq_b = b.records[static_cast<std::size_t>(first_b->b)].seq;
    result.first = seq_b < seq_a ? first_b : first_a;
  } else {
    result.first = first_a ? first_a : first_b;
  }
}

}  // namespace

bool is_collective(std::string_view scope) { return scope.rfind("comm/", 0) == 0 || scope == "comm"; }

std::string collective_key(std::string_view scope, std::string_view op, int occurrence) {
  std::string key(scope);
  key.append(1, '\n').append(op).append(1, '\n').append(std::to_string(occurrence));
  return key;
}

int occurrence_of(const Step& step, std::size_t index) {
  const Record& r = step.records[index];
  int n = 0;
  for (std::size_t i = 0; i < index; ++i) {
    if (same_identity(step.records[i], r)) ++n;
  }
  return n;
}

int calls_of(const Step& step, std::size_t index) {
  const Record& r = step.records[index];
  return static_cast<int>(
      std::count_if(step.records.begin(), step.records.end(), [&r](const Record& x) { return same_identity(x, r); }));
}

Step common_records(const Step& finer, const Step& coarser, std::uint64_t& left_out) {
  const std::vector<int> occ_finer = occurrences(finer), occ_coarser = occurrences(coarser);
  std::unordered_set<std::string> coarse_identities;
  for (std::size_t j = 0; j < coarser.records.size(); ++j) {
    coarse_identities.insert(identity_key(coarser.records[j], occ_coarser[j]));
  }
  Step out;
  out.rank = finer.rank;
  out.step = finer.step;
  out.status = finer.status;
  out.declared_count = finer.declared_count;
  out.records.reserve(coarser.records.size());
  // Dropping an identity (key, n) leaves the occurrences below n as they were:
  // the coarser step lacks (key, n) only when it has fewer than n + 1 of key,
  // so only a key's last occurrences are ever dropped.
  for (std::size_t i = 0; i < finer.records.size(); ++i) {
    const Record& r = finer.records[i];
    const bool level_dependent = r.io == log::Io::in || r.io == log::Io::out;
    if (level_dependent && !coarse_identities.contains(identity_key(r, occ_finer[i]))) {
      ++left_out;
      continue;
    }
    out.records.push_back(r);
  }
  return out;
}

std::vector<RecordPair> pair_records(const Step& a, const Step& b) {
  const std::vector<int> occ_a = occurrences(a), occ_b = occurrences(b);
  std::unordered_map<std::string, std::size_t> index_b;
  for (std::size_t j = 0; j < b.records.size(); ++j) {
    if (log::is_compared(b.records[j].io)) index_b.emplace(identity_key(b.records[j], occ_b[j]), j);
  }
  std::vector<RecordPair> pairs;
  std::vector<bool> matched_b(b.records.size(), false);
  for (std::size_t i = 0; i < a.records.size(); ++i) {
    if (!log::is_compared(a.records[i].io)) continue;
    RecordPair p;
    p.a = static_cast<std::ptrdiff_t>(i);
    auto it = index_b.find(identity_key(a.records[i], occ_a[i]));
    if (it == index_b.end()) {
      p.differs = true;
    } else {
      matched_b[it->second] = true;
      p.b = static_cast<std::ptrdiff_t>(it->second);
      p.differs = compare_pair(a.records[i], b.records[it->second]).has_value();
    }
    pairs.push_back(p);
  }
  for (std::size_t j = 0; j < b.records.size(); ++j) {
    if (log::is_compared(b.records[j].io) && !matched_b[j]) {
      pairs.push_back(RecordPair{-1, static_cast<std::ptrdiff_t>(j), true});
    }
  }
  // A's records keep A's order (a step's records are in seq order); a record
  // only B has goes right after the A record paired with its predecessor in B.
  std::vector<std::ptrdiff_t> partner_of_b(b.records.size(), -1);
  for (const RecordPair& p : pairs) {
    if (p.a >= 0 && p.b >= 0) partner_of_b[static_cast<std::size_t>(p.b)] = p.a;
  }
  auto key = [&](const RecordPair& p) {
    if (p.a >= 0) return std::pair<std::ptrdiff_t, std::ptrdiff_t>(p.a, -1);
    std::ptrdiff_t anchor = -1;
    for (std::ptrdiff_t j = p.b - 1; j >= 0 && anchor < 0; --j) anchor = partner_of_b[static_cast<std::size_t>(j)];
    return std::pair<std::ptrdiff_t, std::ptrdiff_t>(anchor, p.b);
  };
  std::stable_sort(pairs.begin(), pairs.end(), [&](const RecordPair& x, const RecordPair& y) { return key(x) < key(y); });
  return pairs;
}

StepComparison compare_step(const Step& a, const Step& b) {
  StepComparison result;
  if (!compare_aligned(a, b, result)) {
    result = StepComparison{};
    compare_by_identity(a, b, result);
  }
  return result;
}

std::vector<StepRecord> step_strip(const Step& a, const Step& b,
                                   const std::function<std::string(const log::Record&, char side)>& where) {
  std::vector<StepRecord> out;
  for (const RecordPair& p : pair_records(a, b)) {
    const bool has_a = p.a >= 0;
    const log::Record& r = has_a ? a.records[static_cast<std::size_t>(p.a)] : b.records[static_cast<std::size_t>(p.b)];
    StepRecord s;
    s.seq = r.seq;
    s.scope = r.scope;
    s.op = r.op;
    s.io = r.io_text;
    s.name = r.name;
    s.match = !p.differs ? Match::matched : !has_a ? Match::b_only : p.b < 0 ? Match::a_only : Match::differs;
    s.location = where(r, has_a ? 'A' : 'B');
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace dtrace::diff
