// The recorder a training program links (include/dtrace/recorder.hpp).
//
// One RankRecorder per rank. Records of a step collect in memory and reach the
// log as whole lines at end_step(), so a crash leaves complete lines plus at
// most one partial line, and ranks sharing a replay's DTRACE_OUT never tear
// each other's lines. Where the lines go is decided once, at open():
//   DTRACE_OUT_DIR set           -> <dir>/rank<r>.jsonl, the rank's own file
//                                   (dtrace-replay/1.1: one replay, several
//                                   processes, man/dtrace-fp.5);
//   DTRACE_OUT set               -> that file, shared by the process's ranks;
//   otherwise, replaying         -> nowhere (the run directory is the user's);
//   otherwise                    -> <run_dir>/rank<r>.jsonl, a new file, where
//                                   DTRACE_RUN_DIR replaces run_dir (dtrace verify
//                                   and tax place each run they start).
// Beside a log in a directory of its own (DTRACE_OUT_DIR, the run directory)
// goes the rank's status file, rank<r>.status, ending "exit CODE".
#include "dtrace/recorder.hpp"

#include <bit>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <nlohmann/json.hpp>

#include "fingerprint/fingerprint.hpp"
#include "log/chain.hpp"
#include "log/record.hpp"
#include "log/writer.hpp"
#include "recorder/capture.hpp"
#include "recorder/sink.hpp"
#include "recorder/status.hpp"

namespace dtrace {

std::uint64_t host_fingerprint(const void* data, std::size_t bytes) {
  return fingerprint(data, bytes, 1);
}

namespace {

namespace fs = std::filesystem;
using recording::CaptureIndex;
using recording::LogSink;

// What the header's replay.protocol announces: 1.2 (replay sessions, served
// through ReplaySession) only when the program says it serves them, 1.3 when
// it also honours pins (Recorder::pinned).
constexpr std::string_view kReplayProtocol = "dtrace-replay/1.1";
constexpr std::string_view kSessionProtocol = "dtrace-replay/1.2";
constexpr std::string_view kPinProtocol = "dtrace-replay/1.3";

std::string_view protocol(const RunOptions& options) {
  if (options.honours_pins) return kPinProtocol;
  return options.serves_sessions ? kSessionProtocol : kReplayProtocol;
}

log::Io to_log_io(RecordIo io) {
  switch (io) {
    case RecordIo::in: return log::Io::in;
    case RecordIo::out: return log::Io::out;
    case RecordIo::state: return log::Io::state;
    case RecordIo::metric: return log::Io::metric;
    case RecordIo::timing: return log::Io::timing;
  }
  return log::Io::other;
}

using Kind = RecorderError::Kind;

// Bytes per element of the dtypes a tensor record may have; 0 for a dtype the
// recorder does not know, which it refuses: a size it cannot check could be
// the wrong buffer, and a misspelt dtype would make two runs differ in
// structure for no reason.
std::size_t element_size(std::string_view dtype) {
  if (dtype == "c128") return 16;
  if (dtype == "f64" || dtype == "i64" || dtype == "u64" || dtype == "c64") return 8;
  if (dtype == "f32" || dtype == "i32" || dtype == "u32") return 4;
  if (dtype == "bf16" || dtype == "f16" || dtype == "i16" || dtype == "u16") return 2;
  if (dtype == "i8" || dtype == "u8" || dtype == "bool" || dtype.starts_with("f8")) return 1;
  return 0;
}

// Hex digits of a scalar's `bits` (dtrace-fp(5)): the dtype's width.
int scalar_digits(std::string_view dtype) {
  if (dtype == "f64" || dtype == "i64" || dtype == "u64") return 16;
  if (dtype == "f32" || dtype == "i32" || dtype == "u32") return 8;
  if (dtype == "bf16" || dtype == "f16" || dtype == "i16" || dtype == "u16") return 4;
  if (dtype == "i8" || dtype == "u8" || dtype == "bool") return 2;
  return 0;
}

std::string describe(std::string_view scope, std::string_view op, std::string_view name) {
  return std::string(scope) + " " + std::string(op) + " '" + std::string(name) + "'";
}

// The configuration as the program wrote it: key order and number spelling
// kept. Only whitespace can hold a raw line break in valid JSON, so turning
// breaks into spaces keeps the header one line without changing the value.
std::string config_text(const std::string& text) {
  const auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    throw RecorderError("RunOptions.config_json is not a JSON object: " + text.substr(0, 80),
                        Kind::argument);
  }
  std::string out = text;
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const auto first = out.find_first_not_of(" \t");
  const auto last = out.find_last_not_of(" \t");
  return out.substr(first, last - first + 1);
}

// `own_file`: the file holds this rank alone, written in step order; the
// header says so (field `rank`, dtrace-fp(5)), which lets diff's search skip
// the steps chains vouch for. A file ranks share (DTRACE_OUT) does not.
std::string header_line(const RunOptions& options, Level level, bool own_file) {
  nlohmann::ordered_json header;
  header["dtrace"] = log::kFormatMajor;
  header["run"] = options.run_name;
  header["world_size"] = options.world_size;
  header["hash"] = kFingerprintAlgorithm;
  header["level"] = level_name(level);
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  for (const auto& [name, value] : options.env) env[name] = value;
  header["env"] = std::move(env);
  if (!options.replay_argv.empty()) {
    std::error_code ec;
    const fs::path cwd =
        options.replay_cwd.empty() ? fs::current_path(ec) : fs::path(options.replay_cwd);
    header["replay"] = {{"argv", options.replay_argv}, {"protocol", protocol(options)}};
    if (!ec) header["replay"]["cwd"] = cwd.string();
  }
  if (own_file) header["rank"] = options.rank;
  if (!options.replica_groups.empty()) {
    header["replicas"] = {{"groups", options.replica_groups}, {"per_rank", options.per_rank_state}};
  }
  std::string line = header.dump();
  line.pop_back();  // the closing brace: config goes in verbatim, not re-serialised
  line += ",\"config\":";
  line += config_text(options.config_json);
  line += '}';
  return line;
}

void check_options(const RunOptions& options, const ReplayRequest& request) {
  if (options.world_size < 1) {
    throw RecorderError("world_size " + std::to_string(options.world_size) + " is not positive",
                        Kind::argument);
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    throw RecorderError("rank " + std::to_string(options.rank) + " is outside world_size " +
                            std::to_string(options.world_size),
                        Kind::argument);
  }
  if (options.honours_pins && !options.serves_sessions) {
    throw RecorderError("honours_pins without serves_sessions: dtrace-replay/1.3, which announces pins, "
                        "includes replay sessions (1.2)",
                        Kind::argument);
  }
  if (!request.out && !request.out_dir && !request.is_replay() && options.run_dir.empty() &&
      !request.run_dir) {
    throw RecorderError("no run directory given (RunOptions.run_dir) and no DTRACE_OUT",
                        Kind::argument);
  }
}

class RankRecorder final : public Recorder {
 public:
  RankRecorder(const RunOptions& options, const ReplayRequest& request)
      : rank_(options.rank), level_(request.level.value_or(options.level)), request_(request) {
    check_options(options, request);
    if (request.step) fast_forward_until_ = *request.step;
    const std::string header = header_line(options, level_, false);
    const std::string own_header = header_line(options, level_, true);
    const std::string rank_name = "rank" + std::to_string(rank_);
    // The rank's status file goes beside its log, wherever the log is a run
    // directory of its own: dtrace watches a replay or an arm it started
    // through it, and `dtrace watch` ends a run at every rank's "exit"
    // (man/dtrace-fp.5, The end of a run), so a job recorded with its own
    // run_dir ends a watch at once rather than after --idle.
    std::optional<std::string> status_dir = request.run_dir;
    if (request.out_dir) {
      create_directory(*request.out_dir, "DTRACE_OUT_DIR");
      log_ = LogSink::create((fs::path(*request.out_dir) / (rank_name + ".jsonl")).string(), own_header);
      status_dir = request.out_dir;
    } else if (request.out) {
      log_ = LogSink::open_shared(*request.out, header, "DTRACE_OUT");
    } else if (!request.is_replay()) {
      log_ = LogSink::create(rank_file(options), own_header);
      status_dir = request.run_dir ? *request.run_dir : options.run_dir;
    }
    if (status_dir) {
      create_directory(*status_dir, request.out_dir   ? "DTRACE_OUT_DIR"
                                    : request.run_dir ? "DTRACE_RUN_DIR"
                                                      : "run directory");
      status_.emplace(recording::status_path(*status_dir, rank_));
    }
    if (request.capture) {
      create_directory(*request.capture, "DTRACE_CAPTURE");
      const fs::path capture(*request.capture);
      // Under 1.1 every process writes its own index; the tensor files are
      // named from the rank already and share the directory.
      capture_ = request.out_dir
                     ? LogSink::create((capture / ("capture." + rank_name + ".jsonl")).string(), header)
                     : LogSink::open_shared((capture / recording::kCaptureIndex).string(), header,
                                            "DTRACE_CAPTURE");
    }
    if (request.inputs) inputs_ = CaptureIndex::load(*request.inputs, rank_, request.step);
    if (request.pin) {
      // The pin capture holds one step per rank (bisect writes it), whatever
      // its number: the same pins serve the replayed step and each repetition.
      pins_ = CaptureIndex::load(*request.pin, rank_, std::nullopt, "DTRACE_PIN");
      for (const CapturedRecord& r : pins_->records()) {
        if (r.io == "out") pinned_ids_.emplace(r.scope, r.op, r.name);
      }
      // Beside the rank's log: in DTRACE_OUT_DIR, or beside DTRACE_OUT for a
      // program that speaks the single-process form (dtrace-replay/1).
      if (request.out_dir) {
        pins_file_ = (fs::path(*request.out_dir) / (rank_name + ".pins")).string();
      } else if (request.out) {
        pins_file_ = (fs::path(*request.out).parent_path() / (rank_name + ".pins")).string();
      }
    }
  }

  // An unfinished step's lines are still written, without an end record: the
  // log then shows what ran before the program gave up, marked incomplete. A
  // repetition needs no end_step(): it is finished when the next one begins.
  ~RankRecorder() override {
    if (!step_) return;
    try {
      if (repetition_) {
        end_step();
      } else {
        if (log_) log_->append(lines_);
        if (capture_) capture_->append(capture_lines_);
      }
    } catch (const RecorderError&) {
      // A destructor cannot report; the step is left incomplete in the log,
      // which readers already treat as a crash mid-step.
    }
  }

  Level level() const override { return level_; }

  bool wants(Level level) const override {
    if (level > level_) return false;
    // A fast-forwarded step: nothing, or its step-level records when bisect
    // asked for them (DTRACE_FAST_FORWARD=step) to check it against the run.
    if (fast_forwarding_) return level == Level::step && request_.record_fast_forward;
    return level != Level::kernel || inside_requested_scope();
  }

  const ReplayRequest& request() const override { return request_; }

  bool captures() const override {
    return capture_ != nullptr && !fast_forwarding_ && inside_requested_scope();
  }

  bool in_step() const override { return step_.has_value(); }

  void fast_forward(std::int64_t until_step) override { fast_forward_until_ = until_step; }

  const std::vector<CapturedRecord>& captured_records() const override {
    static const std::vector<CapturedRecord> none;
    return inputs_ ? inputs_->records() : none;
  }

  std::vector<std::byte> read_captured(std::size_t index) const override {
    if (!inputs_ || index >= inputs_->size()) {
      throw RecorderError("captured record " + std::to_string(index) + " does not exist (" +
                              std::to_string(captured_records().size()) + " captured)",
                          Kind::argument);
    }
    return inputs_->read(index);
  }

  void begin_step(std::int64_t step) override {
    if (step_) {
      throw RecorderError("begin_step(" + std::to_string(step) + ") while step " +
                              std::to_string(*step_) + " is open (call end_step() first)",
                          Kind::order);
    }
    if (last_step_ && step <= *last_step_) {
      throw RecorderError("begin_step(" + std::to_string(step) + ") after step " +
                              std::to_string(*last_step_) + ": a rank's steps must increase",
                          Kind::order);
    }
    if (step < 0) {
      throw RecorderError("begin_step(" + std::to_string(step) + "): steps are numbered from 0",
                          Kind::argument);
    }
    step_ = step;
    fast_forwarding_ = step < fast_forward_until_;
    repetition_ = false;
    seq_ = 0;
    captured_ = 0;
    pin_calls_.clear();
    pins_applied_ = 0;
    chain_.begin(chain_previous_, step);
    if (status_) status_->progress(step, 0);
  }

  void end_step() override {
    if (!step_) throw RecorderError("end_step() without begin_step()", Kind::order);
    if (fast_forwarding_ && !request_.record_fast_forward) {
      last_step_ = step_;
      step_.reset();
      fast_forwarding_ = false;
      return;
    }
    // A fast-forwarded step recorded at step level captured nothing: the
    // capture index holds the replayed step alone.
    const bool forwarded = std::exchange(fast_forwarding_, false);
    // The chain follows the steps this log holds: a fast-forwarded step not
    // recorded is not in it, so it is not chained either (begin_step started
    // this one from the last step written).
    chain_previous_ = chain_.finish();
    const std::int64_t step = *step_;
    if (capture_ && !forwarded) log::append_end_line(capture_lines_, rank_, step, captured_);
    if (!forwarded) acknowledge_pins(step);
    last_step_ = step_;
    step_.reset();
    repetition_ = false;
    // The capture first: once the log says a step is done, its inputs are on disk.
    if (capture_) capture_->append(capture_lines_);
    // The sink writes the end record: only it knows the record's line number.
    if (log_) log_->append_step(lines_, rank_, step, seq_, chain_previous_);
    capture_lines_.clear();
    lines_.clear();
  }

  void begin_repetition(int k) override {
    if (step_ && !repetition_) {
      throw RecorderError("begin_repetition(" + std::to_string(k) + ") while step " +
                              std::to_string(*step_) + " is open (call end_step() first)",
                          Kind::order);
    }
    if (step_) end_step();
    // Repetitions are numbered from 0 whatever step a replay names.
    fast_forward_until_ = -1;
    begin_step(k);
    repetition_ = true;
  }

  void discard_step() override {
    if (!step_) throw RecorderError("discard_step() without an open step", Kind::order);
    // Nothing of the step has reached a file (lines are written at end_step),
    // so forgetting its lines is all: the chain restarts from the last step
    // written at the next begin_step().
    step_.reset();
    repetition_ = false;
    fast_forwarding_ = false;
    lines_.clear();
    capture_lines_.clear();
    pin_calls_.clear();
    pins_applied_ = 0;
  }

  std::string current_scope() const override { return scope_; }

  bool pins() const override { return !pinned_ids_.empty() && step_ && !fast_forwarding_; }

  std::optional<std::vector<std::byte>> pinned(std::string_view op, std::string_view name) override {
    if (!pins()) return std::nullopt;
    const auto id = pinned_ids_.find(std::tuple{std::string_view(scope_), op, name});
    if (id == pinned_ids_.end()) return std::nullopt;
    // Counted only for pinned identities: the others never need their calls told apart.
    int& calls = pin_calls_[*id];
    auto bytes = pins_->bytes(scope_, op, "out", name, calls++);
    if (bytes) ++pins_applied_;
    return bytes;
  }

  void tensor(Level level, std::string_view op, RecordIo io, std::string_view name,
              const TensorView& tensor) override {
    require_step(op, name);
    check_tensor(op, name, tensor);
    if (!wants(level)) return;
    log::Record record = make_record(op, io, name);
    record.dtype = tensor.dtype;
    record.has_shape = true;
    record.shape = tensor.shape;
    record.digest = log::Digest::from_u64(tensor.digest ? *tensor.digest
                                                        : fingerprint(tensor.data, tensor.bytes, 0));
    log::append_record_line(lines_, record);
    chain_.add(record);
    if (captures()) {
      const std::string file = recording::capture_file_name(rank_, *step_, record.seq);
      recording::write_capture_file(*request_.capture, file, tensor.data, tensor.bytes);
      log::append_capture_line(capture_lines_, record, file);
      ++captured_;
    }
  }

  void scalar(Level level, std::string_view op, RecordIo io, std::string_view name,
              std::string_view dtype, std::uint64_t bits, double value) override {
    require_step(op, name);
    const int digits = scalar_digits(dtype);
    if (digits == 0) {
      throw RecorderError(describe(scope_, op, name) + ": scalar dtype '" + std::string(dtype) +
                              "' is not one of f64, f32, bf16, f16 or an integer type",
                          Kind::argument);
    }
    if (!wants(level)) return;
    log::Record record = make_record(op, io, name);
    record.scalar = true;
    record.dtype = dtype;
    const std::uint64_t mask =
        digits == 16 ? ~std::uint64_t{0} : (std::uint64_t{1} << (4 * digits)) - 1;
    record.digest = log::Digest::from_u64(bits & mask, static_cast<std::uint8_t>(digits));
    record.has_value = true;
    record.value = value;
    log::append_record_line(lines_, record);
    chain_.add(record);
  }

  std::optional<std::vector<std::byte>> captured(std::string_view scope, std::string_view op,
                                                 RecordIo io, std::string_view name,
                                                 int occurrence) const override {
    if (!inputs_) return std::nullopt;
    return inputs_->bytes(scope, op, log::io_name(to_log_io(io)), name, occurrence);
  }

 protected:
  void push_scope(std::string_view part) override {
    if (status_ && step_) status_->progress(*step_, seq_);
    scope_lengths_.push_back(scope_.size());
    if (part.empty()) return;
    if (!scope_.empty()) scope_ += '/';
    scope_ += part;
  }

  void pop_scope() override {
    if (scope_lengths_.empty()) return;
    scope_.resize(scope_lengths_.back());
    scope_lengths_.pop_back();
  }

 private:
  std::string rank_file(const RunOptions& options) const {
    const std::string& dir = request_.run_dir ? *request_.run_dir : options.run_dir;
    create_directory(dir, request_.run_dir ? "DTRACE_RUN_DIR" : "run directory");
    return (fs::path(dir) / ("rank" + std::to_string(rank_) + ".jsonl")).string();
  }

  static void create_directory(const std::string& dir, std::string_view what) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) {
      throw RecorderError(std::string(what) + " " + dir + ": cannot create directory" +
                          (ec ? ": " + ec.message() : std::string()));
    }
  }

  bool inside_requested_scope() const { return scope_.starts_with(request_.scope); }

  void require_step(std::string_view op, std::string_view name) const {
    if (!step_) {
      throw RecorderError(describe(scope_, op, name) +
                              " recorded outside a step (call begin_step() first)",
                          Kind::order);
    }
  }

  // A size that disagrees with dtype and shape means the program handed over
  // the wrong buffer; fingerprinting it anyway would log a plausible lie.
  void check_tensor(std::string_view op, std::string_view name, const TensorView& tensor) const {
    if (tensor.data == nullptr && tensor.bytes != 0) {
      // A digest stands in for bytes that live elsewhere, except where a
      // capture must write them.
      if (!tensor.digest) {
        throw RecorderError(describe(scope_, op, name) + ": no data for " +
                                std::to_string(tensor.bytes) + " bytes",
                            Kind::argument);
      }
      if (captures()) {
        throw RecorderError(describe(scope_, op, name) +
                                ": DTRACE_CAPTURE needs the tensor's bytes, and only its digest "
                                "was handed over",
                            Kind::argument);
      }
    }
    std::size_t elements = 1;
    for (std::int64_t extent : tensor.shape) {
      if (extent < 0 ||
          __builtin_mul_overflow(elements, static_cast<std::size_t>(extent), &elements)) {
        throw RecorderError(describe(scope_, op, name) + ": invalid shape (an extent < 0)",
                            Kind::argument);
      }
    }
    const std::size_t size = element_size(tensor.dtype);
    if (size == 0) {
      throw RecorderError(describe(scope_, op, name) + ": unknown dtype '" +
                              std::string(tensor.dtype) +
                              "' (f64 f32 bf16 f16 f8* c64 c128 i8..i64 u8..u64 bool)",
                          Kind::argument);
    }
    std::size_t expected = 0;
    if (__builtin_mul_overflow(elements, size, &expected) || expected != tensor.bytes) {
      throw RecorderError(describe(scope_, op, name) + ": " + std::to_string(tensor.bytes) +
                              " bytes, but " + std::to_string(elements) + " elements of " +
                              std::string(tensor.dtype) + " take " + std::to_string(expected),
                          Kind::argument);
    }
  }

  // One line per step or repetition ended under DTRACE_PIN: how many pinned
  // outputs the program took (man/dtrace-fp.5, "Pinned ops"), which bisect
  // holds against the pins it asked for. Appended, as repetitions end one by one.
  void acknowledge_pins(std::int64_t step) const {
    if (pins_file_.empty()) return;
    std::ofstream out(pins_file_, std::ios::app);
    out << "{\"step\":" << step << ",\"pinned\":" << pins_applied_ << "}\n";
    out.flush();
    if (!out) throw RecorderError(pins_file_ + ": cannot write the pins taken");
  }

  log::Record make_record(std::string_view op, RecordIo io, std::string_view name) {
    log::Record record;
    record.step = *step_;
    record.rank = rank_;
    record.seq = seq_++;
    record.scope = scope_;
    record.op = op;
    record.io = to_log_io(io);
    record.name = name;
    return record;
  }

  const std::int32_t rank_;
  const Level level_;
  const ReplayRequest request_;
  std::shared_ptr<LogSink> log_;      // null: a replay without DTRACE_OUT records nowhere
  std::shared_ptr<LogSink> capture_;  // null: no DTRACE_CAPTURE
  std::optional<CaptureIndex> inputs_;
  std::optional<recording::StatusFile> status_;  // under DTRACE_OUT_DIR or DTRACE_RUN_DIR

  std::string scope_;
  std::vector<std::size_t> scope_lengths_;  // scope_'s length before each push

  std::optional<std::int64_t> step_;  // the open step
  std::optional<std::int64_t> last_step_;
  bool repetition_ = false;    // the open step was begun by begin_repetition()
  std::int64_t fast_forward_until_ = -1;  // steps before this one are not recorded
  bool fast_forwarding_ = false;          // the open step is one of them
  std::int64_t seq_ = 0;       // records of the open step so far
  std::int64_t captured_ = 0;  // captured records of the open step so far
  std::string lines_;          // the open step's log lines
  log::ChainHasher chain_;     // the open step's chained digest (dtrace-fp(5)), so far
  std::uint64_t chain_previous_ = 0;  // the chain of the last step written
  std::string capture_lines_;  // the open step's capture index lines

  // DTRACE_PIN: the pinned outputs, their identities (scope, op, name), the
  // calls of each asked so far in the open step, and the pins taken there.
  using PinId = std::tuple<std::string, std::string, std::string>;
  std::optional<CaptureIndex> pins_;
  std::set<PinId, std::less<>> pinned_ids_;
  std::map<PinId, int, std::less<>> pin_calls_;
  std::int64_t pins_applied_ = 0;
  std::string pins_file_;  // DTRACE_OUT_DIR/rank<r>.pins (or beside DTRACE_OUT); empty without either
};

}  // namespace

std::unique_ptr<Recorder> Recorder::open(const RunOptions& options, const ReplayRequest& request) {
  return std::make_unique<RankRecorder>(options, request);
}

Recorder::~Recorder() = default;

void Recorder::scalar_f32(Level level, std::string_view op, RecordIo io, std::string_view name,
                          float v) {
  scalar(level, op, io, name, "f32", std::bit_cast<std::uint32_t>(v), static_cast<double>(v));
}

void Recorder::scalar_f64(Level level, std::string_view op, RecordIo io, std::string_view name,
                          double v) {
  scalar(level, op, io, name, "f64", std::bit_cast<std::uint64_t>(v), v);
}

}  // namespace dtrace
