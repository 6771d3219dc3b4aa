#include "trace.hpp"

#include <cstring>
#include <stdexcept>

namespace minitrain {

Isolation Isolation::parse(const std::optional<std::string>& target, int repeat, int occurrence) {
  Isolation isolation;
  if (!target) return isolation;
  isolation.repeat = repeat < 1 ? 1 : repeat;
  isolation.occurrence = occurrence < 0 ? 0 : occurrence;
  const auto sep = target->find("::");
  if (sep == std::string::npos) {
    isolation.kind = Kind::layer;
    isolation.scope = *target;
  } else {
    isolation.kind = Kind::op;
    isolation.scope = target->substr(0, sep);
    isolation.op = target->substr(sep + 2);
  }
  return isolation;
}

Trace::Trace(dtrace::Recorder* recorder, Isolation isolation,
             std::function<void(int)> on_repetition)
    : recorder_(recorder),
      isolation_(std::move(isolation)),
      on_repetition_(std::move(on_repetition)) {}

Trace::Scope::Scope(Trace* trace, std::string_view part)
    : trace_(trace), previous_length_(trace->path_.size()) {
  if (!trace_->path_.empty()) trace_->path_ += '/';
  trace_->path_ += part;
  if (dtrace::Recorder* rec = trace_->recorder()) recorder_scope_.emplace(rec->scope(part));
}

Trace::Scope::~Scope() {
  recorder_scope_.reset();
  trace_->path_.resize(previous_length_);
}

Trace::Scope Trace::scope(std::string_view part) { return Scope(this, part); }

void Trace::record(dtrace::Level level, std::string_view op, dtrace::RecordIo io,
                   const std::vector<Arg>& args) {
  record_groups(level, {RecordGroup{op, io, &args}});
}

void Trace::record_groups(dtrace::Level level, std::initializer_list<RecordGroup> groups) {
  dtrace::Recorder* rec = recorder();
  if (rec == nullptr || !rec->wants(level)) return;
  if (backend_ == nullptr || !backend_->device_resident()) {
    for (const RecordGroup& g : groups)
      for (const Arg& a : *g.args)
        rec->tensor(level, g.op, g.io, a.name,
                    dtrace::TensorView{a.data, a.bytes, a.dtype, a.shape, a.digest});
    return;
  }
  // One batched device fingerprint for all the groups' tensors: no tensor is
  // copied to the host to be hashed (a capture still reads the bytes, through
  // the managed pointer, after the fingerprint has waited for the stream).
  // Host-only arguments (RNG state, counters) are hashed by the recorder.
  std::vector<const void*> data;
  std::vector<std::size_t> bytes;
  for (const RecordGroup& g : groups)
    for (const Arg& a : *g.args) {
      const bool on_device = !a.host && !a.digest;
      data.push_back(on_device ? a.data : nullptr);
      bytes.push_back(on_device ? a.bytes : 0);
    }
  std::vector<std::uint64_t> digests(data.size());
  backend_->fingerprint(data, bytes, digests.data());
  std::size_t i = 0;
  for (const RecordGroup& g : groups)
    for (const Arg& a : *g.args) {
      dtrace::TensorView view{a.data, a.bytes, a.dtype, a.shape, a.digest};
      if (!a.host && !a.digest) view.digest = digests[i];
      ++i;
      rec->tensor(level, g.op, g.io, a.name, view);
    }
}

void Trace::record_timed(dtrace::Level level, std::string_view op, dtrace::RecordIo io,
                         const std::vector<Arg>& args) {
  RecordTimer timer(*this);
  record(level, op, io, args);
}

bool Trace::load_captured(std::string_view op, const std::vector<Arg>& ins) {
  // The host writes tensor memory below: the device must be done with it.
  if (backend_ != nullptr) backend_->sync();
  std::size_t found = 0;
  std::string missing;
  for (const Arg& a : ins) {
    auto bytes = recorder_->captured(path_, op, dtrace::RecordIo::in, a.name, isolation_.occurrence);
    if (!bytes) {
      missing = std::string(a.name);
      continue;
    }
    if (bytes->size() != a.bytes) {
      throw std::runtime_error("DTRACE_INPUTS: captured input " + path_ + "::" + std::string(op) +
                               " " + std::string(a.name) + " has " + std::to_string(bytes->size()) +
                               " bytes, this configuration needs " + std::to_string(a.bytes) +
                               " (was the capture made with other model flags?)");
    }
    std::memcpy(a.data, bytes->data(), a.bytes);
    ++found;
  }
  if (found == 0) return false;
  if (found != ins.size()) {
    throw std::runtime_error("DTRACE_INPUTS: the capture holds some inputs of " + path_ +
                             "::" + std::string(op) + " but not '" + missing + "'");
  }
  return true;
}

void Trace::run_isolated(std::string_view op, dtrace::Level level, const std::vector<Arg>& ins,
                         const std::vector<Arg>& outs, const std::function<void()>& run) {
  if (recorder_ == nullptr) throw std::runtime_error("isolation needs a recorder");
  // A collective needs every rank: a rank without captured inputs would leave
  // the others waiting forever.
  if (!load_captured(op, ins)) {
    if (path_.starts_with("comm/")) {
      throw std::runtime_error("DTRACE_INPUTS: the capture lacks this rank's inputs of " + path_ +
                               ", and a collective needs every rank");
    }
    return;
  }
  for (int k = 0; k < isolation_.repeat; ++k) {
    if (k > 0) load_captured(op, ins);
    recorder_->begin_repetition(k);
    if (on_repetition_) on_repetition_(k);
    record_timed(level, op, dtrace::RecordIo::in, ins);
    run();
    record_timed(level, op, dtrace::RecordIo::out, outs);
    ++isolated_runs_;
  }
}

void Trace::layer(std::string_view part, const std::vector<Arg>& ins, const std::vector<Arg>& outs,
                  const std::function<void()>& body) {
  Scope s = scope(part);
  switch (isolation_.kind) {
    case Isolation::Kind::none:
      record_timed(dtrace::Level::layer, part, dtrace::RecordIo::in, ins);
      body();
      record_timed(dtrace::Level::layer, part, dtrace::RecordIo::out, outs);
      return;
    case Isolation::Kind::layer:
      if (path_ == isolation_.scope && requested_call()) {
        run_isolated(part, dtrace::Level::layer, ins, outs, body);
      }
      return;
    case Isolation::Kind::op:
      if (path_ == isolation_.scope) body();
      return;
  }
}

bool Trace::pin_outputs(std::string_view op, const std::vector<Arg>& outs) {
  // Asked at every level (the recorder counts the calls), never while
  // fast-forwarding (no recorder then, and no pins either).
  dtrace::Recorder* rec = recorder();
  if (rec == nullptr || !rec->pins()) return false;
  bool any = false;
  for (const Arg& a : outs) {
    const auto bytes = rec->pinned(op, a.name);
    if (!bytes) continue;
    if (bytes->size() != a.bytes) {
      throw std::runtime_error("DTRACE_PIN: the pinned output " + path_ + "::" + std::string(op) +
                               " " + std::string(a.name) + " has " + std::to_string(bytes->size()) +
                               " bytes, this configuration's has " + std::to_string(a.bytes) +
                               " (was the pin capture made with other model flags?)");
    }
    // Tensor memory through the backend (a device's, after the op that
    // computed it and before anything queued after); host arguments as they are.
    if (backend_ != nullptr && !a.host) {
      backend_->upload(a.data, bytes->data(), a.bytes);
    } else {
      std::memcpy(a.data, bytes->data(), a.bytes);
    }
    any = true;
  }
  return any;
}

bool Trace::kernel(std::string_view op, const std::vector<Arg>& ins, const std::vector<Arg>& outs,
                   const std::function<void()>& run) {
  // The op as the rest of the step sees it: computed, then pinned. An isolated
  // repetition runs the same.
  bool pinned = false;
  const auto compute = [&] {
    run();
    pinned = pin_outputs(op, outs);
  };
  if (isolation_.kind == Isolation::Kind::op) {
    if (path_ == isolation_.scope && op == isolation_.op && requested_call()) {
      run_isolated(op, dtrace::Level::kernel, ins, outs, compute);
    }
    return pinned;
  }
  record_timed(dtrace::Level::kernel, op, dtrace::RecordIo::in, ins);
  compute();
  record_timed(dtrace::Level::kernel, op, dtrace::RecordIo::out, outs);
  return pinned;
}

}  // namespace minitrain
