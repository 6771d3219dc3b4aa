// The recorder's C ABI (include/dtrace/recorder.h): thin wrappers over
// dtrace::Recorder (include/dtrace/recorder.hpp), so the protocol has one
// implementation. Each function checks what C can get wrong that C++ cannot
// (null pointers, integer codes out of range, a handle whose open failed),
// calls the C++ recorder, and turns its RecorderError into an error code and
// the handle's message; nothing thrown crosses into C, ctypes or another runtime.
#include "dtrace/recorder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtrace/recorder.hpp"
#include "replicas/replicas.hpp"
#include "util/words.hpp"

struct dtrace_recorder {
  std::unique_ptr<dtrace::Recorder> recorder;  // null when open failed
  // Scopes pushed through the C API, innermost last: popping one pops it in the
  // C++ recorder, and an empty stack makes an unmatched pop an error.
  std::vector<dtrace::Recorder::Scope> scopes;
  // Strings handed out: the request's values (until close), the current scope
  // (until the next push or pop), and the last error (until the next call).
  mutable std::string scope_text;
  bool repetition = false;  // the open step was begun by begin_repetition
  std::optional<std::string> capture, isolate_scope, isolate_op, inputs, checkpoint_dir;
  mutable std::string error;
};

// A replay session (dtrace::ReplaySession): null `session` when opening failed.
struct dtrace_session {
  std::unique_ptr<dtrace::ReplaySession> session;
  mutable std::string error;
};

namespace {

using dtrace::Level;
using dtrace::RecordIo;
using dtrace::RecorderError;

// A failure the caller can see: the code, with its message kept on the handle.
struct Failure {
  int code;
  std::string message;
};

int error_code(RecorderError::Kind kind) {
  switch (kind) {
    case RecorderError::Kind::io: return DTRACE_ERROR_IO;
    case RecorderError::Kind::environment: return DTRACE_ERROR_ENVIRONMENT;
    case RecorderError::Kind::argument: return DTRACE_ERROR_INVALID_ARGUMENT;
    case RecorderError::Kind::order: return DTRACE_ERROR_ORDER;
  }
  return DTRACE_ERROR_INTERNAL;
}

// Runs `body`; every exception becomes a code, and its message goes to `error`
// (the handle's). The one place where C++ failures turn into C results.
template <typename Body>
int guarded(std::string& error, Body&& body) noexcept {
  try {
    error.clear();
    body();
    return DTRACE_OK;
  } catch (const Failure& failure) {
    error = failure.message;
    return failure.code;
  } catch (const RecorderError& failure) {
    error = failure.what();
    return error_code(failure.kind());
  } catch (const std::bad_alloc&) {
    error = "out of memory";
    return DTRACE_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& failure) {
    error = std::string("internal error: ") + failure.what();
    return DTRACE_ERROR_INTERNAL;
  } catch (...) {
    error = "internal error";
    return DTRACE_ERROR_INTERNAL;
  }
}

// Runs `body` on an open handle.
template <typename Body>
int call(const dtrace_recorder* handle, Body&& body) noexcept {
  if (handle == nullptr) return DTRACE_ERROR_INVALID_ARGUMENT;
  return guarded(handle->error, [&] {
    if (!handle->recorder) {
      throw Failure{DTRACE_ERROR_ORDER, "this recorder did not open; close it"};
    }
    body(*handle->recorder);
  });
}

// Runs `body` on an open session.
template <typename Body>
int session_call(const dtrace_session* handle, Body&& body) noexcept {
  if (handle == nullptr) return DTRACE_ERROR_INVALID_ARGUMENT;
  return guarded(handle->error, [&] {
    if (!handle->session) throw Failure{DTRACE_ERROR_ORDER, "this session did not open; close it"};
    body(*handle->session);
  });
}

void require(bool ok, const char* what) {
  if (!ok) throw Failure{DTRACE_ERROR_INVALID_ARGUMENT, what};
}

template <typename T>
void require_out(T* out) {
  require(out != nullptr, "the output pointer is NULL");
}

Level to_level(std::int32_t level) {
  if (level < DTRACE_LEVEL_STEP || level > DTRACE_LEVEL_KERNEL) {
    throw Failure{DTRACE_ERROR_INVALID_ARGUMENT,
                  "level " + std::to_string(level) +
                      " is not DTRACE_LEVEL_STEP (0), _LAYER (1) or _KERNEL (2)"};
  }
  return static_cast<Level>(level);
}

RecordIo to_io(std::int32_t io) {
  switch (io) {
    case DTRACE_IO_IN: return RecordIo::in;
    case DTRACE_IO_OUT: return RecordIo::out;
    case DTRACE_IO_STATE: return RecordIo::state;
    case DTRACE_IO_METRIC: return RecordIo::metric;
    case DTRACE_IO_TIMING: return RecordIo::timing;
    default: break;
  }
  throw Failure{DTRACE_ERROR_INVALID_ARGUMENT,
                "io " + std::to_string(io) + " is not one of DTRACE_IO_IN .. DTRACE_IO_TIMING (0..4)"};
}

std::int32_t io_code(const std::string& io) {
  if (io == "in") return DTRACE_IO_IN;
  if (io == "out") return DTRACE_IO_OUT;
  if (io == "state") return DTRACE_IO_STATE;
  if (io == "metric") return DTRACE_IO_METRIC;
  if (io == "timing") return DTRACE_IO_TIMING;
  return -1;
}

std::string io_text(RecordIo io) {
  switch (io) {
    case RecordIo::in: return "in";
    case RecordIo::out: return "out";
    case RecordIo::state: return "state";
    case RecordIo::metric: return "metric";
    case RecordIo::timing: return "timing";
  }
  return "";
}

// The record's op, name and dtype, which C may pass as NULL.
void require_identity(const char* op, const char* name, const char* dtype) {
  require(op != nullptr, "op is NULL");
  require(name != nullptr, "name is NULL");
  require(dtype != nullptr, "dtype is NULL");
}

std::vector<std::int64_t> shape_of(const std::int64_t* shape, std::size_t ndim) {
  require(shape != nullptr || ndim == 0, "shape is NULL but ndim is not 0");
  return std::vector<std::int64_t>(shape, shape + ndim);
}

// replica_per_rank: "rng,data" as op names; "" none.
std::vector<std::string> per_rank_ops(std::string_view list) {
  std::vector<std::string> ops;
  for (std::size_t start = 0; !list.empty() && start <= list.size();) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    if (end == start) {
      throw Failure{DTRACE_ERROR_INVALID_ARGUMENT,
                    "options.replica_per_rank \"" + std::string(list) + "\": an empty op name"};
    }
    ops.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
  return ops;
}

// Header "replicas": the groups read with `dtrace replicas --groups`' parser
// (one grammar for the CLI, minitrain's header and the C API).
void replicas(const dtrace_run_options& c, dtrace::RunOptions& options) {
  if (c.replica_groups == nullptr || *c.replica_groups == '\0') return;
  auto groups = dtrace::replicas::parse_groups(c.replica_groups, c.world_size);
  if (!groups) {
    throw Failure{DTRACE_ERROR_INVALID_ARGUMENT, "options.replica_groups: " + groups.error().message};
  }
  for (const auto& group : *groups) options.replica_groups.emplace_back(group.begin(), group.end());
  if (c.replica_per_rank != nullptr) options.per_rank_state = per_rank_ops(c.replica_per_rank);
}

dtrace::RunOptions run_options(const dtrace_run_options& c) {
  dtrace::RunOptions options;
  if (c.run_dir != nullptr) options.run_dir = c.run_dir;
  if (c.run_name != nullptr) options.run_name = c.run_name;
  options.rank = c.rank;
  options.world_size = c.world_size;
  options.level = to_level(c.level);
  if (c.env_json != nullptr) {
    const auto env = nlohmann::json::parse(c.env_json, nullptr, /*allow_exceptions=*/false);
    require(!env.is_discarded() && env.is_object(),
            "options.env_json is not a JSON object of strings");
    for (const auto& [name, value] : env.items()) {
      if (!value.is_string()) {
        throw Failure{DTRACE_ERROR_INVALID_ARGUMENT,
                      "options.env_json: the value of " + name + " is not a string"};
      }
      options.env.emplace_back(name, value.get<std::string>());
    }
  }
  if (c.config_json != nullptr) options.config_json = c.config_json;
  require(c.replay_argv != nullptr || c.replay_argc == 0,
          "options.replay_argv is NULL but replay_argc is not 0");
  for (std::size_t i = 0; i < c.replay_argc; ++i) {
    if (c.replay_argv[i] == nullptr) {
      throw Failure{DTRACE_ERROR_INVALID_ARGUMENT,
                    "options.replay_argv[" + std::to_string(i) + "] is NULL"};
    }
    options.replay_argv.emplace_back(c.replay_argv[i]);
  }
  if (c.replay_cwd != nullptr) options.replay_cwd = c.replay_cwd;
  replicas(c, options);
  return options;
}

// Opens into a handle that exists whatever happens (as sqlite3_open does), so
// the caller can read why opening failed.
// `serves_sessions`: the header announces dtrace-replay/1.2
// (dtrace_recorder_open_session); with `honours_pins`, 1.3
// (dtrace_recorder_open_pinning).
int open_handle(const dtrace_run_options* options,
                const std::optional<std::map<std::string, std::string>>& variables,
                const char* variables_error, dtrace_recorder** out,
                bool serves_sessions = false,
                int variables_error_code = DTRACE_ERROR_INVALID_ARGUMENT,
                bool honours_pins = false) noexcept {
  if (out == nullptr) return DTRACE_ERROR_INVALID_ARGUMENT;
  *out = new (std::nothrow) dtrace_recorder();
  if (*out == nullptr) return DTRACE_ERROR_OUT_OF_MEMORY;
  dtrace_recorder& handle = **out;
  return guarded(handle.error, [&] {
    if (variables_error != nullptr) throw Failure{variables_error_code, variables_error};
    require(options != nullptr, "options is NULL");
    dtrace::RunOptions run = run_options(*options);
    run.serves_sessions = serves_sessions;
    run.honours_pins = honours_pins;
    const dtrace::ReplayRequest request = variables
                                              ? dtrace::ReplayRequest::from_variables(*variables)
                                              : dtrace::ReplayRequest::from_environment();
    auto recorder = dtrace::Recorder::open(run, request);
    // The request's values as C strings, for as long as the handle lives.
    handle.capture = request.capture;
    handle.inputs = request.inputs;
    handle.checkpoint_dir = request.checkpoint_dir;
    if (request.isolate) {
      handle.isolate_scope = std::string(request.isolate_scope());
      if (!request.isolate_op().empty()) handle.isolate_op = std::string(request.isolate_op());
    }
    handle.recorder = std::move(recorder);
  });
}

const char* c_string(const std::optional<std::string>& text) {
  return text ? text->c_str() : nullptr;
}

// The size of dtrace_run_options as DTRACE_1.0 callers allocate it.
constexpr std::size_t kOptionsSize_1_0 = offsetof(dtrace_run_options, replica_groups);

// A DTRACE_1.0 caller's options as the whole struct, the later fields at their
// defaults; nullopt for NULL (open reports it).
std::optional<dtrace_run_options> options_1_0(const dtrace_run_options* options) {
  if (options == nullptr) return std::nullopt;
  dtrace_run_options full;
  dtrace_run_options_init(&full);
  std::memcpy(&full, options, kOptionsSize_1_0);
  return full;
}

}  // namespace

extern "C" {

void dtrace_run_options_init(dtrace_run_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof *options);
  options->world_size = 1;
  options->level = DTRACE_LEVEL_STEP;
}

// ---- DTRACE_1.0: programs built against the first struct (src/capi/dtrace.map).
// Their dtrace_run_options ends at replay_cwd: these read and write only those
// bytes, and the 1.1 entry points get the rest from dtrace_run_options_init.

__attribute__((symver("dtrace_run_options_init@DTRACE_1.0"))) void run_options_init_1_0(
    dtrace_run_options* options) {
  if (options == nullptr) return;
  dtrace_run_options full;
  dtrace_run_options_init(&full);
  std::memcpy(options, &full, kOptionsSize_1_0);
}

__attribute__((symver("dtrace_recorder_open@DTRACE_1.0"))) int recorder_open_1_0(
    const dtrace_run_options* options, dtrace_recorder** out) {
  const auto full = options_1_0(options);
  return dtrace_recorder_open(full ? &*full : nullptr, out);
}

__attribute__((symver("dtrace_recorder_open_with@DTRACE_1.0"))) int recorder_open_with_1_0(
    const dtrace_run_options* options, const char* const* variables, size_t count,
    dtrace_recorder** out) {
  const auto full = options_1_0(options);
  return dtrace_recorder_open_with(full ? &*full : nullptr, variables, count, out);
}

int dtrace_recorder_open(const dtrace_run_options* options, dtrace_recorder** out) {
  return open_handle(options, std::nullopt, nullptr, out);
}

int dtrace_recorder_open_with(const dtrace_run_options* options, const char* const* variables,
                              size_t count, dtrace_recorder** out) {
  std::map<std::string, std::string> parsed;
  const char* problem = nullptr;
  std::string message;
  try {
    if (variables == nullptr && count > 0) problem = "variables is NULL but count is not 0";
    for (std::size_t i = 0; problem == nullptr && i < count; ++i) {
      const char* entry = variables[i];
      const char* equals = entry != nullptr ? std::strchr(entry, '=') : nullptr;
      if (equals == nullptr) {
        message = "variables[" + std::to_string(i) + "] is " +
                  (entry == nullptr ? std::string("NULL") : "'" + std::string(entry) + "'") +
                  ", not NAME=VALUE";
        problem = message.c_str();
        break;
      }
      parsed[std::string(entry, equals)] = equals + 1;
    }
  } catch (...) {
    problem = "out of memory";
  }
  return open_handle(options, parsed, problem, out);
}

int dtrace_recorder_close(dtrace_recorder* handle) {
  if (handle == nullptr) return DTRACE_OK;
  int code = DTRACE_OK;
  try {
    // An open repetition is ended normally by the C++ recorder's destructor.
    const bool left_open =
        handle->recorder && handle->recorder->in_step() && !handle->repetition;
    handle->scopes.clear();
    handle->recorder.reset();
    if (left_open) code = DTRACE_ERROR_ORDER;
  } catch (...) {
    code = DTRACE_ERROR_INTERNAL;
  }
  delete handle;
  return code;
}

const char* dtrace_recorder_last_error(const dtrace_recorder* handle) {
  if (handle == nullptr) return "no recorder (the handle is NULL)";
  return handle->error.c_str();
}

int dtrace_recorder_level(const dtrace_recorder* handle, int32_t* level) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(level);
    *level = static_cast<int32_t>(r.level());
  });
}

int dtrace_recorder_wants(const dtrace_recorder* handle, int32_t level, int32_t* wanted) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(wanted);
    *wanted = r.wants(to_level(level)) ? 1 : 0;
  });
}

int dtrace_recorder_captures(const dtrace_recorder* handle, int32_t* captures) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(captures);
    *captures = r.captures() ? 1 : 0;
  });
}

int dtrace_recorder_is_replay(const dtrace_recorder* handle, int32_t* replay) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(replay);
    *replay = r.request().is_replay() ? 1 : 0;
  });
}

int dtrace_recorder_replay_step(const dtrace_recorder* handle, int64_t* step) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(step);
    *step = r.request().step.value_or(-1);
  });
}

int dtrace_recorder_scope_prefix(const dtrace_recorder* handle, const char** prefix) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(prefix);
    *prefix = r.request().scope.c_str();
  });
}

int dtrace_recorder_capture_dir(const dtrace_recorder* handle, const char** dir) {
  return call(handle, [&](const dtrace::Recorder&) {
    require_out(dir);
    *dir = c_string(handle->capture);
  });
}

int dtrace_recorder_isolate_scope(const dtrace_recorder* handle, const char** scope) {
  return call(handle, [&](const dtrace::Recorder&) {
    require_out(scope);
    *scope = c_string(handle->isolate_scope);
  });
}

int dtrace_recorder_isolate_op(const dtrace_recorder* handle, const char** op) {
  return call(handle, [&](const dtrace::Recorder&) {
    require_out(op);
    *op = c_string(handle->isolate_op);
  });
}

int dtrace_recorder_isolate_occurrence(const dtrace_recorder* handle, int32_t* occurrence) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(occurrence);
    // DTRACE_OCCURRENCE (dtrace-fp(5)); unset means the first call.
    *occurrence = r.request().isolate_occurrence.value_or(-1);
  });
}

int dtrace_recorder_inputs_dir(const dtrace_recorder* handle, const char** dir) {
  return call(handle, [&](const dtrace::Recorder&) {
    require_out(dir);
    *dir = c_string(handle->inputs);
  });
}

int dtrace_recorder_repeat(const dtrace_recorder* handle, int32_t* repeat) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(repeat);
    *repeat = r.request().repeat;
  });
}

int dtrace_recorder_checkpoint_dir(const dtrace_recorder* handle, const char** dir) {
  return call(handle, [&](const dtrace::Recorder&) {
    require_out(dir);
    *dir = c_string(handle->checkpoint_dir);
  });
}

int dtrace_recorder_stop_at(const dtrace_recorder* handle, int64_t* step) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(step);
    *step = r.request().stop_at.value_or(-1);
  });
}

int dtrace_recorder_resume_at(const dtrace_recorder* handle, int64_t* step) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(step);
    *step = r.request().resume_at.value_or(-1);
  });
}

int dtrace_recorder_deterministic(const dtrace_recorder* handle, int32_t* deterministic) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(deterministic);
    const auto value = r.request().deterministic;
    *deterministic = value ? (*value ? 1 : 0) : -1;
  });
}

int dtrace_recorder_push_scope(dtrace_recorder* handle, const char* part) {
  return call(handle, [&](dtrace::Recorder& r) {
    require(part != nullptr, "scope part is NULL");
    handle->scopes.reserve(handle->scopes.size() + 1);  // no throw after the push below
    handle->scopes.push_back(r.scope(part));
  });
}

int dtrace_recorder_pop_scope(dtrace_recorder* handle) {
  return call(handle, [&](dtrace::Recorder&) {
    if (handle->scopes.empty()) {
      throw Failure{DTRACE_ERROR_ORDER, "pop_scope without a scope pushed"};
    }
    handle->scopes.pop_back();
  });
}

int dtrace_recorder_current_scope(const dtrace_recorder* handle, const char** scope) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(scope);
    handle->scope_text = r.current_scope();
    *scope = handle->scope_text.c_str();
  });
}

int dtrace_recorder_begin_step(dtrace_recorder* handle, int64_t step) {
  return call(handle, [&](dtrace::Recorder& r) {
    r.begin_step(step);
    handle->repetition = false;
  });
}

int dtrace_recorder_end_step(dtrace_recorder* handle) {
  return call(handle, [&](dtrace::Recorder& r) { r.end_step(); });
}

int dtrace_recorder_discard_step(dtrace_recorder* handle) {
  return call(handle, [&](dtrace::Recorder& r) { r.discard_step(); });
}

int dtrace_recorder_fast_forward(dtrace_recorder* handle, int64_t until_step) {
  return call(handle, [&](dtrace::Recorder& r) { r.fast_forward(until_step); });
}

int dtrace_recorder_tensor(dtrace_recorder* handle, int32_t level, const char* op, int32_t io,
                           const char* name, const char* dtype, const int64_t* shape, size_t ndim,
                           const void* data, size_t bytes) {
  return call(handle, [&](dtrace::Recorder& r) {
    require_identity(op, name, dtype);
    require(data != nullptr || bytes == 0, "data is NULL but bytes is not 0");
    r.tensor(to_level(level), op, to_io(io), name,
             dtrace::TensorView{data, bytes, dtype, shape_of(shape, ndim)});
  });
}

int dtrace_recorder_tensor_digest(dtrace_recorder* handle, int32_t level, const char* op,
                                  int32_t io, const char* name, const char* dtype,
                                  const int64_t* shape, size_t ndim, uint64_t digest,
                                  const void* data, size_t bytes) {
  return call(handle, [&](dtrace::Recorder& r) {
    require_identity(op, name, dtype);
    r.tensor(to_level(level), op, to_io(io), name,
             dtrace::TensorView{data, bytes, dtype, shape_of(shape, ndim), digest});
  });
}

int dtrace_recorder_tensors(dtrace_recorder* handle, int32_t level, size_t count,
                            const char* const* ops, const int32_t* ios, const char* const* names,
                            const char* const* dtypes, const int64_t* const* shapes,
                            const size_t* ndims, const void* const* data, const size_t* bytes,
                            const uint64_t* digests, const int32_t* digested) {
  return call(handle, [&](dtrace::Recorder& r) {
    const Level at = to_level(level);
    // The arrays themselves first, so that a missing one records nothing.
    if (count > 0) {
      require(ops != nullptr && ios != nullptr && names != nullptr && dtypes != nullptr &&
                  shapes != nullptr && ndims != nullptr && bytes != nullptr,
              "dtrace_recorder_tensors: ops, ios, names, dtypes, shapes, ndims or bytes is NULL");
    }
    require((digests == nullptr) == (digested == nullptr),
            "dtrace_recorder_tensors: digests and digested are not both NULL or both given");
    for (std::size_t i = 0; i < count; ++i) {
      // Each record as dtrace_recorder_tensor(_digest) takes it; a failure names
      // the record's index (the recorder's own message names its scope, op and name).
      const std::string where = "dtrace_recorder_tensors: record " + std::to_string(i) + " of " +
                                std::to_string(count) + ": ";
      try {
        require_identity(ops[i], names[i], dtypes[i]);
        const void* bytes_at = data != nullptr ? data[i] : nullptr;
        const bool given = digested != nullptr && digested[i] != 0;
        if (!given) require(bytes_at != nullptr || bytes[i] == 0, "data is NULL but bytes is not 0");
        dtrace::TensorView view{bytes_at, bytes[i], dtypes[i], shape_of(shapes[i], ndims[i])};
        if (given) view.digest = digests[i];
        r.tensor(at, ops[i], to_io(ios[i]), names[i], view);
      } catch (const Failure& failure) {
        throw Failure{failure.code, where + failure.message};
      } catch (const RecorderError& failure) {
        throw Failure{error_code(failure.kind()), where + failure.what()};
      }
    }
  });
}

int dtrace_recorder_scalar(dtrace_recorder* handle, int32_t level, const char* op, int32_t io,
                           const char* name, const char* dtype, uint64_t bits, double value) {
  return call(handle, [&](dtrace::Recorder& r) {
    require_identity(op, name, dtype);
    r.scalar(to_level(level), op, to_io(io), name, dtype, bits, value);
  });
}

int dtrace_recorder_begin_repetition(dtrace_recorder* handle, int32_t k) {
  return call(handle, [&](dtrace::Recorder& r) {
    require(k >= 0, "a repetition number is >= 0");
    r.begin_repetition(k);
    handle->repetition = true;
  });
}

int dtrace_recorder_captured_count(const dtrace_recorder* handle, size_t* count) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(count);
    *count = r.captured_records().size();
  });
}

int dtrace_recorder_captured_record(const dtrace_recorder* handle, size_t index,
                                    dtrace_captured_record* record) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(record);
    const auto& records = r.captured_records();
    if (index >= records.size()) {
      throw Failure{DTRACE_ERROR_INVALID_ARGUMENT,
                    "captured record " + std::to_string(index) + " does not exist (" +
                        std::to_string(records.size()) + " captured)"};
    }
    const dtrace::CapturedRecord& c = records[index];
    record->scope = c.scope.c_str();
    record->op = c.op.c_str();
    record->io = io_code(c.io);
    record->occurrence = c.occurrence;
    record->name = c.name.c_str();
    record->dtype = c.dtype.c_str();
    record->shape = c.shape.data();
    record->ndim = c.shape.size();
    record->bytes = c.bytes;
    record->digest = c.digest;
    record->step = c.step;
    record->seq = c.seq;
    record->file = c.file.c_str();
  });
}

int dtrace_recorder_captured_find(const dtrace_recorder* handle, const char* scope, const char* op,
                                  int32_t io, const char* name, int32_t occurrence,
                                  size_t* index) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require(scope != nullptr && op != nullptr && name != nullptr, "scope, op or name is NULL");
    require_out(index);
    const std::string io_name = io_text(to_io(io));
    const auto& records = r.captured_records();
    for (std::size_t i = 0; i < records.size(); ++i) {
      const dtrace::CapturedRecord& c = records[i];
      if (c.scope == scope && c.op == op && c.io == io_name && c.name == name &&
          c.occurrence == occurrence) {
        *index = i;
        return;
      }
    }
    throw Failure{DTRACE_ERROR_NOT_FOUND,
                  dtrace::with_call("the capture holds no record " + std::string(scope) + " " + op + " " +
                                        io_name + " '" + name + "'",
                                    occurrence, 0)};
  });
}

int dtrace_recorder_captured_read(dtrace_recorder* handle, size_t index, void* buffer,
                                  size_t capacity) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require(buffer != nullptr || capacity == 0, "buffer is NULL but capacity is not 0");
    const auto& records = r.captured_records();
    if (index < records.size() && capacity < records[index].bytes) {
      throw Failure{DTRACE_ERROR_INVALID_ARGUMENT,
                    records[index].file + ": " + std::to_string(records[index].bytes) +
                        " bytes do not fit in a buffer of " + std::to_string(capacity)};
    }
    const std::vector<std::byte> bytes = r.read_captured(index);
    if (bytes.size() > capacity) {
      throw Failure{DTRACE_ERROR_IO, records[index].file + ": now " +
                                         std::to_string(bytes.size()) +
                                         " bytes, larger than recorded (the capture is damaged)"};
    }
    if (!bytes.empty()) std::memcpy(buffer, bytes.data(), bytes.size());
  });
}

// ---- Replay sessions (DTRACE_1.2). --------------------------------------

int dtrace_session_open(const int32_t* ranks, size_t count, dtrace_session** out) {
  if (out == nullptr) return DTRACE_ERROR_INVALID_ARGUMENT;
  *out = nullptr;
  auto handle = std::unique_ptr<dtrace_session>(new (std::nothrow) dtrace_session());
  if (!handle) return DTRACE_ERROR_OUT_OF_MEMORY;
  const int code = guarded(handle->error, [&] {
    require(ranks != nullptr || count == 0, "ranks is NULL but count is not 0");
    handle->session =
        dtrace::ReplaySession::from_environment(std::vector<int>(ranks, ranks + count));
  });
  // Without DTRACE_SESSION there is no session and nothing to report.
  if (code == DTRACE_OK && !handle->session) return DTRACE_OK;
  *out = handle.release();
  return code;
}

int dtrace_session_next(dtrace_session* handle, int64_t timeout_ms, int32_t* more) {
  return session_call(handle, [&](dtrace::ReplaySession& s) {
    require_out(more);
    std::optional<std::chrono::milliseconds> timeout;
    if (timeout_ms >= 0) timeout = std::chrono::milliseconds(timeout_ms);
    *more = s.next(timeout).has_value() ? 1 : 0;
  });
}

int dtrace_session_done(dtrace_session* handle) {
  return session_call(handle, [&](dtrace::ReplaySession& s) { s.done(); });
}

// DTRACE_1.3.
int dtrace_session_decline(dtrace_session* handle, const char* reason) {
  return session_call(handle, [&](dtrace::ReplaySession& s) {
    require(reason != nullptr, "reason is NULL");
    s.decline(reason);
  });
}

int dtrace_session_step(const dtrace_session* handle, int64_t* step) {
  return session_call(handle, [&](const dtrace::ReplaySession& s) {
    require_out(step);
    *step = s.step();
  });
}

int dtrace_session_first_step_request(const dtrace_session* handle, int32_t* first) {
  return session_call(handle, [&](const dtrace::ReplaySession& s) {
    require_out(first);
    *first = s.first_step_request() ? 1 : 0;
  });
}

int dtrace_session_variable(const dtrace_session* handle, const char* name, const char** value) {
  return session_call(handle, [&](const dtrace::ReplaySession& s) {
    require(name != nullptr, "name is NULL");
    require_out(value);
    const auto& variables = s.variables();
    const auto it = variables.find(name);
    *value = it == variables.end() ? nullptr : it->second.c_str();
  });
}

namespace {

// dtrace_recorder_open_session and dtrace_recorder_open_pinning: the request
// being served, or the process environment without a session.
int open_for_session(const dtrace_run_options* options, const dtrace_session* session, dtrace_recorder** out,
                     bool honours_pins) {
  if (session == nullptr) {
    return open_handle(options, std::nullopt, nullptr, out, true, DTRACE_ERROR_INVALID_ARGUMENT, honours_pins);
  }
  std::optional<std::map<std::string, std::string>> variables;
  const char* problem = nullptr;
  int code = DTRACE_ERROR_ORDER;
  if (!session->session) {
    problem = "the session did not open";
  } else if (session->session->variables().empty()) {
    problem = "the session serves no request now (call dtrace_session_next first)";
  } else {
    try {
      variables = session->session->variables();
    } catch (...) {
      problem = "out of memory";
      code = DTRACE_ERROR_OUT_OF_MEMORY;
    }
  }
  return open_handle(options, variables ? variables : std::map<std::string, std::string>{}, problem,
                     out, true, code, honours_pins);
}

}  // namespace

int dtrace_recorder_open_session(const dtrace_run_options* options, const dtrace_session* session,
                                 dtrace_recorder** out) {
  return open_for_session(options, session, out, false);
}

// ---- Pinned ops (DTRACE_1.4, dtrace-replay/1.3). -------------------------

int dtrace_recorder_open_pinning(const dtrace_run_options* options, const dtrace_session* session,
                                 dtrace_recorder** out) {
  return open_for_session(options, session, out, true);
}

int dtrace_recorder_pins(const dtrace_recorder* handle, int32_t* any) {
  return call(handle, [&](const dtrace::Recorder& r) {
    require_out(any);
    *any = r.pins() ? 1 : 0;
  });
}

int dtrace_recorder_pinned(dtrace_recorder* handle, const char* op, const char* name, void* buffer,
                           size_t capacity, int32_t* pinned) {
  return call(handle, [&](dtrace::Recorder& r) {
    require(op != nullptr, "op is NULL");
    require(name != nullptr, "name is NULL");
    require(buffer != nullptr || capacity == 0, "buffer is NULL but capacity is not 0");
    require_out(pinned);
    *pinned = 0;
    const auto bytes = r.pinned(op, name);
    if (!bytes) return;
    // The output the program hands over is the pinned call's: another size is
    // another tensor (the wrong buffer, or a program that changed shape).
    if (bytes->size() != capacity) {
      throw Failure{DTRACE_ERROR_INVALID_ARGUMENT,
                    "DTRACE_PIN: " + r.current_scope() + " " + op + " '" + name + "' is pinned to " +
                        std::to_string(bytes->size()) + " bytes, but its output here has " +
                        std::to_string(capacity)};
    }
    if (!bytes->empty()) std::memcpy(buffer, bytes->data(), bytes->size());
    *pinned = 1;
  });
}

const char* dtrace_session_last_error(const dtrace_session* handle) {
  if (handle == nullptr) return "no session (the handle is NULL)";
  return handle->error.c_str();
}

int dtrace_session_close(dtrace_session* handle) {
  delete handle;
  return DTRACE_OK;
}

}  // extern "C"
