// Pinned ops (dtrace-replay/1.3, man/dtrace-fp.5 "Pinned ops"): the pin
// captures bisect hands a replay in DTRACE_PIN, and the check that the
// workload took every pin it was given.
//
// A pin capture is a capture directory like any other (one capture.jsonl and
// the raw bytes named from rank, step and seq), so the recorder reads it with
// the code that reads DTRACE_INPUTS. It holds, for each rank, one step whose
// records are the pinned calls' out records, in the order the workload will
// ask for them: a record's occurrence is then the call the workload counts.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "bisect/session.hpp"
#include "log/writer.hpp"

namespace dtrace::bisect {

namespace {

namespace fs = std::filesystem;

std::string n(std::int64_t v) { return std::to_string(v); }

bool is_pinned(const std::vector<Pin>& pins, const log::Record& r) {
  if (r.io != log::Io::out) return false;
  for (const Pin& p : pins) {
    if (r.scope == p.scope && r.op == p.op) return true;
  }
  return false;
}

// The records to pin, by rank, each with the capture its bytes are in.
struct Chosen {
  const log::Record* record = nullptr;
  std::string capture;
};
using ByRank = std::map<std::int32_t, std::vector<Chosen>>;

// Writes `chosen` as the capture `dir`, renumbering each rank's records from
// seq 0 (their bytes copied under their new names), with `header` (a source
// capture's, its rank declaration dropped: one file holds every rank).
Result<int> write_capture(const ByRank& chosen, const log::Header& header, std::int64_t step,
                          const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error{dir + ": cannot create the pin capture: " + ec.message()};
  auto writer = log::Writer::create((fs::path(dir) / "capture.jsonl").string());
  if (!writer) return writer.error();
  nlohmann::json head = log::header_to_json(header);
  head.erase("rank");
  writer->raw_line(head.dump());
  int total = 0;
  for (const auto& [rank, records] : chosen) {
    std::int64_t seq = 0;
    for (const Chosen& c : records) {
      log::Record r = *c.record;
      const fs::path from = fs::path(c.capture) / log::capture_file_name(rank, r.step, r.seq);
      r.step = step;
      r.seq = seq++;
      const std::string file = log::capture_file_name(rank, step, r.seq);
      const fs::path to = fs::path(dir) / file;
      fs::copy_file(from, to, ec);
      if (ec) return Error{from.string() + ": cannot copy the pinned output to " + to.string() + ": " + ec.message()};
      std::string line;
      log::append_capture_line(line, r, file);
      line.pop_back();  // raw_line ends the line
      writer->raw_line(line);
      ++total;
    }
    writer->end_step(rank, step, seq);
  }
  if (auto r = writer->flush(); !r) return r.error();
  return total;
}

// Every rank's complete step `step` of a capture, read whole.
Result<LoadedSteps> read_capture_step(const std::string& capture, std::int64_t step) {
  return load_steps_where(capture, [step](const log::Step& s) { return s.step == step; });
}

}  // namespace

Result<int> write_step_pins(const std::vector<Pin>& pins, std::int64_t step, const std::string& dir) {
  // Each pin's capture read once; the readers kept while the records are written.
  std::map<std::string, LoadedSteps> captures;
  ByRank chosen;
  std::optional<log::Header> header;
  for (const Pin& p : pins) {
    if (!captures.contains(p.capture)) {
      auto read = read_capture_step(p.capture, step);
      if (!read) return read.error();
      captures.emplace(p.capture, std::move(*read));
    }
    const LoadedSteps& c = captures.at(p.capture);
    if (!header) header = c.reader->header();
    for (const log::Step& st : c.steps) {
      for (const log::Record& r : st.records) {
        if (is_pinned({p}, r)) chosen[st.rank].push_back({&r, p.capture});
      }
    }
  }
  if (chosen.empty() || !header) {
    return Error{"no captured output of the ops to pin (" + pins.back().scope + " " + pins.back().op + ") in " +
                 pins.back().capture};
  }
  return write_capture(chosen, *header, step, dir);
}

Result<int> write_isolation_pins(const std::vector<Pin>& pins, const std::string& capture, std::int64_t step,
                                 const Target& layer, const std::string& dir) {
  auto read = read_capture_step(capture, step);
  if (!read) return read.error();
  ByRank chosen;
  for (const log::Step& st : read->steps) {
    // A layer called once in the step: every pinned call inside its scope is
    // in that call. Called several times (micro-batches), the isolated call
    // spans its own records of that call, first in to last out, and the
    // pinned calls between them are the ones each repetition runs, counted
    // from its first. (A backward layer may record its in and out together
    // after its ops ran: then only the first rule can see its pinned calls.)
    std::int64_t first = -1, last = -1;
    int calls = 0;
    std::map<std::pair<std::string_view, std::string_view>, int> per_name;  // (io, name) -> occurrence
    for (const log::Record& r : st.records) {
      if (r.scope != layer.scope || r.op != layer.op) continue;
      const int occurrence = per_name[{r.io_text, r.name}]++;
      calls = std::max(calls, occurrence + 1);
      if (occurrence != layer.occurrence) continue;
      if (first < 0) first = r.seq;
      last = r.seq;
    }
    if (first < 0) continue;
    for (const log::Record& r : st.records) {
      const bool in_call = calls == 1 || (r.seq > first && r.seq < last);
      if (in_call && inside_scope(r.scope, layer.scope) && is_pinned(pins, r)) chosen[st.rank].push_back({&r, capture});
    }
  }
  if (chosen.empty()) return 0;
  return write_capture(chosen, read->reader->header(), step, dir);
}

Result<void> check_pins_taken(const std::string& who, const std::string& out, const std::string& pins,
                              std::int32_t rank, bool repetitions) {
  // What was asked: the pin capture's records of the rank.
  auto asked = load_steps(pins, rank);
  if (!asked) return asked.error();
  int expected = 0;
  for (const log::Step& st : asked->steps) expected += static_cast<int>(st.records.size());
  if (expected == 0) return {};
  const fs::path ack = fs::path(out) / ("rank" + n(rank) + ".pins");
  const std::string refused = who + ": the workload announces dtrace-replay/1.3 but did not take the pins "
                                    "DTRACE_PIN=" + pins + " gave rank " + n(rank) + " (" + n(expected) +
                                    " pinned outputs): ";
  std::ifstream in(ack);
  if (!in) return Error{refused + "no " + ack.string() + " (a recorder that honours pins writes it)"};
  std::string line;
  int lines = 0;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j.contains("pinned") ||
        !j["pinned"].is_number_integer()) {
      return Error{ack.string() + ":" + n(line_number) + ": not a pin acknowledgement ({\"step\":K,\"pinned\":N})"};
    }
    ++lines;
    const int taken = j["pinned"].get<int>();
    if (taken != expected) {
      const std::string where = repetitions ? "repetition " + n(j["step"].get<std::int64_t>())
                                            : "step " + n(j["step"].get<std::int64_t>());
      return Error{refused + where + " took " + n(taken) + " (" + ack.string() + ":" + n(line_number) + ")"};
    }
  }
  if (lines == 0) return Error{refused + ack.string() + " is empty"};
  return {};
}

}  // namespace dtrace::bisect
