// Stage 4: the suspect kernel alone, from its captured inputs, K times per
// side. How many distinct outputs it produced, and how they differ, is the
// evidence a reviewer reads.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "bisect/session.hpp"
#include "log/record.hpp"

namespace dtrace::bisect {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

struct Output {
  char side;
  std::int64_t rep;
  const log::Record* record;
};

Result<std::vector<std::byte>> read_capture(const std::string& dir, std::int32_t rank, const Output& o) {
  const std::string path = dir + "/" + log::capture_file_name(rank, o.rep, o.record->seq);
  // The workload wrote it: only a regular file is read (a FIFO would block
  // forever, nothing writes to it any more; a device would never end).
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Error{path + ": the captured output is not a regular file"};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot read the captured output"};
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(raw.size());
  std::memcpy(bytes.data(), raw.data(), raw.size());
  return bytes;
}

}  // namespace

Result<void> confirm(Session& s, const Suspect& kernel) {
  Report& rep = s.report;
  const int k = std::max(2, s.options.repeat);
  for (auto [side, slot] : {std::pair{&std::as_const(s.a), 'A'}, std::pair{&s.second(), 'B'}}) {
    const std::string x(1, slot);
    Variables variables = isolation_variables(n(rep.step), kernel.scope, kernel.scope + "::" + kernel.op,
                                              kernel.occurrence, s.path("capture-A"), k,
                                              s.path("confirm-out-" + x));
    variables.emplace_back("DTRACE_CAPTURE", s.path("confirm-" + x));
    if (auto r = s.replay("confirm", *side, variables, Target{kernel.scope, kernel.op, kernel.occurrence}); !r) {
      return r.error();
    }
  }
  auto reps_a = load_steps(s.path("confirm-out-A"), rep.rank);
  if (!reps_a) return reps_a.error();
  auto reps_b = load_steps(s.path("confirm-out-B"), rep.rank);
  if (!reps_b) return reps_b.error();
  std::vector<Output> outputs;
  for (auto [side, loaded] : {std::pair{'A', &*reps_a}, std::pair{'B', &*reps_b}}) {
    for (const log::Step& st : loaded->steps) {
      for (const log::Record& r : st.records) {
        if (r.io == log::Io::out && r.op == kernel.op && r.name == kernel.name && r.scope == kernel.scope) {
          outputs.push_back(Output{side, st.step, &r});
          break;
        }
      }
    }
  }
  if (outputs.empty()) {
    return Error{"isolating " + kernel.scope + "::" + kernel.op + " recorded no output '" + kernel.name +
                 "' for rank " + n(rep.rank)};
  }
  std::set<std::string> distinct;
  for (const Output& o : outputs) distinct.insert(o.record->digest.hex());
  Evidence e;
  const Output* first = &outputs.front();
  const Output* other = nullptr;
  for (const Output& o : outputs) {
    if (o.record->digest != first->record->digest) {
      other = &o;
      break;
    }
  }
  if (other != nullptr) {
    auto a = read_capture(s.path(std::string("confirm-") + first->side), rep.rank, *first);
    if (!a) return a.error();
    auto b = read_capture(s.path(std::string("confirm-") + other->side), rep.rank, *other);
    if (!b) return b.error();
    e = compare_outputs(*a, *b, std::string(first->record->dtype));
    e.reading = "repetition " + n(first->rep) + " of " + std::string(1, first->side) + " against repetition " +
                n(other->rep) + " of " + std::string(1, other->side) + ": " + e.reading;
  } else {
    e.dtype = first->record->dtype;
    e.reading = "alone, from the same inputs, the kernel gave one output in " + n(k) +
                " repetitions on each side: its nondeterminism did not show in isolation";
  }
  e.output = kernel.name;
  e.repetitions = k;
  e.distinct_outputs = static_cast<int>(distinct.size());
  rep.evidence = e;
  if (e.distinct_outputs > 1) rep.basis = Basis::confirmed;
  return {};
}

}  // namespace dtrace::bisect
