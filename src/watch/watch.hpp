// `dtrace watch RUN [--against REF] [--replicas GROUPS]` (dtrace(1), watch):
// compares a run while its job writes it. Each (rank, step) is compared as
// soon as RUN and REF both hold it complete, with diff's semantics
// (diff::compare_step, diff::classify); with replica groups each step of RUN
// is also checked across its replicas (replicas::ReplicaCheck).
//
// `Watch::next` waits for the job (inotify where the kernel has it, polling
// otherwise), compares what arrived and returns the next event: progress, a
// divergence (the diff report as it stands once every rank has been compared
// up to that step), a rank departing from its replicas, or the end of the run.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "diff/diff.hpp"
#include "replicas/replicas.hpp"
#include "util/result.hpp"
#include "watch/follow.hpp"

namespace dtrace::watch {

struct Options {
  std::string run;
  std::optional<std::string> against;   // REF
  bool replicas = false;                // check replica groups
  std::optional<std::string> groups;    // --replicas GROUPS; nullopt: the header's
  // The run has ended when every rank has completed a step, every file is
  // read to its end and no file grew for this long (or every rank's end
  // marker is there).
  double idle_seconds = 600;
  double progress_seconds = 1;
  // Without inotify, the interval between polls.
  double poll_seconds = 0.05;
  bool use_inotify = true;
};

struct Progress {
  std::int64_t step = -1;  // the last step compared on every rank (-1: none yet)
  std::map<std::int32_t, std::int64_t> ranks;  // each rank's last compared step
  std::uint64_t records = 0;                   // records compared
  double records_per_second = 0;               // since the last progress
  double seconds = 0;                          // since the watch began
  std::int64_t replicas_step = -1;             // the last step every replica group compared
};

enum class EventKind { progress, diverged, rank_diverged, departed, ended };

struct Event {
  EventKind kind = EventKind::progress;
  Progress progress;
  // diverged: the report as `dtrace diff` would give it for what was compared
  // so far; ended with a reference: the final report.
  std::optional<diff::Report> diff;
  std::optional<diff::Mismatch> mismatch;  // rank_diverged (--keep-going)
  std::optional<replicas::Departure> departure;
  std::optional<replicas::Report> replicas;  // departed, ended with --replicas
  std::string end_reason;                    // ended
  // When watch read the line completing the step that showed the divergence
  // or departure (seconds since the epoch), and when it reported it.
  double read_at = 0, reported_at = 0;
};

class Watch {
 public:
  // Checks the options; the runs need not exist yet. An Error for options that
  // cannot work (neither --against nor --replicas).
  static Result<std::unique_ptr<Watch>> open(const Options& options);
  ~Watch();

  // The next event. After `ended`, or after `diverged` / `departed` when the
  // caller stops, it must not be called again.
  Result<Event> next();

  // Why watch polls though inotify was asked for ("" while inotify is used):
  // the kernel gave no inotify instance or watch (its limits). The diff
  // report's notes say it too.
  const std::string& polling_reason() const;

  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  struct Side;
  struct Impl;
  explicit Watch(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrace::watch
