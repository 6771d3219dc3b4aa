// Capture directories (DTRACE_CAPTURE, DTRACE_INPUTS; dtrace-fp(5)).
//
// A capture holds the raw bytes of each tensor a replay recorded, one file per
// record named from (rank, step, seq) -- never from the record's own names,
// which come from the workload and could hold '/' or '..' -- and an index,
// capture.jsonl, that is itself a dtrace-fp/1 log of the captured records with
// an extra "file" field. Being a log, the index is read back with the ordinary
// RunReader, and dtrace can diff two captures like any two runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "dtrace/recorder.hpp"
#include "log/record.hpp"

namespace dtrace::recording {

inline constexpr std::string_view kCaptureIndex = "capture.jsonl";

using log::capture_file_name;

// Writes `bytes` to dir/name, refusing to replace a file; throws RecorderError.
void write_capture_file(const std::string& dir, const std::string& name, const void* data,
                        std::size_t bytes);

// One rank's captured tensors, read from a capture directory, found by identity.
class CaptureIndex {
 public:
  // Reads the index (dir/capture.jsonl, or capture.rank<r>.jsonl per process
  // under dtrace-replay/1.1, all together) and keeps `rank`'s records of `step`, or of the
  // rank's first complete step when no step is given (a capture holds the one
  // replayed step). Throws RecorderError naming the file on unreadable input.
  // `variable` names the directory in errors (DTRACE_INPUTS, DTRACE_PIN).
  static CaptureIndex load(const std::string& dir, std::int32_t rank,
                           std::optional<std::int64_t> step,
                           std::string_view variable = "DTRACE_INPUTS");

  // The bytes of the record (scope, op, io, name, occurrence), checked against
  // the fingerprint the index holds; nullopt when the capture lacks the record.
  std::optional<std::vector<std::byte>> bytes(std::string_view scope, std::string_view op,
                                              std::string_view io, std::string_view name,
                                              int occurrence) const;

  // Every record kept, in seq order, and the bytes of one of them, checked
  // against its fingerprint (throws RecorderError naming the file).
  const std::vector<CapturedRecord>& records() const { return records_; }
  std::vector<std::byte> read(std::size_t index) const;

  std::size_t size() const { return records_.size(); }

 private:
  using Key = std::tuple<std::string, std::string, std::string, std::string, int>;
  std::string dir_;
  std::vector<CapturedRecord> records_;
  std::vector<log::Digest> digests_;  // records_[i]'s fingerprint as the index wrote it
  std::map<Key, std::size_t, std::less<>> by_identity_;
};

}  // namespace dtrace::recording
