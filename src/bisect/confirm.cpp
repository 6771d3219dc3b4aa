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

void workload_note(std::vector<std::string>& notes, const std::string& path, const std::string& why,
                   const std::string& unshown) {
  notes.push_back(path + ": " + why + "; " + unshown);
}

std::optional<nlohmann::json> workload_json(const std::string& path, const std::string& unshown,
                                            std::vector<std::string>& notes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const auto bad = [&](const std::string& why) {
    workload_note(notes, path, why, unshown);
    return std::nullopt;
  };
  // The workload wrote it: only a regular file is read (a FIFO would block).
  if (!std::filesystem::is_regular_file(path, ec)) return bad("not a regular file");
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  return j;
}

namespace {

// What the workload listed the op running beneath it during the confirm
// replay (dtrace-fp(5): kernels.rank<r>.json in the capture directory). The
// list is the workload's word, shown as such: a missing file lists nothing,
// and one that does not parse is named in a note rather than failing a bisect
// whose evidence stands without it.
void read_kernel_list(const std::string& dir, std::int32_t rank, Evidence& e, std::vector<std::string>& notes) {
  const std::string path = dir + "/kernels.rank" + n(rank) + ".json";
  const std::string unshown = "the op's kernel list is not shown";
  const auto j = workload_json(path, unshown, notes);
  if (!j) return;
  const auto bad = [&](const std::string& why) { workload_note(notes, path, why, unshown); };
  const auto list = j->find("kernels");
  if (list == j->end() || !list->is_array()) return bad("no array \"kernels\"");
  std::vector<std::string> names;
  for (const auto& k : *list) {
    if (!k.is_string()) return bad("a kernel name that is not a string");
    names.push_back(k.get<std::string>());
  }
  e.kernels = std::move(names);
  const auto text_of = [&](const char* key) {
    const auto it = j->find(key);
    return it != j->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  e.kernels_device = text_of("device");
  e.kernels_source = text_of("source");
}

// The largest finite |value| among the float inputs of the isolated call, as
// captured in `dir` (the capture the repetitions ran from): what the op
// summed, against which its rounding is judged. nullopt when none is a float.
// Read in chunks: an input may be far larger than memory wants to hold twice.
Result<std::optional<double>> input_magnitude(const std::string& dir, std::int32_t rank, std::int64_t step,
                                              const Suspect& kernel) {
  auto call = captured_call(dir, rank, step, Target{kernel.scope, kernel.op, kernel.occurrence});
  if (!call) return call.error();
  std::optional<double> largest;
  for (const auto& [name, record] : call->inputs) {
    const std::string dtype(record->dtype);
    if (!largest_magnitude(nullptr, 0, dtype)) continue;  // not a float
    const std::string path = dir + "/" + log::capture_file_name(rank, call->step.step.step, record->seq);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return Error{path + ": the captured input is not a regular file"};
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return Error{path + ": cannot read the captured input '" + name + "'"};
    std::vector<char> chunk(std::size_t{1} << 20);  // a multiple of every element size
    while (in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const auto got = static_cast<std::size_t>(in.gcount());
      if (got == 0) break;
      const auto m = largest_magnitude(reinterpret_cast<const std::byte*>(chunk.data()), got, dtype);
      largest = std::max(largest.value_or(0), m.value_or(0));
    }
  }
  return largest;
}

}  // namespace

Result<void> confirm(Session& s, const Suspect& kernel) {
  Report& rep = s.report;
  const int k = std::max(2, s.options.repeat);
  for (auto [side, slot] : {std::pair{&std::as_const(s.a), 'A'}, std::pair{&s.second(), 'B'}}) {
    const std::string x(1, slot);
    Variables variables = isolation_variables(n(rep.step), kernel.scope, kernel.scope + "::" + kernel.op,
                                              kernel.occurrence, s.round_path("capture-A"), k,
                                              s.round_path("confirm-out-" + x));
    variables.emplace_back("DTRACE_CAPTURE", s.round_path("confirm-" + x));
    if (auto r = s.replay("confirm", *side, variables, Target{kernel.scope, kernel.op, kernel.occurrence}); !r) {
      return r.error();
    }
  }
  auto reps_a = load_steps(s.round_path("confirm-out-A"), rep.rank);
  if (!reps_a) return reps_a.error();
  auto reps_b = load_steps(s.round_path("confirm-out-B"), rep.rank);
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
    auto a = read_capture(s.round_path(std::string("confirm-") + first->side), rep.rank, *first);
    if (!a) return a.error();
    auto b = read_capture(s.round_path(std::string("confirm-") + other->side), rep.rank, *other);
    if (!b) return b.error();
    auto inputs = input_magnitude(s.round_path("capture-A"), rep.rank, rep.step, kernel);
    if (!inputs) return inputs.error();
    e = compare_outputs(*a, *b, std::string(first->record->dtype), *inputs);
    e.reading = "repetition " + n(first->rep) + " of " + std::string(1, first->side) + " against repetition " +
                n(other->rep) + " of " + std::string(1, other->side) + ": " + e.reading;
  } else {
    e.dtype = first->record->dtype;
    e.reading = "alone, from the same inputs, the kernel gave one output in " + n(k) +
                " repetitions on each side: its nondeterminism did not show in isolation";
  }
  for (const Output& o : outputs) e.outputs.push_back({o.side, o.rep, o.record->digest.hex()});
  e.output = kernel.name;
  read_kernel_list(s.round_path("confirm-A"), rep.rank, e, rep.notes);
  e.repetitions = k;
  e.distinct_outputs = static_cast<int>(distinct.size());
  rep.evidence = e;
  if (e.distinct_outputs > 1) rep.basis = Basis::confirmed;
  return {};
}

}  // namespace dtrace::bisect
