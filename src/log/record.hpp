// The vocabulary of a dtrace-fp/1 log (dtrace-fp(5)): headers, records, steps.
//
// A Record's strings are views: a reader points them into its own intern table
// (valid while the reader lives), a writer's caller into whatever it owns. Keeping
// records small and allocation-free is what lets diff stream at disk speed.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtrace::log {

inline constexpr std::string_view kFormatMajor = "fp/1";

// `io` of a record. `timing` (wall-clock step time, used by `dtrace tax`) and
// `other` (a value this reader does not know) are read but never compared.
enum class Io : std::uint8_t { in, out, state, metric, timing, other };

std::string_view io_name(Io io);
Io parse_io(std::string_view text);
// True for the io kinds diff compares.
inline bool is_compared(Io io) { return io <= Io::metric; }

// A hash or scalar bit pattern as logged: up to 32 hex digits. Keeping the digit
// count makes "3f80" (bf16) and "00003f80" different, as the contract wants.
struct Digest {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  std::uint8_t digits = 0;

  bool operator==(const Digest&) const = default;
  bool empty() const { return digits == 0; }
  std::string hex() const;
  // hex() written into `out`, without an allocation (a record line, a chain):
  // the view is of `out`.
  std::string_view hex_to(std::array<char, 32>& out) const;
  static Digest from_u64(std::uint64_t value, std::uint8_t digits = 16);
};

// Parses lowercase or uppercase hex of 1..32 digits; false on anything else.
bool parse_digest(std::string_view text, Digest& out);

struct Record {
  std::int64_t step = 0;
  std::int64_t seq = 0;
  std::int32_t rank = 0;
  Io io = Io::other;
  bool scalar = false;     // carries `bits` (a scalar) rather than `hash` (a tensor)
  bool has_shape = false;
  bool has_value = false;
  std::string_view scope, op, name, dtype;
  std::string_view io_text;  // as written, for Io::other
  std::span<const std::int64_t> shape;
  Digest digest;  // `hash` for tensors, `bits` for scalars
  double value = 0.0;
  // Where the record was read: an index into the run's file list, and a 1-based line.
  std::uint32_t file = 0;
  std::uint64_t line = 0;
};

// The record as a JSON object with the contract's field names (for reports).
nlohmann::json to_json(const Record& record);
// "scope op io name": how reports and messages name a record.
std::string describe(const Record& record);

// One file's header record.
struct Header {
  std::string format;  // the `dtrace` field, e.g. "fp/1"
  std::string run;
  std::int64_t world_size = 0;
  std::string hash;
  std::string level;
  nlohmann::json env = nlohmann::json::object();
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json replay;  // null when absent
  // The one rank this file holds, when its header declares it (field `rank`,
  // dtrace-fp(5)): its lines are that rank's alone, steps in increasing order,
  // each step's end record its last line. A reader may then skip the steps
  // chains vouch for without reading them (diff's search).
  std::optional<std::int32_t> rank;
  nlohmann::json raw;     // the whole header object as read
  std::string file;
};

enum class StepStatus : std::uint8_t {
  complete,        // end record seen and it counted exactly the records present
  incomplete,      // no end record: the rank crashed mid-step
  count_mismatch,  // an end record whose count disagrees with the records present
  late,            // records that arrived after their step had already completed
};

std::string_view status_name(StepStatus status);

// All records of one rank at one step, in seq order.
struct Step {
  std::int32_t rank = 0;
  std::int64_t step = 0;
  StepStatus status = StepStatus::complete;
  std::int64_t declared_count = -1;  // the end record's count, -1 without one
  std::optional<std::uint64_t> chain;  // the end record's chained digest (dtrace-fp(5)), if any
  std::optional<std::int64_t> logged_line;  // the end record's `line` field (dtrace-fp(5)), if any
  std::int64_t end_line = 0;  // the line the end record is on (1-based), 0 when unknown
  std::vector<Record> records;
};

// The file a capture directory keeps a record's raw bytes in (dtrace-fp(5), capture directories:
// named from rank, step and seq, never from the workload's own names),
// e.g. "r0-s5-q17.bin". Writers (the recorder) and readers (bisect) share it.
std::string capture_file_name(std::int32_t rank, std::int64_t step, std::int64_t seq);

}  // namespace dtrace::log
