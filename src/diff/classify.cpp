#include "diff/classify.hpp"

#include <map>

namespace dtrace::diff {

using log::Io;
using log::Record;
using log::Step;

namespace {

// Indices of the `in` records of the op invocation (scope, op, occurrence).
std::vector<std::size_t> inputs_of(const Step& step, std::string_view scope, std::string_view op,
                                   int occurrence) {
  std::vector<std::size_t> out;
  std::map<std::string_view, int> seen;  // occurrence counter per input name
  for (std::size_t i = 0; i < step.records.size(); ++i) {
    const Record& r = step.records[i];
    if (r.io == Io::in && r.op == op && r.scope == scope && seen[r.name]++ == occurrence) {
      out.push_back(i);
    }
  }
  return out;
}

bool same_record(const Record& x, const Record& y) {
  return x.scalar == y.scalar && x.dtype == y.dtype && x.has_shape == y.has_shape &&
         std::equal(x.shape.begin(), x.shape.end(), y.shape.begin(), y.shape.end()) &&
         x.digest == y.digest;
}

}  // namespace

Classification classify(const Step& a, const Step& b, const MismatchAt& at) {
  const Step& side = at.a >= 0 ? a : b;
  const std::size_t index = static_cast<std::size_t>(at.a >= 0 ? at.a : at.b);
  const Record& r = side.records[index];
  Classification c;
  if (r.io == Io::in) {
    c.role = Role::receiver;
    return c;
  }
  if (r.io != Io::out) return c;
  const int occurrence = occurrence_of(side, index);
  const auto in_a = inputs_of(a, r.scope, r.op, occurrence);
  const auto in_b = inputs_of(b, r.scope, r.op, occurrence);
  if (in_a.empty() && in_b.empty()) {
    // A collective's output also depends on the other ranks' inputs (a broadcast
    // records its input on the root only): unknown unless one of those differs.
    if (is_collective(r.scope)) c.collective = collective_key(r.scope, r.op, occurrence);
    return c;
  }
  bool differs = in_a.size() != in_b.size();
  for (std::size_t i : in_a) {
    if (differs) break;
    bool found = false;
    for (std::size_t j : in_b) {
      if (b.records[j].name == a.records[i].name) {
        found = true;
        differs = !same_record(a.records[i], b.records[j]);
        break;
      }
    }
    differs = differs || !found;
  }
  c.role = differs ? Role::receiver : Role::origin;
  if (c.role == Role::origin && is_collective(r.scope)) c.collective = collective_key(r.scope, r.op, occurrence);
  return c;
}

}  // namespace dtrace::diff
