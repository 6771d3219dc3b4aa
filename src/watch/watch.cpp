#include "watch/watch.hpp"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <thread>

#include "diff/align.hpp"
#include "diff/classify.hpp"
#include "diff/divergence.hpp"
#include "diff/header.hpp"
#include "diff/notes.hpp"
#include "util/intervals.hpp"

namespace dtrace::watch {

namespace {

using Clock = std::chrono::steady_clock;
using diff::level_order;
using diff::note_step_sets;

// Complete steps one side may hold for a rank while the other side has not
// produced them: beyond this, that side's files of the rank are left unread
// until the other catches up. Memory then holds a few steps per rank whichever
// run is ahead (a finished reference, a live run).
constexpr std::size_t kAhead = 2;
// A divergence found at step s is reported once every rank has been compared
// up to s (so the first divergence is the run's earliest, as in diff), or
// after this long when some rank holds no such step.
constexpr auto kSettleWait = std::chrono::seconds(5);

double since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Waits for the runs' directories to change: inotify where the kernel has it
// (and the directory exists), otherwise a plain sleep of the poll interval.
// One inotify instance and a watch per run directory, never one per rank
// file: thousands of ranks need no more of the kernel's inotify limits. When
// inotify cannot be had (no instance left: fs.inotify.max_user_instances; no
// watch: max_user_watches) watch polls and says why (`problem`).
class Waiter {
 public:
  Waiter(bool use_inotify, double poll_seconds) : poll_ms_(std::max(1, static_cast<int>(poll_seconds * 1000))) {
    if (!use_inotify) return;
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ < 0) fall_back("no inotify instance", errno);
  }
  ~Waiter() {
    if (fd_ >= 0) ::close(fd_);
  }
  void watch(const std::string& directory) {
    if (fd_ < 0 || watched_.contains(directory)) return;
    if (::inotify_add_watch(fd_, directory.c_str(), IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) >= 0) {
      watched_.insert(directory);
    } else if (errno != ENOENT) {  // a run directory not made yet is watched once it is
      fall_back("cannot watch " + directory, errno);
    }
  }
  // Why inotify is not used though it was asked for ("" while it is).
  const std::string& problem() const { return problem_; }
  // Returns after a change or `limit_ms` at most.
  void wait(int limit_ms) {
    if (fd_ < 0 || watched_.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(limit_ms, poll_ms_)));
      return;
    }
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, limit_ms) > 0) {
      alignas(inotify_event) char buffer[16384];
      while (::read(fd_, buffer, sizeof buffer) > 0) {
      }
    }
  }
  bool inotify() const { return fd_ >= 0 && !watched_.empty(); }

 private:
  void fall_back(const std::string& what, int error) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    char every[32];
    std::snprintf(every, sizeof every, "%g", poll_ms_ / 1000.0);
    problem_ = "inotify unavailable (" + what + ": " + std::strerror(error) +
               "; see fs.inotify.max_user_instances and max_user_watches): polling every " + every + " s instead";
  }

  int fd_ = -1;
  std::string problem_;
  int poll_ms_;
  std::set<std::string> watched_;
};

}  // namespace

struct Watch::Side {
  char name = 'A';
  std::unique_ptr<RunFollower> follower;
  std::map<std::int32_t, std::map<std::int64_t, log::Step>> pending;  // complete, waiting for the other run
  std::map<std::int32_t, std::int64_t> max_yielded;
  std::map<std::int32_t, IntervalSet> one_sided, unfinished, late;
  std::set<std::int32_t> ranks;
  Clock::time_point last_growth = Clock::now();
  bool ended = false;
  bool markers_seen = false;  // every rank's end marker, at the last check
  std::string end_reason;

  std::size_t pending_for(std::int32_t rank) const {
    auto it = pending.find(rank);
    return it == pending.end() ? 0 : it->second.size();
  }
};

struct Watch::Impl {
  Options options;
  std::shared_ptr<log::Intern> intern = std::make_shared<log::Intern>();
  Side run, ref;
  bool has_ref = false;
  Waiter waiter;
  bool headers_checked = false;
  char finer = 0;
  std::uint64_t finer_only = 0;

  // Diff's state, kept as diff_runs keeps it.
  std::map<std::int32_t, diff::RankFirst> firsts;
  std::map<std::int64_t, std::set<std::string>> collective_inputs_differing;
  IntervalSet steps_compared;
  std::map<std::int32_t, std::int64_t> frontier;  // per rank, the last step compared
  std::uint64_t records = 0;

  // The first divergence, found and not yet reported.
  std::optional<std::int64_t> report_step;
  Clock::time_point found_at{};
  double read_at = 0;
  bool reported = false;
  std::set<std::int32_t> ranks_reported;

  std::optional<replicas::ReplicaCheck> replica_check;
  std::optional<replicas::Layout> layout;
  std::uint64_t departures_seen = 0;

  std::deque<Event> events;
  Clock::time_point started = Clock::now(), last_progress = Clock::now();
  std::uint64_t records_at_last_progress = 0;
  std::uint64_t compared_since_progress = 0;
  bool finished = false;
  bool run_drained = false, ref_drained = false;
  std::vector<log::Step> run_backlog, ref_backlog;

  Impl(const Options& o) : options(o), waiter(o.use_inotify, o.poll_seconds) {}

  Progress progress() {
    Progress p;
    for (auto [rank, step] : frontier) p.ranks[rank] = step;
    if (!frontier.empty()) {
      p.step = INT64_MAX;
      for (auto [rank, step] : frontier) p.step = std::min(p.step, step);
      if (run.follower->world_size() > static_cast<std::int64_t>(frontier.size())) p.step = -1;
    }
    p.records = records;
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - last_progress).count();
    p.records_per_second = dt > 0 ? static_cast<double>(records - records_at_last_progress) / dt : 0;
    p.seconds = std::chrono::duration<double>(now - started).count();
    if (replica_check) p.replicas_step = replica_check->settled_step();
    return p;
  }

  Result<void> check_headers() {
    if (headers_checked || !run.follower->has_header() || (has_ref && !ref.follower->has_header())) return {};
    headers_checked = true;
    if (options.replicas) {
      const log::Header& h = run.follower->header();
      auto declared = replicas::layout_from_header(h);
      if (!declared) return declared.error();
      replicas::Layout l;
      if (options.groups) {
        auto parsed = replicas::parse_groups(*options.groups, h.world_size);
        if (!parsed) return parsed.error();
        if (*declared) l.per_rank = (*declared)->per_rank;
        l.groups = std::move(*parsed);
        l.source = "--groups";
      } else if (*declared) {
        l = std::move(**declared);
      } else {
        return Error{options.run + ": no replica groups: the header has no \"replicas\" field (dtrace-fp(5)); "
                                   "name them: --replicas GROUPS (e.g. 0-" +
                     std::to_string(h.world_size - 1) + ")"};
      }
      layout = l;
      replica_check.emplace(l, [this](const log::Record& r) { return run.follower->location(r); });
    }
    if (!has_ref) return {};
    const log::Header& ha = run.follower->header();
    const log::Header& hb = ref.follower->header();
    if (ha.hash != hb.hash) {
      return Error{"runs cannot be compared: " + options.run + " fingerprints with \"" + ha.hash + "\", " +
                   *options.against + " with \"" + hb.hash + "\""};
    }
    if (ha.world_size != hb.world_size) {
      return Error{"runs cannot be compared: " + options.run + " has world_size " + std::to_string(ha.world_size) +
                   ", " + *options.against + " has " + std::to_string(hb.world_size)};
    }
    const auto order_a = level_order(ha.level), order_b = level_order(hb.level);
    if (order_a && order_b && *order_a != *order_b) finer = *order_a > *order_b ? 'A' : 'B';
    return {};
  }

  // diff's own description of a mismatch (diff::describe_mismatch), with the
  // records' places as the followers name them.
  diff::Mismatch describe(const log::Step& a, const log::Step& b, const diff::MismatchAt& at,
                          const diff::Classification& c) {
    auto where = [](const log::Step& step, std::ptrdiff_t i, const auto& follower) {
      return i >= 0 ? follower->location(step.records[static_cast<std::size_t>(i)]) : std::string();
    };
    return diff::describe_mismatch(a, b, at, c, where(a, at.a, run.follower), where(b, at.b, ref.follower));
  }

  void compare(const log::Step& a_read, const log::Step& b_read) {
    std::optional<log::Step> common;
    if (finer == 'A') common = diff::common_records(a_read, b_read, finer_only);
    if (finer == 'B') common = diff::common_records(b_read, a_read, finer_only);
    const log::Step& a = finer == 'A' ? *common : a_read;
    const log::Step& b = finer == 'B' ? *common : b_read;
    const diff::StepComparison result = diff::compare_step(a, b);
    records += result.records;
    compared_since_progress += result.records;
    steps_compared.insert(a.step);
    auto [f, fresh] = frontier.try_emplace(a.rank, a.step);
    if (!fresh) f->second = std::max(f->second, a.step);
    if (!result.first) return;
    if (!result.collective_inputs_differing.empty()) {
      collective_inputs_differing[a.step].insert(result.collective_inputs_differing.begin(),
                                                 result.collective_inputs_differing.end());
    }
    auto it = firsts.find(a.rank);
    if (it != firsts.end() && it->second.mismatch.step <= a.step) return;
    const diff::Classification c = diff::classify(a, b, *result.first);
    firsts[a.rank] = diff::RankFirst{describe(a, b, *result.first, c), c.collective};
    if (!reported && (!report_step || a.step < *report_step)) {
      if (!report_step) found_at = Clock::now();
      report_step = a.step;
      read_at = since_epoch();
    }
  }

  // As diff's take(): pairs a step of side x with side y's, or keeps it.
  void take(Side& x, Side& y, log::Step step) {
    const std::int32_t rank = step.rank;
    x.ranks.insert(rank);
    if (step.status != log::StepStatus::complete) {
      (step.status == log::StepStatus::late ? x.late : x.unfinished)[rank].insert(step.step);
      return;
    }
    auto [max_it, first_time] = x.max_yielded.try_emplace(rank, step.step);
    if (!first_time) max_it->second = std::max(max_it->second, step.step);
    auto& waiting = y.pending[rank];
    if (auto match = waiting.find(step.step); match != waiting.end()) {
      const log::Step& a = x.name == 'A' ? step : match->second;
      const log::Step& b = x.name == 'A' ? match->second : step;
      compare(a, b);
      waiting.erase(match);
    } else {
      auto y_max = y.max_yielded.find(rank);
      const bool y_passed = y.ended || (y_max != y.max_yielded.end() && y_max->second > step.step);
      if (y_passed) {
        x.one_sided[rank].insert(step.step);
      } else {
        x.pending[rank].emplace(step.step, std::move(step));
      }
    }
    // Side x moved past these steps of y: in step order it will not produce them.
    const std::int64_t passed = x.max_yielded[rank];
    while (!waiting.empty() && waiting.begin()->first < passed) {
      y.one_sided[rank].insert(waiting.begin()->first);
      waiting.erase(waiting.begin());
    }
  }

  void take_run_step(log::Step step) {
    if (replica_check) {
      for (replicas::Departure& d : replica_check->add(step)) {
        Event e;
        e.kind = EventKind::departed;
        e.departure = std::move(d);
        e.replicas = replica_check->report(options.run);
        e.read_at = since_epoch();
        e.reported_at = e.read_at;
        e.progress = progress();
        events.push_back(std::move(e));
      }
    }
    if (has_ref) take(run, ref, std::move(step));
  }

  diff::Report make_report() const {
    diff::Report report;
    report.run_a = options.run;
    report.run_b = *options.against;
    if (run.follower->has_header() && ref.follower->has_header()) {
      diff::compare_headers(run.follower->header(), ref.follower->header(), report);
    }
    if (finer != 0) {
      const char coarser = finer == 'A' ? 'B' : 'A';
      report.notes.push_back(std::string("run ") + finer + " was recorded at a finer level than run " + coarser +
                             ": only the records both levels write are compared (" + std::to_string(finer_only) +
                             " in/out records that only " + finer + "'s finer level writes were left out)");
    }
    if (!waiter.problem().empty()) report.notes.push_back("watch: " + waiter.problem());
    for (const std::string& n : run.follower->notes()) report.notes.push_back("run A: " + n);
    for (const std::string& n : ref.follower->notes()) report.notes.push_back("run B: " + n);
    note_step_sets(report.notes, run.one_sided, "only in run A, not compared");
    note_step_sets(report.notes, ref.one_sided, "only in run B, not compared");
    note_step_sets(report.notes, run.unfinished, "incomplete in run A (no end record or a wrong count), excluded");
    note_step_sets(report.notes, ref.unfinished, "incomplete in run B (no end record or a wrong count), excluded");
    note_step_sets(report.notes, run.late, "of run A: records after the step's end record (a file twice?), ignored");
    note_step_sets(report.notes, ref.late, "of run B: records after the step's end record (a file twice?), ignored");
    if (!steps_compared.empty()) {
      report.compared.first_step = steps_compared.min();
      report.compared.last_step = steps_compared.max();
      report.compared.steps = steps_compared.size();
    }
    report.compared.ranks = static_cast<std::int64_t>(frontier.size());
    report.compared.records = records;
    diff::Divergence divergence = diff::first_divergence(firsts, collective_inputs_differing);
    report.ranks = std::move(divergence.ranks);
    report.first = std::move(divergence.first);
    return report;
  }

  // The first divergence is reported once every rank is compared up to its
  // step: an earlier step of a slower rank could still diverge.
  void settle(bool force) {
    if (reported || !report_step) return;
    bool settled = force || Clock::now() - found_at >= kSettleWait;
    if (!settled) {
      settled = static_cast<std::int64_t>(frontier.size()) >= run.follower->world_size();
      for (auto [rank, step] : frontier) settled = settled && step >= *report_step;
    }
    if (!settled) return;
    reported = true;
    Event e;
    e.kind = EventKind::diverged;
    e.diff = make_report();
    e.read_at = read_at;
    e.reported_at = since_epoch();
    e.progress = progress();
    for (const auto& m : e.diff->ranks) ranks_reported.insert(m.rank);
    events.push_back(std::move(e));
  }

  void later_ranks() {
    if (!reported) return;
    // Roles settled as the report settles them (a collective's receiver).
    const diff::Divergence divergence = diff::first_divergence(firsts, collective_inputs_differing);
    for (const diff::Mismatch& m : divergence.ranks) {
      if (ranks_reported.contains(m.rank)) continue;
      ranks_reported.insert(m.rank);
      Event e;
      e.kind = EventKind::rank_diverged;
      e.mismatch = m;
      e.read_at = since_epoch();
      e.reported_at = e.read_at;
      e.progress = progress();
      events.push_back(std::move(e));
    }
  }

  bool side_ended(Side& side) {
    if (side.ended) return true;
    RunFollower& f = *side.follower;
    if (!f.has_header()) return false;
    // A rank writes its lines before its end marker, but they may have landed
    // after this poll looked: the run has ended at the first poll that finds
    // nothing new once every marker is there.
    const bool markers = f.end_markers();
    const bool markers_before_poll = side.markers_seen;
    side.markers_seen = markers;
    if (markers && markers_before_poll && f.at_rest()) {
      side.end_reason = "every rank's end marker (rank<r>.status: exit)";
    } else if (f.all_ranks_seen() && f.at_rest() &&
               std::chrono::duration<double>(Clock::now() - side.last_growth).count() >= options.idle_seconds) {
      char idle[64];
      std::snprintf(idle, sizeof idle, "%g", options.idle_seconds);
      side.end_reason = std::string("every rank ended a step and nothing grew for ") + idle + " s";
    } else {
      return false;
    }
    side.ended = true;
    return true;
  }

  // Polls one side; each step it completes is taken at once (or, before
  // both headers are known, kept in the backlog).
  Result<bool> poll_side(Side& side, Side* other) {
    RunFollower::Gate gate;
    if (other != nullptr) {
      // Until both headers are known nothing is compared: a file's first
      // chunk is read (its header is in it), the rest waits.
      gate = [this, &side](std::int32_t last_rank) {
        return headers_checked && (last_rank < 0 || side.pending_for(last_rank) < kAhead);
      };
    }
    std::vector<log::Step>& backlog = &side == &run ? run_backlog : ref_backlog;
    auto sink = [this, &side, &backlog](log::Step step) {
      if (!headers_checked) {
        backlog.push_back(std::move(step));
      } else if (&side == &run) {
        take_run_step(std::move(step));
      } else {
        take(ref, run, std::move(step));
      }
    };
    auto grew = side.follower->poll(sink, gate);
    if (!grew) return grew.error();
    if (*grew) side.last_growth = Clock::now();
    waiter.watch(side.follower->directory());
    return *grew;
  }

  Result<bool> step_once() {
    auto run_grew = poll_side(run, has_ref ? &ref : nullptr);
    if (!run_grew) return run_grew.error();
    if (auto r = check_headers(); !r) return r.error();
    bool active = *run_grew;
    if (has_ref) {
      auto ref_grew = poll_side(ref, &run);
      if (!ref_grew) return ref_grew.error();
      if (auto r = check_headers(); !r) return r.error();
      active = active || *ref_grew;
    }
    // Steps read before both headers were known (at most a first small chunk
    // per file) wait here until they are.
    if (headers_checked && (!run_backlog.empty() || !ref_backlog.empty())) {
      for (log::Step& s : run_backlog) take_run_step(std::move(s));
      for (log::Step& s : ref_backlog) take(ref, run, std::move(s));
      run_backlog.clear();
      ref_backlog.clear();
    }
    settle(false);
    if (options.replicas || reported) later_ranks();

    // The end: RUN ended; with a reference, also nothing of RUN left waiting
    // for a REF that may still write it.
    if (!active && headers_checked && !run_drained && side_ended(run)) {
      run_drained = true;
      for (log::Step& s : run.follower->finish()) take_run_step(std::move(s));
      // REF's steps that RUN never wrote will not be compared.
      for (auto& [rank, waiting] : ref.pending) {
        for (auto& [step, s] : waiting) ref.one_sided[rank].insert(step);
      }
      ref.pending.clear();
    }
    if (!active && run_drained) {
      if (has_ref && !ref_drained && side_ended(ref)) {
        ref_drained = true;
        for (log::Step& s : ref.follower->finish()) take(ref, run, std::move(s));
      }
      bool waiting = false;
      if (has_ref && !ref.ended) {
        for (const auto& [rank, steps_waiting] : run.pending) waiting = waiting || !steps_waiting.empty();
      }
      if (!waiting) return finish();
    }
    const auto now = Clock::now();
    if (now - last_progress >= std::chrono::duration<double>(options.progress_seconds) && compared_since_progress > 0) {
      Event e;
      e.kind = EventKind::progress;
      e.progress = progress();
      events.push_back(std::move(e));
      last_progress = now;
      records_at_last_progress = records;
      compared_since_progress = 0;
    }
    return active;
  }

  Result<bool> finish() {
    for (auto* side : {&run, &ref}) {
      for (auto& [rank, waiting] : side->pending) {
        for (auto& [step, s] : waiting) side->one_sided[rank].insert(step);
      }
      side->pending.clear();
    }
    settle(true);
    later_ranks();
    if (has_ref && steps_compared.empty()) {
      return Error{"runs cannot be compared: " + options.run + " and " + *options.against +
                   " have no complete step in common"};
    }
    Event e;
    e.kind = EventKind::ended;
    e.end_reason = run.end_reason;
    e.progress = progress();
    if (has_ref) e.diff = make_report();
    if (replica_check) {
      replica_check->finish();
      e.replicas = replica_check->report(options.run);
      for (const std::string& n : run.follower->notes()) e.replicas->notes.push_back(n);
      if (e.replicas->compared.steps == 0) {
        return Error{options.run + ": no step is complete on every rank of a replica group, nothing to compare"};
      }
    }
    events.push_back(std::move(e));
    finished = true;
    return false;
  }
};

Watch::Watch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Watch::~Watch() = default;

Result<std::unique_ptr<Watch>> Watch::open(const Options& options) {
  if (!options.against && !options.replicas) {
    return Error{"watch needs a reference (--against REF) or replica groups (--replicas), or both"};
  }
  if (options.idle_seconds < 0 || options.progress_seconds < 0) {
    return Error{"--idle and --progress take seconds, not a negative number"};
  }
  auto impl = std::make_unique<Impl>(options);
  impl->run.name = 'A';
  impl->run.follower = std::make_unique<RunFollower>(options.run, impl->intern);
  if (options.against) {
    impl->has_ref = true;
    impl->ref.name = 'B';
    impl->ref.follower = std::make_unique<RunFollower>(*options.against, impl->intern);
  }
  return std::unique_ptr<Watch>(new Watch(std::move(impl)));
}

const std::string& Watch::polling_reason() const { return impl_->waiter.problem(); }

Result<Event> Watch::next() {
  Impl& impl = *impl_;
  while (impl.events.empty()) {
    if (impl.finished) return Error{"watch: next() after the end"};
    auto active = impl.step_once();
    if (!active) return active.error();
    if (!impl.events.empty()) break;
    // With inotify a change wakes the wait; its limit is for the idle clock.
    if (!*active) impl.waiter.wait(250);
  }
  Event e = std::move(impl.events.front());
  impl.events.pop_front();
  return e;
}

}  // namespace dtrace::watch
