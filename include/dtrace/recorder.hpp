// dtrace recorder: what a training program links to write dtrace-fp/1 logs and
// to answer the replay protocol dtrace-replay/1 (dtrace-fp(5)).
//
// One Recorder per rank. The program brackets each optimizer step with
// begin_step()/end_step(), opens RAII scopes for layers ("fwd", "layer.1",
// "attn" nest into "fwd/layer.1/attn"), and hands over tensors and scalars with
// the level at which they matter. The recorder decides what to write (level and
// scope filters), fingerprints tensors (xxh3-64k/1), captures raw bytes when a
// replay asks for them, and flushes whole lines at each step end, so a crash
// leaves complete lines plus at most one partial line.
//
// What the recorder cannot do for the program, and bisect relies on
// (dtrace-fp(5), "What a workload must do"; examples/tinytrain keeps it all):
//   - the state a step starts from is recorded (RecordIo::state, level step)
//     before the step computes, with the same scope, op and name in a run and
//     in its replays: bisect's restore check matches them by that identity;
//   - a layer is a scope whose layer-level records use the scope's last part as
//     op, `in` for everything the layer reads (its parameters and RNG state
//     included: state records are not in a layer's capture) and `out` for
//     what it writes; its kernels record at kernel level in the same scope;
//   - DTRACE_ISOLATE wins over DTRACE_REPLAY_STEP (which then only names the
//     captured step): the program reaches the isolated layer or op through
//     the same scopes as in the run and runs only it, `repeat` times, each
//     from captured() inputs after begin_repetition(k);
//   - a replay restores the newest checkpoint at or before its step and runs
//     the steps between unrecorded: through a nondeterministic op that gives
//     another state than the run's, and bisect reports `restore`.
//
// Errors (a run directory that exists, an unwritable file, a bad DTRACE_*
// variable) are thrown as dtrace::RecorderError with a message naming the file
// or variable; a program catches it once in main.
//
// The C API (<dtrace/recorder.h>, man dtrace-recorder(3)) wraps this class for
// other languages: one implementation of the protocol.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtrace {

class RecorderError : public std::runtime_error {
 public:
  // What went wrong, for callers that branch on it (the C API's error codes).
  enum class Kind {
    io,           // a file or directory cannot be created, read or written; a capture is damaged
    environment,  // a DTRACE_* variable's value, or variables that cannot go together
    argument,     // a bad argument: options, dtype, shape against byte count, missing data
    order,        // a call out of order: a record outside a step, a step begun twice
  };
  explicit RecorderError(const std::string& message, Kind kind = Kind::io)
      : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// Granularity of a record, and of a run (dtrace-fp(5), the header's "level").
enum class Level : int { step = 0, layer = 1, kernel = 2 };
std::string_view level_name(Level level);
std::optional<Level> parse_level(std::string_view text);

// The `io` of a record. `timing` records (step time) are never compared by diff.
enum class RecordIo { in, out, state, metric, timing };

// A tensor, contiguous, in logical (row-major) element order; in host memory
// unless `digest` is given (see there).
struct TensorView {
  // A constructor rather than an aggregate, so that `{data, bytes, dtype,
  // shape}` keeps compiling warning-free (-Wmissing-field-initializers) now
  // that an optional digest follows.
  TensorView() = default;
  TensorView(const void* data_, std::size_t bytes_, std::string_view dtype_,
             std::vector<std::int64_t> shape_, std::optional<std::uint64_t> digest_ = std::nullopt)
      : data(data_), bytes(bytes_), dtype(dtype_), shape(std::move(shape_)), digest(digest_) {}

  const void* data = nullptr;
  std::size_t bytes = 0;
  std::string_view dtype;            // "f32", "bf16", "i32", ...
  std::vector<std::int64_t> shape;
  // The xxh3-64k/1 fingerprint of these bytes when the program already has it:
  // computed on the device that holds the tensor
  // (dtrace::gpu::fingerprint_device_batch), or while the bytes were still hot
  // in cache right after the kernel that wrote them (host_fingerprint). The
  // recorder then logs it as is instead of hashing `data`, which may be null,
  // except where DTRACE_CAPTURE writes the bytes (a null `data` there throws
  // RecorderError). `bytes` must still agree with dtype and shape. The recorder
  // cannot check the digest without doing the work it saves.
  std::optional<std::uint64_t> digest;
};

// xxh3-64k/1 of host bytes on the calling thread (dtrace-fp(5), FINGERPRINT): what the
// recorder would compute, for a TensorView::digest taken ahead of time.
std::uint64_t host_fingerprint(const void* data, std::size_t bytes);

// What a replay asked for through the environment (dtrace-fp(5), REPLAY PROTOCOL). Read once at
// start-up with from_environment(); an invalid value throws RecorderError naming
// the variable and the value. An empty variable counts as unset. Combinations
// that cannot mean anything are refused too: DTRACE_ISOLATE without
// DTRACE_INPUTS, DTRACE_INPUTS, DTRACE_OCCURRENCE or DTRACE_REPEAT > 1 without DTRACE_ISOLATE,
// DTRACE_CAPTURE naming the DTRACE_INPUTS directory, a workflow variable
// (DTRACE_RUN_DIR, DTRACE_STOP_AT, ...) in a replay, DTRACE_STOP_AT not after
// DTRACE_RESUME_AT.
struct ReplayRequest {
  std::optional<std::string> out;            // DTRACE_OUT
  // DTRACE_OUT_DIR (dtrace-replay/1.1, man/dtrace-fp.5 "Several processes, one
  // replay"): each rank writes <dir>/rank<r>.jsonl instead of DTRACE_OUT, and its
  // status to <dir>/rank<r>.status; its capture index is capture.rank<r>.jsonl.
  std::optional<std::string> out_dir;
  std::optional<std::int64_t> step;          // DTRACE_REPLAY_STEP
  // DTRACE_FAST_FORWARD=step: the steps fast-forwarded before the replayed
  // one are recorded at step level (not at all otherwise), so that bisect can
  // tell a fast-forward that departed from the run from a restore that missed
  // state (man/dtrace-fp.5, "Fast-forward through nondeterminism").
  bool record_fast_forward = false;
  std::optional<Level> level;                // DTRACE_LEVEL
  std::string scope;                         // DTRACE_SCOPE ("" = everywhere)
  std::optional<std::string> capture;        // DTRACE_CAPTURE (directory)
  std::optional<std::string> isolate;        // DTRACE_ISOLATE ("scope" or "scope::op")
  // DTRACE_OCCURRENCE: which call of the isolated op (or layer) in the captured
  // step to run, counted as a record's occurrence (0 the first call; dtrace-fp(5)).
  // nullopt when not named, which means the first call: a workload that counts
  // the calls of the isolated target and runs this one (isolate_call()) also
  // answers requests that name none.
  std::optional<int> isolate_occurrence;
  std::optional<std::string> inputs;         // DTRACE_INPUTS (a capture directory)
  int repeat = 1;                            // DTRACE_REPEAT
  // DTRACE_PIN (dtrace-replay/1.3, man/dtrace-fp.5 "Pinned ops"): a capture
  // directory whose out records are outputs the workload substitutes for
  // those of the same calls (Recorder::pinned), in the replayed step and in
  // each isolation repetition. Refused outside a replay.
  std::optional<std::string> pin;
  // dtrace's workflow extensions (man/dtrace.1: verify, tax), for a training run
  // (refused with DTRACE_REPLAY_STEP or DTRACE_ISOLATE, except DTRACE_DETERMINISTIC):
  std::optional<std::string> run_dir;         // DTRACE_RUN_DIR: the run directory, instead of
                                              // RunOptions.run_dir (the recorder applies it)
  std::optional<std::string> checkpoint_dir;  // DTRACE_CHECKPOINT_DIR: where checkpoints go
  std::optional<std::int64_t> stop_at;        // DTRACE_STOP_AT=K: run the steps before K,
                                              // checkpoint the start of step K, exit 0
  std::optional<std::int64_t> resume_at;      // DTRACE_RESUME_AT=K: restore the checkpoint of
                                              // step K, run from step K to the end
  std::optional<bool> deterministic;          // DTRACE_DETERMINISTIC=1|0: deterministic or fast kernels

  static ReplayRequest from_environment();
  // The same from a given set of variables (tests, launchers that build an
  // environment for a child); variables other than DTRACE_* are ignored.
  static ReplayRequest from_variables(const std::map<std::string, std::string>& variables);
  // True under DTRACE_REPLAY_STEP or DTRACE_ISOLATE: the program must write only
  // DTRACE_OUT and the capture directory, never its run directory or checkpoints.
  bool is_replay() const { return step.has_value() || isolate.has_value(); }
  // DTRACE_ISOLATE split: "fwd/layer.3::gemm_fc1" isolates op gemm_fc1 in scope
  // fwd/layer.3; "fwd/layer.3" the whole layer (isolate_op() is then empty).
  // Both empty without DTRACE_ISOLATE.
  std::string_view isolate_scope() const;
  std::string_view isolate_op() const;
  // The call to isolate: isolate_occurrence, or 0 when the request names none.
  int isolate_call() const { return isolate_occurrence.value_or(0); }
};

struct RunOptions {
  std::string run_dir;     // a normal run: <run_dir>/rank<r>.jsonl (ignored when replaying;
                           // DTRACE_RUN_DIR replaces it)
  std::string run_name;    // header "run"
  int rank = 0;
  int world_size = 1;
  Level level = Level::step;
  // Header "env" (the determinism-relevant variables) and "config" (a JSON
  // object as text, written verbatim), "replay.argv" (how to run this program
  // again; the protocol field is added by the recorder).
  std::vector<std::pair<std::string, std::string>> env;
  std::string config_json = "{}";
  std::vector<std::string> replay_argv;
  // Header "replay.cwd": where replay_argv runs; empty: the current directory at open().
  std::string replay_cwd;
  // Header "replicas" (dtrace-fp(5)): the data-parallel replica groups, ranks
  // that hold the same parameters, optimizer state and reduced gradients, so
  // `dtrace replicas` and `dtrace watch --replicas` need no --groups; and the
  // step-scope state ops that are each rank's own (RNG streams, data
  // positions). Not written when replica_groups is empty.
  std::vector<std::vector<int>> replica_groups;
  std::vector<std::string> per_rank_state = {"rng", "data"};
  // The program serves replay sessions (ReplaySession below): the header's
  // replay.protocol says "dtrace-replay/1.2", and dtrace bisect then starts it
  // once per side and sends it its replays as requests. Set it only in a
  // program that calls ReplaySession::from_environment() and serves what it
  // returns; unset, the header says 1.1 and every replay is a launch.
  bool serves_sessions = false;
  // The program honours pins (dtrace-replay/1.3, man/dtrace-fp.5 "Pinned
  // ops"): every op whose outputs it records at kernel level asks pinned()
  // for each output and uses what it returns. The header then says
  // "dtrace-replay/1.3", which includes sessions: it needs serves_sessions
  // (open() throws Kind::argument without it).
  bool honours_pins = false;
};

// One record of the capture that DTRACE_INPUTS names (this rank's, of the
// captured step), as Recorder::captured_records() lists them in seq order.
struct CapturedRecord {
  std::string scope, op, io, name;  // io as written: "in", "out", "state", ...
  int occurrence = 0;               // earlier records with the same scope, op, io, name
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t bytes = 0;   // the size of the captured file (0 when it is missing)
  std::uint64_t digest = 0;  // the fingerprint the capture recorded
  std::int64_t step = 0, seq = 0;
  std::string file;          // the raw bytes' path: <DTRACE_INPUTS>/<name from rank, step, seq>
};

class Recorder {
 public:
  // Opens the log for one rank. Under a replay request the log goes to
  // DTRACE_OUT_DIR/rank<r>.jsonl (dtrace-replay/1.1), else to DTRACE_OUT (one
  // file shared by the ranks of one process, lines never torn), and
  // DTRACE_LEVEL overrides options.level.
  //   - normal run: <run_dir>/rank<r>.jsonl, created with run_dir; an existing
  //     file is an error, never overwritten; beside it the rank's status
  //     <run_dir>/rank<r>.status, as under DTRACE_OUT_DIR below (its "exit"
  //     is the rank's end marker for `dtrace watch`);
  //   - DTRACE_OUT: that file (an existing empty file is replaced, one with
  //     content refused), kept open until the process exits so ranks opening
  //     and finishing at different times share it and its one header;
  //   - DTRACE_OUT_DIR: <dir>/rank<r>.jsonl, a new file (DTRACE_OUT is then
  //     ignored), the capture index capture.rank<r>.jsonl, and the rank's status
  //     in <dir>/rank<r>.status: "running PID STEP SEQ", refreshed at every step
  //     and scope, and "exit CODE" when the process exits (a process killed by a
  //     signal leaves "running"); so does DTRACE_RUN_DIR, in that directory;
  //   - DTRACE_REPLAY_STEP or DTRACE_ISOLATE without DTRACE_OUT: no log at all;
  //     run_dir is never created or written under a replay;
  //   - DTRACE_CAPTURE: also the capture directory (see tensor());
  //   - DTRACE_INPUTS: its capture index is read now (an error if unreadable).
  // Destroying a recorder with a step open writes that step's lines without an
  // end record (readers report it incomplete), except an open repetition,
  // which is ended normally.
  static std::unique_ptr<Recorder> open(const RunOptions& options, const ReplayRequest& request);
  virtual ~Recorder();

  // The level in force and whether a record of `level` inside the current scope
  // is written (kernel-level records are also filtered by DTRACE_SCOPE).
  // wants() is also false inside a fast-forwarded step (fast_forward()).
  virtual Level level() const = 0;
  virtual bool wants(Level level) const = 0;
  // The replay request this recorder was opened with.
  virtual const ReplayRequest& request() const = 0;
  // True when a tensor recorded now, in the current scope, would be captured
  // (DTRACE_CAPTURE, inside DTRACE_SCOPE): it then needs its host bytes.
  virtual bool captures() const = 0;

  virtual void begin_step(std::int64_t step) = 0;
  // Writes the end record for the step and flushes the step's lines.
  virtual void end_step() = 0;
  // True while a step (or repetition) is open.
  virtual bool in_step() const = 0;

  // Fast-forward: steps begun before `until_step` run without recording (their
  // begin_step, records and end_step are accepted and write nothing; wants()
  // is false), so a program that restored a checkpoint older than the step it
  // replays runs the steps between with its recording code unchanged. Under
  // DTRACE_FAST_FORWARD=step they are recorded at step level instead (wants()
  // is true for step-level records only; nothing is captured).
  // Under DTRACE_REPLAY_STEP=N open() sets N; -1 records every step. Applies
  // from the next begin_step().
  virtual void fast_forward(std::int64_t until_step) = 0;

  // Scopes nest; Scope pops on destruction.
  class Scope {
   public:
    Scope(Scope&& other) noexcept : recorder_(std::exchange(other.recorder_, nullptr)) {}
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      if (recorder_ != nullptr) recorder_->pop_scope();
    }

   private:
    friend class Recorder;
    explicit Scope(Recorder* recorder) : recorder_(recorder) {}
    Recorder* recorder_;
  };
  [[nodiscard]] Scope scope(std::string_view part) {
    push_scope(part);
    return Scope(this);
  }
  virtual std::string current_scope() const = 0;

  // Records a tensor (fingerprinted; captured when a capture is active and the
  // scope matches) if wants(level). `op` is the kernel, collective or layer.
  // Captured: every recorded tensor, at any level, whose scope starts with
  // DTRACE_SCOPE, to <capture>/r<rank>-s<step>-q<seq>.bin, listed in
  // <capture>/capture.jsonl (a dtrace-fp/1 log; each record has "file").
  // A byte count that disagrees with dtype and shape (for the dtypes f64, f32,
  // bf16, f16, f8*, i8..i64, u8..u64, bool) throws: it is the wrong buffer.
  // Recording outside begin_step()/end_step() throws.
  virtual void tensor(Level level, std::string_view op, RecordIo io, std::string_view name,
                      const TensorView& tensor) = 0;
  // Records a scalar with its exact bits. dtype "f32" uses the low 32 bits,
  // "f64" all 64, "bf16"/"f16" the low 16.
  virtual void scalar(Level level, std::string_view op, RecordIo io, std::string_view name,
                      std::string_view dtype, std::uint64_t bits, double value) = 0;
  void scalar_f32(Level level, std::string_view op, RecordIo io, std::string_view name, float v);
  void scalar_f64(Level level, std::string_view op, RecordIo io, std::string_view name, double v);

  // Every record of the capture DTRACE_INPUTS names, for this rank's captured
  // step, in seq order (empty without DTRACE_INPUTS).
  virtual const std::vector<CapturedRecord>& captured_records() const = 0;
  // The raw bytes of captured_records()[index], checked against its digest
  // (throws RecorderError naming the file when they do not match).
  virtual std::vector<std::byte> read_captured(std::size_t index) const = 0;

  // Isolation (DTRACE_ISOLATE + DTRACE_INPUTS): the raw bytes of a tensor that a
  // capture recorded, found by identity; nullopt when the capture lacks it (or
  // without DTRACE_INPUTS). The identity is this rank's record in the captured
  // step (DTRACE_REPLAY_STEP if set, else the capture's first complete step);
  // `occurrence` counts earlier captured records with the same (scope, op, io,
  // name). Bytes that no longer match the fingerprint in the index throw.
  virtual std::optional<std::vector<std::byte>> captured(std::string_view scope, std::string_view op,
                                                         RecordIo io, std::string_view name,
                                                         int occurrence = 0) const = 0;
  // Under isolation, repetition k's records are written as step k: begins
  // step k, first ending the previous repetition if one is open. The last
  // repetition ends with end_step() or when the recorder is destroyed.
  virtual void begin_repetition(int k) = 0;

  // Drops the open step: none of its records is written, and the next
  // begin_step() may reuse its number. For a step the program began and then
  // ended without finishing on purpose: `dtrace record`'s recorder begins a
  // step at the model's first forward and, when the program exits before the
  // optimizer steps (a last evaluation forward), that was no step. A crash
  // mid-step is not that: the destructor writes such a step, incomplete.
  virtual void discard_step() = 0;

  // Pinned ops (dtrace-replay/1.3, DTRACE_PIN; man/dtrace-fp.5 "Pinned ops").
  // dtrace bisect, having named a nondeterministic op, replays the step again
  // with that op's outputs replaced by one fixed result of it, on both sides,
  // to find what else differs. pins() is true while the open step (the
  // replayed step or a repetition, never a fast-forwarded one) may hold a
  // pinned call: a program may skip asking pinned() when it is false.
  virtual bool pins() const = 0;
  // Asks whether this call's output `name` of `op`, in the current scope, is
  // pinned, and with what: the bytes to put in place of the output (its
  // dtype and shape as recorded), before anything reads it and before its
  // out record, or nullopt to keep it. Ask once per output of every call of
  // every op that records its outputs at kernel level, whether or not its
  // records are written at the level in force: calls are counted per (scope,
  // op, name) within the step or repetition, and the k-th asking is matched
  // with the pin's record of occurrence k. Each pin returned is counted in
  // DTRACE_OUT_DIR/rank<r>.pins at the step's end, which dtrace checks.
  virtual std::optional<std::vector<std::byte>> pinned(std::string_view op, std::string_view name) = 0;

 protected:
  Recorder() = default;
  virtual void push_scope(std::string_view part) = 0;
  virtual void pop_scope() = 0;
};

// A replay session (dtrace-replay/1.2, man/dtrace-fp.5 "Replay sessions"):
// dtrace starts the program once with DTRACE_SESSION=dir and
// DTRACE_REPLAY_STEP=N, and sends it its replays one after another as request
// files dir/request.K.json, each holding the DTRACE_* variables a launch of
// that replay would get. The program serves each request as such a launch
// would (Recorder::open with the request, the same files), calls done(), and
// waits for the next, until the end request. A program serving sessions:
//
//   auto session = dtrace::ReplaySession::from_environment({rank});
//   if (!session) { ...a normal run or a launched replay... }
//   while (auto request = session->next()) {
//     restore step N: from the checkpoint when session->first_step_request(),
//     else from the copy kept in memory (an isolation needs neither);
//     auto recorder = dtrace::Recorder::open(options, *request);  // options.serves_sessions
//     ...run the step, or the isolated layer or op...;
//     recorder.reset();  // every file of the request written and closed
//     session->done();
//   }
//   return 0;  // after the end request
//
// Status files: next() writes each rank's "running PID" in the request's
// DTRACE_OUT_DIR at once (the Recorder then refreshes the same file), so a
// process that exits while serving the request, even before it opens a
// Recorder, leaves "exit CODE TIME" there; done() writes "done PID TIME" (or
// decline() "declined PID REASON"), after which nothing (not the exit 0 after
// the end request) rewrites that file.
class ReplaySession {
 public:
  // Null without DTRACE_SESSION (an empty value counts as unset). `ranks`: the
  // ranks this process runs (its status files). Throws
  // RecorderError(environment) when DTRACE_SESSION is not a directory or
  // DTRACE_REPLAY_STEP is missing or not a step number.
  static std::unique_ptr<ReplaySession> from_environment(std::vector<int> ranks);
  // The same from given variables (tests, programs that read their own).
  static std::unique_ptr<ReplaySession> from_variables(
      const std::map<std::string, std::string>& variables, std::vector<int> ranks);
  ~ReplaySession();
  ReplaySession(const ReplaySession&) = delete;
  ReplaySession& operator=(const ReplaySession&) = delete;

  // Waits for the next request (inotify, and a look every 10 ms) and returns it, built by
  // ReplayRequest::from_variables from the request's env alone (a variable not
  // in it is unset, whatever the process environment says); nullopt at the
  // end request. Throws RecorderError naming the request file when it is not a
  // request (bad JSON, another number, no DTRACE_OUT_DIR), Kind::environment
  // when its variables are bad or its DTRACE_REPLAY_STEP is not the session's,
  // Kind::order when the previous request was not done(), and Kind::io after
  // `timeout` without a request (unset: wait for ever; dtrace kills the
  // session's processes when it gives up).
  std::optional<ReplayRequest> next(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Writes "done PID TIME" as each rank's status in the request's DTRACE_OUT_DIR:
  // the answer is complete. Call it after every Recorder of the request is
  // destroyed (its log and capture index closed) and everything else the
  // request writes (kernels.rank<r>.json) is written. Kind::order without a
  // request being served.
  void done();
  // Declines the request instead of serving it (an extension of this
  // implementation, dtrace-fp(5) "Replay sessions"): writes "declined PID
  // REASON" as each rank's status in the request's DTRACE_OUT_DIR, and dtrace
  // serves the request by a launch with the same variables (no
  // DTRACE_SESSION), listing it in its report with `reason`; the session goes
  // on to the next request. For a request that needs a fresh process (a
  // program that can run its step once per process). Call it before the
  // request's Recorder opens, or after it is destroyed: what the request
  // wrote is discarded. A declined first step replay leaves the next step
  // request the first (first_step_request()). Every rank of the run must
  // decline a request, or none. Kind::order without a request being served;
  // Kind::argument when `reason` is empty or more than one line.
  void decline(std::string reason);

  // DTRACE_REPLAY_STEP of the session: the step every request replays or names.
  std::int64_t step() const;
  const std::string& directory() const;
  // The number of the request being served (or last served); -1 before the first.
  std::int64_t request_number() const;
  // True while serving a step replay (DTRACE_REPLAY_STEP without
  // DTRACE_ISOLATE) that is the session's first: it restores step N as a launch
  // does (nearest checkpoint, fast-forward, the fast-forwarded steps recorded
  // under DTRACE_FAST_FORWARD=step), and the program keeps the state at the
  // start of step N. Every later step replay starts from that kept state, with
  // nothing fast-forwarded or recorded before step N.
  bool first_step_request() const;
  // The variables of the request being served, exactly as the request file
  // gives them (for code that reads DTRACE_* itself: it must read these, not
  // the process environment); empty when none is being served.
  const std::map<std::string, std::string>& variables() const;

 private:
  struct State;
  explicit ReplaySession(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A scope that is a no-op when there is no recorder (null): code that runs
// with and without recording opens scopes the same way, without null checks.
//   dtrace::Scope layer(recorder, "layer.1");   // recorder may be null
class Scope {
 public:
  Scope(Recorder* recorder, std::string_view part) {
    if (recorder != nullptr) scope_.emplace(recorder->scope(part));
  }

 private:
  std::optional<Recorder::Scope> scope_;
};

}  // namespace dtrace
