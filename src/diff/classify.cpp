#include "diff/classify.hpp"

#include <map>

#include "diff/consumed.hpp"

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

std::string io_of(const Record& r) { return std::string(r.io == Io::other ? r.io_text : log::io_name(r.io)); }

GeneratorRecord generator_of(const Record& r) {
  return {std::string(r.scope), std::string(r.op), io_of(r), std::string(r.name)};
}

// The first generator record (in a's order) whose value differs from b's
// record of the same identity, or that only one side holds.
std::optional<GeneratorRecord> differing_generator(const Step& a, const Step& b) {
  auto key = [](const Record& r) {
    return std::string(r.scope) + '\n' + std::string(r.op) + '\n' + io_of(r) + '\n' +
           std::string(r.name);
  };
  std::map<std::string, std::vector<const Record*>> in_b;
  for (const Record& r : b.records) {
    if (holds_generator(r)) in_b[key(r)].push_back(&r);
  }
  std::map<std::string, std::size_t> seen;
  for (const Record& r : a.records) {
    if (!holds_generator(r)) continue;
    const std::string k = key(r);
    const std::size_t occurrence = seen[k]++;
    auto it = in_b.find(k);
    if (it == in_b.end() || occurrence >= it->second.size() || !same_record(r, *it->second[occurrence])) {
      return generator_of(r);
    }
  }
  for (const auto& [k, records] : in_b) {
    if (records.size() > seen[k]) return generator_of(*records[seen[k]]);
  }
  return std::nullopt;
}

// The role by the op invocation's recorded inputs alone.
Classification classify_by_inputs(const Step& a, const Step& b, const MismatchAt& at) {
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

}  // namespace

bool holds_generator(const Record& r) {
  if (r.op == "rng") return true;
  return r.io == Io::in && (r.name == "rng" || r.name.starts_with("rng."));
}

Classification classify(const Step& a, const Step& b, const MismatchAt& at) {
  Classification c = classify_by_inputs(a, b, at);
  const Step& side = at.a >= 0 ? a : b;
  const Record& r = side.records[static_cast<std::size_t>(at.a >= 0 ? at.a : at.b)];
  if (holds_generator(r)) {
    c.role = Role::unknown;
    c.generator = generator_of(r);
    return c;
  }
  // What is computed, no record before it differing, in a step whose
  // generator differs, is the generator's draw (or computed from one). An
  // output whose op's input differs stays a receiver of that input (recorded
  // after it: dtrace_torch writes a backward's param_grad before its
  // grad_output), the generator named beside it.
  const bool computed = r.io == Io::out || r.io == Io::metric ||
                        (r.io == Io::in && !consumed_by_step(r.scope, "in"));
  if (!computed) return c;
  if (auto generator = differing_generator(a, b)) {
    if (!(r.io == Io::out && c.role == Role::receiver)) c.role = Role::unknown;
    c.generator = std::move(generator);
  }
  return c;
}

}  // namespace dtrace::diff
