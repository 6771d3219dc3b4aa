// Trace: the one dispatch point through which every kernel and every layer of
// minitrain runs, and the only code that talks to the dtrace recorder.
//
// A kernel is called with its named inputs and outputs; a layer is a scope with
// the named tensors it reads (activations, every weight, saved activations, the
// RNG state) and writes, enough to run it again from those alone. Trace records
// them at the recorder's level, and under DTRACE_ISOLATE it is what makes a
// layer or a single op run alone: everything but the target is skipped, the
// target's inputs are loaded from the capture before each repetition, and the
// repetitions are recorded one after the other.
#pragma once

#include <chrono>
#include <dtrace/recorder.hpp>
#include <initializer_list>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor.hpp"

namespace minitrain {

// What DTRACE_ISOLATE asked for: nothing, a layer ("fwd/layer.1/mlp") or one op
// in a layer ("fwd/layer.1/mlp::gemm_fc2"), and which call of it in the step
// (DTRACE_OCCURRENCE, 0 the first): an op a layer calls twice is isolated at
// the call the request names, from that call's captured inputs.
struct Isolation {
  enum class Kind { none, layer, op };
  Kind kind = Kind::none;
  std::string scope;
  std::string op;
  int occurrence = 0;
  int repeat = 1;

  static Isolation parse(const std::optional<std::string>& target, int repeat, int occurrence = 0);
  bool active() const { return kind != Kind::none; }
};

class Trace {
 public:
  // `recorder` may be null (no recording at all, as in unit tests). Before each
  // isolated repetition k, `on_repetition(k)` lets the rank re-key its chaos.
  Trace(dtrace::Recorder* recorder, Isolation isolation, std::function<void(int)> on_repetition);

  // The backend the tensors live on: with a device-resident one, records carry
  // digests computed on the device (batched, on its stream), and captured inputs
  // are loaded only after its queued work. Null: host tensors (the default).
  void set_backend(Backend* backend) { backend_ = backend; }

  // Off while fast-forwarding to a replayed step: nothing reaches the recorder.
  void set_recording(bool on) { recording_ = on; }
  // The recorder when records may be written now, else null.
  dtrace::Recorder* recorder() const { return recording_ ? recorder_ : nullptr; }
  const Isolation& isolation() const { return isolation_; }
  // How many times the isolated target ran here (0: not found or not captured).
  int isolated_runs() const { return isolated_runs_; }
  // Seconds spent handing records to the recorder since the last call, for the
  // cost of recording measured in the same run as the step it slows.
  double take_record_seconds() { return std::exchange(record_seconds_, 0.0); }
  // Charges the time of a scope to that account (the trace's own records, and
  // the trainer's records of step state, gradients and metrics).
  class RecordTimer {
   public:
    explicit RecordTimer(Trace& trace) : trace_(trace), start_(std::chrono::steady_clock::now()) {}
    ~RecordTimer() {
      trace_.record_seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    RecordTimer(const RecordTimer&) = delete;
    RecordTimer& operator=(const RecordTimer&) = delete;

   private:
    Trace& trace_;
    std::chrono::steady_clock::time_point start_;
  };

  // A plain scope part ("fwd", "layer.1"); pops on destruction.
  class Scope {
   public:
    Scope(Scope&&) = default;
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope();

   private:
    friend class Trace;
    Scope(Trace* trace, std::string_view part);
    Trace* trace_;
    std::optional<dtrace::Recorder::Scope> recorder_scope_;
    std::size_t previous_length_;
  };
  [[nodiscard]] Scope scope(std::string_view part);
  const std::string& path() const { return path_; }

  // Records `args` at `level` under `op` in the current scope: the step's state
  // and gradients, which belong to no kernel (the caller times it).
  void record(dtrace::Level level, std::string_view op, dtrace::RecordIo io,
              const std::vector<Arg>& args);
  // Several ops' records in order, fingerprinted in one device batch (one wait
  // for the stream instead of one per op).
  struct RecordGroup {
    std::string_view op;
    dtrace::RecordIo io;
    const std::vector<Arg>* args;
  };
  void record_groups(dtrace::Level level, std::initializer_list<RecordGroup> groups);

  // A layer scope: its inputs and outputs are recorded at Level::layer under op
  // = `part`. The body calls kernels.
  void layer(std::string_view part, const std::vector<Arg>& ins, const std::vector<Arg>& outs,
             const std::function<void()>& body);
  // A kernel: inputs and outputs recorded at Level::kernel; `run` computes.
  // Then each output a pin replaces (DTRACE_PIN) takes the pinned bytes before
  // anything reads or records it; returns whether one did, so that a caller
  // holding a fingerprint of an output taken inside `run` drops it.
  bool kernel(std::string_view op, const std::vector<Arg>& ins, const std::vector<Arg>& outs,
              const std::function<void()>& run);

 private:
  // record(), its time charged to the recording account.
  void record_timed(dtrace::Level level, std::string_view op, dtrace::RecordIo io,
                    const std::vector<Arg>& args);
  // Loads every input of `op` in the current scope from the capture. False when
  // the capture has none of them (this rank was not captured).
  bool load_captured(std::string_view op, const std::vector<Arg>& ins);
  // Pinned ops (dtrace-replay/1.3, man/dtrace-fp.5 "Pinned ops"): asks the
  // recorder once for each output of this call of `op` and writes what a pin
  // returns into the output's memory. Whether any was pinned.
  bool pin_outputs(std::string_view op, const std::vector<Arg>& outs);
  // Whether this call of the isolated target is the one the request names
  // (counts every call that reaches it).
  bool requested_call() { return target_calls_++ == isolation_.occurrence; }
  void run_isolated(std::string_view op, dtrace::Level level, const std::vector<Arg>& ins,
                    const std::vector<Arg>& outs, const std::function<void()>& run);

  dtrace::Recorder* recorder_;
  Backend* backend_ = nullptr;
  bool recording_ = true;
  Isolation isolation_;
  std::function<void(int)> on_repetition_;
  std::string path_;
  int isolated_runs_ = 0;
  int target_calls_ = 0;  // calls of the isolated layer or op reached so far
  double record_seconds_ = 0.0;
};

}  // namespace minitrain
