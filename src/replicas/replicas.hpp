// Replica checks (dtrace(1), replicas): data-parallel ranks of one replica
// group hold the same parameters and optimizer state at every step and step
// with the same gradients after the all-reduce. A rank whose records depart
// from its group's is a silent data corruption or a collective that did not
// give every rank the same bits; no reference run is needed to see it.
//
// `ReplicaCheck` takes assembled steps one at a time (from `dtrace replicas`'
// reader, or from `dtrace watch --replicas` while the run is written), keeps
// only the records replicas must agree on for the steps not yet held by every
// rank of their group, and compares each step as soon as the group holds it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "diff/diff.hpp"
#include "diff/notes.hpp"
#include "log/record.hpp"
#include "util/intervals.hpp"
#include "util/result.hpp"

namespace dtrace::replicas {

using Group = std::vector<std::int32_t>;  // ranks, ascending

// Which ranks are replicas of each other, and which `step`-scope state ops are
// each rank's own (dtrace-fp(5), header field "replicas").
struct Layout {
  std::vector<Group> groups;
  std::set<std::string, std::less<>> per_rank = {"rng", "data"};
  std::string source;  // "--groups" or "header"
};

// "0-7", "0,2,4,6:1,3,5,7": groups separated by ':', ranks and ranges by ','.
// Every rank below world_size, none in two groups, each group of 2 ranks or
// more. Errors say what is wrong with the text.
Result<std::vector<Group>> parse_groups(std::string_view text, std::int64_t world_size);

// The layout a header declares ("replicas": {"groups": [[...]], "per_rank":
// [...]}); nullopt when it declares none. An Error when the field is there but
// not of that form (names `file`).
Result<std::optional<Layout>> layout_from_header(const log::Header& header);

// True for a record replicas must agree on (dtrace(1), replicas): in scope
// `step`, state records (io "state") except the per-rank ops, and the
// gradients the optimizer steps with (op "grads", io "out"); under `comm/`, the
// outputs of an all-reduce (an op or scope naming allreduce or all_reduce).
bool must_agree(const log::Record& record, const Layout& layout);

// One value a record took across a group's ranks, and the ranks holding it.
struct Variant {
  std::vector<std::int32_t> ranks;
  nlohmann::json record;  // null: these ranks lack the record
  std::string location;   // FILE:LINE of the lowest rank's record, empty when absent
};

// A group's first departure: the first record (in seq order) of the first step
// at which its ranks disagree.
struct Departure {
  std::size_t group = 0;  // index into Report::groups
  std::int64_t step = 0;
  std::int64_t seq = 0;  // the record's seq on the lowest rank holding it
  std::string scope, op, io, name;
  int occurrence = 0;
  int calls = 1;  // the most records of its (scope, op, io, name) a rank of the group holds
  diff::Kind kind = diff::Kind::value;
  // Majority: one value held by more than half the group's ranks; the departing
  // ranks are the others. Without one, departing is empty and every variant is
  // listed: the check cannot tell which rank left.
  bool majority = false;
  std::vector<std::int32_t> departing;
  std::vector<Variant> variants;  // the majority's (when there is one) first, then by lowest rank
};

struct Compared {
  std::int64_t first_step = 0, last_step = -1;
  std::int64_t steps = 0;        // distinct steps compared in at least one group
  std::uint64_t records = 0;     // records compared, every rank's counted
};

struct Report {
  std::string run;
  Layout layout;
  std::optional<Departure> first;     // earliest step, then lowest group
  std::vector<Departure> departures;  // each departed group's first, by group
  Compared compared;
  std::vector<std::string> notes;
  bool departed() const { return first.has_value(); }
};

// FILE:LINE of a record (a reader's location()).
using Locate = std::function<std::string(const log::Record&)>;

class ReplicaCheck {
 public:
  ReplicaCheck(Layout layout, Locate locate);

  // One assembled step of one rank. Ranks in no group are noted once and
  // skipped; incomplete steps are noted and excluded as diff excludes them.
  // Returns the departures this step settled (a group's first only).
  std::vector<Departure> add(const log::Step& step);
  // The input ended: steps some ranks of a group never completed are noted.
  void finish();

  // The report so far (first, departures, compared, notes).
  Report report(const std::string& run) const;
  // The last step every group has compared (or -1): for progress output.
  std::int64_t settled_step() const;

 private:
  struct Pending {
    std::map<std::int32_t, std::vector<log::Record>> ranks;
  };
  struct GroupState {
    std::map<std::int64_t, Pending> steps;
    std::map<std::int32_t, std::int64_t> last_seen;  // per rank, steps arrive in order
    std::optional<Departure> first;
    std::int64_t last_compared = -1;
  };
  std::optional<Departure> compare(std::size_t group, std::int64_t step, Pending& pending);
  void settle(std::size_t group, std::vector<Departure>& out);

  Layout layout_;
  Locate locate_;
  std::map<std::int32_t, std::size_t> group_of_;
  std::vector<GroupState> groups_;
  IntervalSet steps_compared_;
  std::uint64_t records_ = 0;
  std::set<std::int32_t> ungrouped_;
  std::map<std::int32_t, IntervalSet> unfinished_;  // ranks' incomplete steps
  std::map<std::string, IntervalSet> partial_;      // "ranks R of group G" -> steps not compared
};

// `dtrace replicas RUN`: reads the run once (streaming, one step per rank in
// memory) and checks every group. `groups`: from the command line; nullopt
// reads them from the header. Trouble (unreadable input, no groups, no step
// complete on every rank of a group) is an Error.
Result<Report> check_run(const std::string& run, const std::optional<std::string>& groups);

// The text for a list of ranks: "rank 3", "ranks 0-2,5" (diff's wording).
using diff::rank_list;

}  // namespace dtrace::replicas
