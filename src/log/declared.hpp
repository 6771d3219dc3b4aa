// A file held to its header's `rank` declaration (dtrace-fp(5), Header): the
// lines of that rank alone, steps in increasing order, each step's end record
// its last line. The one rule the streaming reader (log/reader.cpp) and
// watch's follower (watch/follow.cpp) apply line by line: diff's search skips
// what chains vouch for in such a file unread, so a file that breaks its
// declaration is an error wherever it is read, never a line one path sees
// and another does not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtrace::log {

class DeclaredRank {
 public:
  // `rank`: the header's declaration; nullopt (an undeclared file) holds to nothing.
  explicit DeclaredRank(std::optional<std::int32_t> rank = std::nullopt) : rank_(rank) {}

  // The next line of the file: empty when it keeps the declaration, else what
  // it breaks (the caller adds FILE:LINE).
  std::string check(std::int64_t rank, std::int64_t step, bool end_record);

  // The file's lines up to and including step `step`'s end record were skipped
  // unread (a shared prefix): held to the declaration from there on.
  void skipped_through(std::int64_t step) {
    last_step_ = step;
    last_end_ = step;
  }

 private:
  std::optional<std::int32_t> rank_;
  std::int64_t last_step_ = INT64_MIN;
  std::optional<std::int64_t> last_end_;
};

}  // namespace dtrace::log
