/* dtrace recorder, C API: write dtrace-fp/1 fingerprint logs and answer the
 * replay protocol dtrace-replay/1 from any language (C, Python through ctypes,
 * Rust, Julia, a JAX job through its FFI). The full contract is the man page
 * dtrace-recorder(3); the log format and the DTRACE_* variables are
 * dtrace-fp(5).
 *
 * These functions are thin wrappers over the C++ recorder
 * (<dtrace/recorder.hpp>, dtrace::Recorder): one implementation of the
 * protocol, reached from every language. A C++ program may use either.
 *
 * Handles. A dtrace_recorder is opaque; one per rank. It is created by
 * dtrace_recorder_open() and released by dtrace_recorder_close(), which every
 * handle needs, even one whose open failed.
 *
 * Errors. Every function that can fail returns an int: DTRACE_OK (0) or one of
 * the DTRACE_ERROR_* codes of <dtrace/dtrace.h> (dtrace_error_string() gives a
 * sentence for each). The handle keeps the last failure's message, naming the
 * file, the DTRACE_* variable, or the record (scope, op and name) at fault:
 * dtrace_recorder_last_error(). No C++ exception crosses this interface and the
 * library never prints. Outputs are written only on success. A NULL handle or
 * NULL output pointer gives DTRACE_ERROR_INVALID_ARGUMENT.
 *
 * Strings. Every const char* argument is a NUL-terminated UTF-8 string that
 * the library copies before returning; the caller keeps ownership. Strings the
 * library hands out (const char** outputs) belong to the handle and stay valid
 * until dtrace_recorder_close(), except where a function says otherwise.
 *
 * Threads. One handle is used by one thread at a time (the caller serialises
 * calls on it); distinct handles may be used from different threads at once:
 * ranks run as threads of one process may each hold their own, and the files
 * they share (a replay's DTRACE_OUT, a capture index) receive whole lines only.
 * dtrace_error_string, dtrace_version and the fingerprint functions of
 * <dtrace/dtrace.h> may be called from any thread at any time.
 *
 * Link with `pkg-config --cflags --libs dtrace` (libdtrace.so).
 */
#ifndef DTRACE_RECORDER_H
#define DTRACE_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "dtrace/dtrace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Levels: how fine a record is (and a run is traced). Values fixed. */
#define DTRACE_LEVEL_STEP 0   /* metrics and state, once per step */
#define DTRACE_LEVEL_LAYER 1  /* each layer's inputs and outputs */
#define DTRACE_LEVEL_KERNEL 2 /* each kernel's inputs and outputs */

/* The `io` of a record. Values fixed. DTRACE_IO_TIMING records (a step's time)
 * are written but never compared by `dtrace diff`. */
#define DTRACE_IO_IN 0
#define DTRACE_IO_OUT 1
#define DTRACE_IO_STATE 2  /* parameters, optimizer moments, RNG state */
#define DTRACE_IO_METRIC 3 /* loss, gradient norm */
#define DTRACE_IO_TIMING 4

typedef struct dtrace_recorder dtrace_recorder;

/* How this program runs, for the log header and the run's files. Fill it with
 * dtrace_run_options_init() first, then set what applies: fields added in a
 * later version get their defaults from the init function.
 *
 * Versions. The struct grows only at its end, and the functions that read or
 * write it (dtrace_run_options_init, dtrace_recorder_open,
 * dtrace_recorder_open_with) carry ELF symbol versions, as glibc's do: a
 * program binds, when it is linked, to the version of the header it was
 * compiled with, and keeps it. DTRACE_1.0 is the struct up to replay_cwd (the
 * first interface, exported unversioned before DTRACE_1.1 existed); DTRACE_1.1
 * adds replica_groups and replica_per_rank. A
 * program built against an older header (and libdtrace) therefore keeps
 * working with a newer libdtrace: its calls reach the DTRACE_1.0 entry points,
 * which read and write only the fields it allocated and give the newer ones
 * their defaults. Compile and link against the same version of header and
 * library. dlsym() (ctypes, other FFIs) returns the newest version: such
 * callers must declare the struct of the newest header. */
typedef struct dtrace_run_options {
  /* A normal run writes <run_dir>/rank<rank>.jsonl (run_dir is created; an
   * existing rank file is DTRACE_ERROR_IO, never overwritten). DTRACE_RUN_DIR
   * replaces it; under a replay it is never created or written. NULL or "":
   * none, then a normal run needs DTRACE_RUN_DIR or DTRACE_OUT. */
  const char* run_dir;
  /* Header "run". NULL: "". */
  const char* run_name;
  /* This process's (or thread's) rank, 0 <= rank < world_size. */
  int32_t rank;
  int32_t world_size;
  /* DTRACE_LEVEL_*: the level of a normal run; DTRACE_LEVEL overrides it. */
  int32_t level;
  /* Header "env": a JSON object of string values, the variables that decide
   * determinism ({"NCCL_ALGO":"Ring"}). NULL: {}. */
  const char* env_json;
  /* Header "config": a JSON object, written verbatim (key order and number
   * spelling kept). NULL: {}. */
  const char* config_json;
  /* Header "replay": how dtrace runs this program again (argv[0] is the
   * program; no shell). replay_argc 0: no replay field (dtrace bisect then
   * needs --replay). The protocol field is added by the recorder. */
  const char* const* replay_argv;
  size_t replay_argc;
  /* Header "replay.cwd": the directory the command runs in. NULL: the current
   * directory at dtrace_recorder_open(). */
  const char* replay_cwd;
  /* ---- DTRACE_1.1 ---- */
  /* Header "replicas.groups" (dtrace-fp(5)): the data-parallel replica groups,
   * ranks that hold the same parameters, optimizer state and reduced
   * gradients, so `dtrace replicas` and `dtrace watch --replicas` need no
   * --groups. The grammar of `dtrace replicas --groups` (dtrace(1)): groups
   * separated by ':', ranks and ranges by ',' ("0-3:4-7", "0,2:1,3"); every
   * rank below world_size, none in two groups, each group of 2 ranks or more.
   * Another value is DTRACE_ERROR_INVALID_ARGUMENT at open, naming it. NULL or
   * "": no "replicas" field (a job whose replicas the program cannot know). */
  const char* replica_groups;
  /* Header "replicas.per_rank": the `step`-scope state ops that are each
   * rank's own (RNG streams, data positions), comma-separated op names
   * ("rng,data"); "" none. NULL: "rng,data". Written only with replica_groups. */
  const char* replica_per_rank;
} dtrace_run_options;

/* Defaults: no run_dir, run_name "", rank 0, world_size 1, DTRACE_LEVEL_STEP,
 * env and config {}, no replay command, replay_cwd NULL, no replica groups,
 * replica_per_rank NULL. */
void dtrace_run_options_init(dtrace_run_options* options);

/* Opens the recorder of one rank, reading the replay request from the process
 * environment (the DTRACE_* variables of dtrace-fp(5); an empty variable
 * counts as unset). Where the log goes:
 *   - DTRACE_OUT_DIR=dir (bisect sets it for every replay): dir/rank<r>.jsonl,
 *     and the rank's status dir/rank<r>.status, which the library keeps
 *     ("running PID STEP SEQ", then "exit CODE TIME" from an exit handler;
 *     dtrace-recorder(3), "Several processes");
 *   - DTRACE_OUT=file: that file, shared by every handle of this process
 *     (an existing empty file is replaced, one with content refused);
 *   - DTRACE_REPLAY_STEP or DTRACE_ISOLATE without DTRACE_OUT: nowhere;
 *   - otherwise <run_dir>/rank<rank>.jsonl (DTRACE_RUN_DIR replaces run_dir).
 * DTRACE_CAPTURE creates that capture directory; DTRACE_INPUTS reads its
 * capture index now. Under DTRACE_REPLAY_STEP=N, steps before N are
 * fast-forwarded (see dtrace_recorder_fast_forward).
 *
 * Like sqlite3_open(), *out receives a handle even when opening fails (unless
 * out is NULL or memory runs out, then *out is NULL): the handle holds the
 * message (dtrace_recorder_last_error) and refuses every other call with
 * DTRACE_ERROR_ORDER; close it with dtrace_recorder_close().
 * Errors: DTRACE_ERROR_INVALID_ARGUMENT (options or out NULL, rank outside
 * world_size, a level, JSON text or replica groups that are not valid, no
 * place for the log),
 * DTRACE_ERROR_ENVIRONMENT (a DTRACE_* variable with a bad value, or
 * variables that cannot go together: the message names the variable and its
 * value), DTRACE_ERROR_IO (a file or directory that cannot be created, a
 * rank file that exists, an unreadable DTRACE_INPUTS). */
int dtrace_recorder_open(const dtrace_run_options* options, dtrace_recorder** out);

/* The same, with the replay request taken from `count` strings "NAME=VALUE"
 * instead of the process environment (for tests, and for launchers that build
 * a child's environment). Strings without '=' are DTRACE_ERROR_INVALID_ARGUMENT;
 * names other than DTRACE_* are ignored. variables may be NULL when count is 0. */
int dtrace_recorder_open_with(const dtrace_run_options* options, const char* const* variables,
                              size_t count, dtrace_recorder** out);

/* Closes the recorder and frees the handle (NULL: nothing to do, DTRACE_OK).
 * A step left open is written without its end record (readers report it
 * incomplete, as after a crash) and DTRACE_ERROR_ORDER is returned, except an
 * open repetition, which is ended normally. The handle is freed whatever the
 * result; never use it again. The log file itself may stay open until the
 * process exits when other handles share it (a replay's DTRACE_OUT); every
 * finished step is already flushed. */
int dtrace_recorder_close(dtrace_recorder* recorder);

/* The message of the last failed call on this handle ("" when none failed),
 * e.g. "DTRACE_LEVEL=fine: not one of step, layer, kernel" or
 * "fwd/layer.1 gemm 'x': 12 bytes, but 4 elements of f32 take 16". Valid until
 * the next call on the handle. A NULL handle gives a static sentence. */
const char* dtrace_recorder_last_error(const dtrace_recorder* recorder);

/* ---- The replay request and the level in force, as plain values. -------- */

/* The level in force (DTRACE_LEVEL, else options.level): DTRACE_LEVEL_*. */
int dtrace_recorder_level(const dtrace_recorder* recorder, int32_t* level);

/* *wanted = 1 when a record of `level` made now, in the current scope, would be
 * written: level <= the level in force, a kernel-level record inside
 * DTRACE_SCOPE, and the step (if one is open) not fast-forwarded (under
 * DTRACE_FAST_FORWARD=step, a fast-forwarded step wants its step level). 0 otherwise:
 * the program may skip computing it. */
int dtrace_recorder_wants(const dtrace_recorder* recorder, int32_t level, int32_t* wanted);

/* *captures = 1 when a tensor recorded now in the current scope would also be
 * captured (DTRACE_CAPTURE is set and the scope starts with DTRACE_SCOPE): its
 * host bytes must then be passed, even with a precomputed digest. */
int dtrace_recorder_captures(const dtrace_recorder* recorder, int32_t* captures);

/* *replay = 1 under DTRACE_REPLAY_STEP or DTRACE_ISOLATE: the program must then
 * write no file of its own (no run directory, no checkpoint). */
int dtrace_recorder_is_replay(const dtrace_recorder* recorder, int32_t* replay);

/* DTRACE_REPLAY_STEP: the step to restore and run alone; -1 when unset. */
int dtrace_recorder_replay_step(const dtrace_recorder* recorder, int64_t* step);

/* DTRACE_SCOPE: kernel-level records (and captures) only in scopes starting
 * with this prefix; "" when unset (everywhere). */
int dtrace_recorder_scope_prefix(const dtrace_recorder* recorder, const char** prefix);

/* DTRACE_CAPTURE: the capture directory this recorder writes; NULL when unset. */
int dtrace_recorder_capture_dir(const dtrace_recorder* recorder, const char** dir);

/* DTRACE_ISOLATE, split: the scope of the layer or op to run alone (NULL when
 * not isolating), and the op (NULL when the whole layer is isolated). */
int dtrace_recorder_isolate_scope(const dtrace_recorder* recorder, const char** scope);
int dtrace_recorder_isolate_op(const dtrace_recorder* recorder, const char** op);

/* DTRACE_OCCURRENCE: which call of the isolated layer or op within its scope
 * the request names (0 the first call, 1 the second, ... as in a record's
 * identity), or -1 when the request names none (not isolating, or no
 * DTRACE_OCCURRENCE: then the first call is meant). See dtrace-fp(5). */
int dtrace_recorder_isolate_occurrence(const dtrace_recorder* recorder, int32_t* occurrence);

/* DTRACE_INPUTS: the capture directory isolation reads; NULL when unset. */
int dtrace_recorder_inputs_dir(const dtrace_recorder* recorder, const char** dir);

/* DTRACE_REPEAT: how many repetitions an isolation runs (1 when unset). */
int dtrace_recorder_repeat(const dtrace_recorder* recorder, int32_t* repeat);

/* dtrace's workflow variables (`dtrace verify`, `dtrace tax`; dtrace(1)), for
 * a training run: DTRACE_CHECKPOINT_DIR (NULL when unset), DTRACE_STOP_AT and
 * DTRACE_RESUME_AT (-1 when unset), DTRACE_DETERMINISTIC (1, 0, or -1 unset). */
int dtrace_recorder_checkpoint_dir(const dtrace_recorder* recorder, const char** dir);
int dtrace_recorder_stop_at(const dtrace_recorder* recorder, int64_t* step);
int dtrace_recorder_resume_at(const dtrace_recorder* recorder, int64_t* step);
int dtrace_recorder_deterministic(const dtrace_recorder* recorder, int32_t* deterministic);

/* ---- Scopes. ------------------------------------------------------------ */

/* Enters scope `part` ("fwd", then "layer.1" gives "fwd/layer.1"); an empty
 * part changes nothing but still needs its pop. Scopes may be pushed and
 * popped inside or outside a step. */
int dtrace_recorder_push_scope(dtrace_recorder* recorder, const char* part);

/* Leaves the innermost scope. DTRACE_ERROR_ORDER when none is open. */
int dtrace_recorder_pop_scope(dtrace_recorder* recorder);

/* The current scope path ("" at the top). Valid until the next push or pop. */
int dtrace_recorder_current_scope(const dtrace_recorder* recorder, const char** scope);

/* ---- Steps. ------------------------------------------------------------- */

/* Begins step `step` (>= 0). A rank's steps must increase; DTRACE_ERROR_ORDER
 * when a step is open or `step` is not after the last one. */
int dtrace_recorder_begin_step(dtrace_recorder* recorder, int64_t step);

/* Ends the open step: writes its end record and flushes its lines (a
 * fast-forwarded step writes nothing). DTRACE_ERROR_ORDER without an open
 * step; DTRACE_ERROR_IO when the log cannot be written. */
int dtrace_recorder_end_step(dtrace_recorder* recorder);

/* Drops the open step: none of its records is written (a step the program
 * began and ended without finishing on purpose; dtrace record's recorder when
 * the program exits between a forward and its optimizer step). A crash
 * mid-step is not that: dtrace_recorder_close() writes such a step without
 * its end record. DTRACE_ERROR_ORDER without an open step. Since DTRACE_1.3. */
int dtrace_recorder_discard_step(dtrace_recorder* recorder);

/* Fast-forward: steps begun before `until_step` run without recording (their
 * begin, records and end are accepted and dropped, and wants() says 0), so a
 * program restoring a checkpoint older than the step it must replay runs the
 * steps between with its recording code unchanged. Under
 * DTRACE_FAST_FORWARD=step (which dtrace bisect sets) their step-level records
 * are kept, and the rest dropped, so that bisect can check each against the
 * run. Steps from until_step on are recorded. Under DTRACE_REPLAY_STEP=N the recorder starts with
 * until_step = N; -1 records every step. Takes effect at the next begin_step. */
int dtrace_recorder_fast_forward(dtrace_recorder* recorder, int64_t until_step);

/* ---- Records. Each needs an open step (else DTRACE_ERROR_ORDER); one that
 * wants() would refuse is accepted and dropped. op and name are the record's
 * identity in the current scope; level is DTRACE_LEVEL_*, io DTRACE_IO_*. -- */

/* A tensor in host memory: `bytes` bytes at `data`, contiguous, in logical
 * (row-major) element order, fingerprinted (xxh3-64k/1) on the calling thread,
 * and written to the capture when dtrace_recorder_captures() says so.
 * dtype: f64 f32 bf16 f16 f8e4m3 f8e5m2 (any f8*) c64 c128 i8 i16 i32 i64 u8
 * u16 u32 u64 bool; shape: `ndim` extents >= 0 (shape may be NULL when ndim is
 * 0, a scalar tensor). DTRACE_ERROR_INVALID_ARGUMENT for a NULL op, name,
 * dtype or data (data may be NULL when bytes is 0), an unknown dtype, a
 * negative extent, or a byte count that disagrees with dtype and shape (the
 * wrong buffer). DTRACE_ERROR_IO when the capture cannot be written. */
int dtrace_recorder_tensor(dtrace_recorder* recorder, int32_t level, const char* op, int32_t io,
                           const char* name, const char* dtype, const int64_t* shape, size_t ndim,
                           const void* data, size_t bytes);

/* A tensor whose fingerprint was computed elsewhere (on the device with
 * dtrace_fingerprint_device_batch, or while its bytes were hot in cache): the
 * digest is written as is. `bytes` must still agree with dtype and shape.
 * `data` may be NULL, except when dtrace_recorder_captures() says 1: a capture
 * needs the host bytes (else DTRACE_ERROR_INVALID_ARGUMENT). The recorder does
 * not check the digest against data. */
int dtrace_recorder_tensor_digest(dtrace_recorder* recorder, int32_t level, const char* op,
                                  int32_t io, const char* name, const char* dtype,
                                  const int64_t* shape, size_t ndim, uint64_t digest,
                                  const void* data, size_t bytes);

/* Several tensors in one call (symbol version DTRACE_1.5): for a caller whose
 * cost per call is its own (an interpreter's argument conversion), so that the
 * records a step writes together (its state at the start, its gradients) cost
 * one crossing. Record i, for i in 0 .. count-1 in order, is what
 *   dtrace_recorder_tensor(recorder, level, ops[i], ios[i], names[i], dtypes[i],
 *                          shapes[i], ndims[i], data[i], bytes[i])
 * records, or, where digests is not NULL and digested[i] is not 0,
 *   dtrace_recorder_tensor_digest(... same ..., digests[i], data[i], bytes[i]);
 * all at one level, in the current scope, with those functions' rules. The
 * arrays hold count entries each; digests and digested are both NULL or both
 * given; data may be NULL, as if every data[i] were (records of 0 bytes, or
 * digested ones while nothing is captured). Errors as those functions': the
 * records before the failing one are recorded, as if called one by one, the
 * failing one and those after it are not, and the message names the record
 * (its index, and the recorder's scope, op and name). A NULL ops, ios, names,
 * dtypes, shapes, ndims or bytes while count > 0, or only one of digests and
 * digested, is DTRACE_ERROR_INVALID_ARGUMENT with nothing recorded. */
int dtrace_recorder_tensors(dtrace_recorder* recorder, int32_t level, size_t count,
                            const char* const* ops, const int32_t* ios, const char* const* names,
                            const char* const* dtypes, const int64_t* const* shapes,
                            const size_t* ndims, const void* const* data, const size_t* bytes,
                            const uint64_t* digests, const int32_t* digested);

/* A scalar by its exact bits (compared bit for bit: -0.0 differs from +0.0,
 * NaN payloads count). dtype f64, i64, u64 use all 64 bits; f32, i32, u32 the
 * low 32; bf16, f16, i16, u16 the low 16; i8, u8, bool the low 8. `value` is
 * written for people only. DTRACE_ERROR_INVALID_ARGUMENT for another dtype. */
int dtrace_recorder_scalar(dtrace_recorder* recorder, int32_t level, const char* op, int32_t io,
                           const char* name, const char* dtype, uint64_t bits, double value);

/* ---- Isolation: DTRACE_ISOLATE + DTRACE_INPUTS + DTRACE_REPEAT. ---------- */

/* Repetition k (0 .. repeat-1) of an isolated layer or op: its records are
 * written as step k. Ends the previous repetition if one is open;
 * DTRACE_ERROR_ORDER while an ordinary step is open. The last repetition ends
 * with dtrace_recorder_end_step() or dtrace_recorder_close(). */
int dtrace_recorder_begin_repetition(dtrace_recorder* recorder, int32_t k);

/* One record of the capture that DTRACE_INPUTS names: this rank's records of
 * the captured step (DTRACE_REPLAY_STEP if set, else the capture's first
 * complete step), in seq order. Strings and shape belong to the handle. */
typedef struct dtrace_captured_record {
  const char* scope;
  const char* op;
  int32_t io;         /* DTRACE_IO_*, or -1 for an io this version does not know */
  int32_t occurrence; /* earlier captured records with the same scope, op, io, name */
  const char* name;
  const char* dtype;
  const int64_t* shape;
  size_t ndim;
  uint64_t bytes;     /* the size of the captured file */
  uint64_t digest;    /* its fingerprint as recorded */
  int64_t step;
  int64_t seq;
  const char* file;   /* the path of the raw bytes: DTRACE_INPUTS/<file> */
} dtrace_captured_record;

/* How many records the capture holds for this rank (0 without DTRACE_INPUTS). */
int dtrace_recorder_captured_count(const dtrace_recorder* recorder, size_t* count);

/* Record `index` (0 .. count-1); DTRACE_ERROR_INVALID_ARGUMENT past the end. */
int dtrace_recorder_captured_record(const dtrace_recorder* recorder, size_t index,
                                    dtrace_captured_record* record);

/* The index of the captured record (scope, op, io, name, occurrence);
 * DTRACE_ERROR_NOT_FOUND when the capture lacks it (or without DTRACE_INPUTS). */
int dtrace_recorder_captured_find(const dtrace_recorder* recorder, const char* scope,
                                  const char* op, int32_t io, const char* name, int32_t occurrence,
                                  size_t* index);

/* Reads record `index`'s bytes into buffer, which holds `capacity` bytes:
 * exactly record.bytes are written. The bytes are checked against the
 * recorded digest: a file that changed, vanished or is shorter than its
 * record is DTRACE_ERROR_IO (the capture is damaged). capacity smaller than
 * record.bytes is DTRACE_ERROR_INVALID_ARGUMENT, nothing written. */
int dtrace_recorder_captured_read(dtrace_recorder* recorder, size_t index, void* buffer,
                                  size_t capacity);

/* ---- Replay sessions (dtrace-replay/1.2; symbol version DTRACE_1.2). -----
 * dtrace bisect starts a program that announces sessions once per side, with
 * DTRACE_SESSION=dir and DTRACE_REPLAY_STEP=N, and sends it its replays as
 * requests (dtrace-fp(5), "Replay sessions"; dtrace-recorder(3), "Replay sessions").
 * The program serves each as a launch with the request's variables would, then
 * says done:
 *
 *   dtrace_session* session = NULL;
 *   int32_t ranks[] = {rank}, more = 0;
 *   if (dtrace_session_open(ranks, 1, &session) != DTRACE_OK) ...fail, exit 2;
 *   if (session == NULL) ...a training run or a launched replay, as before;
 *   while (dtrace_session_next(session, -1, &more) == DTRACE_OK && more) {
 *     dtrace_session_first_step_request(session, &first): restore step N from
 *       the checkpoint when 1, else from the state kept in memory;
 *     dtrace_recorder_open_session(&options, session, &rec); ...; dtrace_recorder_close(rec);
 *     dtrace_session_done(session);
 *   }
 *   dtrace_session_close(session);
 *
 * A dtrace_session is used by one thread at a time. */
typedef struct dtrace_session dtrace_session;

/* The session this process was started for: *out NULL and DTRACE_OK without
 * DTRACE_SESSION (an empty value counts as unset). ranks: the `count` ranks
 * this process runs (count >= 1), whose status files it writes. On failure
 * *out holds a handle with the message (dtrace_session_last_error), which
 * refuses every other call; close it. Errors: DTRACE_ERROR_ENVIRONMENT
 * (DTRACE_SESSION not a directory, DTRACE_REPLAY_STEP missing or bad),
 * DTRACE_ERROR_INVALID_ARGUMENT (out NULL, no ranks, a negative rank). */
int dtrace_session_open(const int32_t* ranks, size_t count, dtrace_session** out);

/* Waits for the next request (timeout_ms < 0: for ever; dtrace kills the
 * session's processes when it gives up) and reads it: *more = 1 a request to
 * serve, 0 the end request (the program exits 0). Each rank's status in the
 * request's DTRACE_OUT_DIR says "running PID" from now on. Errors:
 * DTRACE_ERROR_IO (the request file is damaged, or none came within
 * timeout_ms; the message names the file), DTRACE_ERROR_ENVIRONMENT (its
 * variables are bad, or its DTRACE_REPLAY_STEP is not the session's),
 * DTRACE_ERROR_ORDER (the previous request is not done). */
int dtrace_session_next(dtrace_session* session, int64_t timeout_ms, int32_t* more);

/* The request is answered: writes "done PID TIME" as each rank's status in its
 * DTRACE_OUT_DIR. Call it after every recorder of the request is closed and
 * every file it writes is written. DTRACE_ERROR_ORDER without a request. */
int dtrace_session_done(dtrace_session* session);

/* Declines the request instead of serving it (symbol version DTRACE_1.3; an
 * extension of this implementation, dtrace-fp(5) "Replay sessions"): writes
 * "declined PID REASON" as each rank's status in its DTRACE_OUT_DIR, and
 * dtrace serves the request by a launch with the same variables (no
 * DTRACE_SESSION), naming `reason` in its report; the session goes on to the
 * next request (dtrace_session_next). For a request that needs a fresh
 * process. Call it before the request's recorder opens or after it is
 * closed: what the request wrote is discarded. Every rank of the run must
 * decline a request, or none. Errors: DTRACE_ERROR_ORDER without a request,
 * DTRACE_ERROR_INVALID_ARGUMENT when reason is NULL, empty or more than one
 * line. */
int dtrace_session_decline(dtrace_session* session, const char* reason);

/* DTRACE_REPLAY_STEP of the session, the step every request replays. */
int dtrace_session_step(const dtrace_session* session, int64_t* step);

/* *first = 1 while serving the session's first step replay (DTRACE_REPLAY_STEP
 * without DTRACE_ISOLATE): restore step N as a launch does (nearest
 * checkpoint, fast-forward) and keep the state at its start; 0 otherwise
 * (later step replays start from the kept state, nothing fast-forwarded). */
int dtrace_session_first_step_request(const dtrace_session* session, int32_t* first);

/* The value of variable `name` in the request being served (*value NULL when
 * the request does not set it, whatever the process environment says). Valid
 * until the next dtrace_session_next. */
int dtrace_session_variable(const dtrace_session* session, const char* name, const char** value);

/* Opens a recorder as dtrace_recorder_open does, for a program that serves
 * sessions: its header says "protocol":"dtrace-replay/1.2". With a session
 * serving a request, the replay request is that request's variables (not the
 * process environment); with session NULL, the process environment (the
 * program's training run, or a launch). Errors as dtrace_recorder_open, and
 * DTRACE_ERROR_ORDER for a session between requests. */
int dtrace_recorder_open_session(const dtrace_run_options* options, const dtrace_session* session,
                                 dtrace_recorder** out);

/* ---- Pinned ops (dtrace-replay/1.3; symbol version DTRACE_1.4). ---------
 * After naming a nondeterministic op, dtrace bisect replays the step again
 * with that op's outputs replaced by one fixed result of it (DTRACE_PIN, a
 * capture directory), on both sides, to find what else differs
 * (dtrace-fp(5), "Pinned ops"). A program honours pins by asking, for each
 * output of every call of every op whose outputs it records at kernel level,
 * whether that output is pinned, and using the bytes it gets:
 *
 *   dtrace_recorder_open_pinning(&options, session, &rec);   (announces 1.3)
 *   ...run the op into out...;
 *   int32_t pinned = 0;
 *   dtrace_recorder_pinned(rec, "gemm_fc1", "y", out, out_bytes, &pinned);
 *   ...record out (at kernel level), then let the rest of the step read it.
 */

/* As dtrace_recorder_open_session, for a program that also honours pins: its
 * header says "protocol":"dtrace-replay/1.3" (which includes sessions). */
int dtrace_recorder_open_pinning(const dtrace_run_options* options, const dtrace_session* session,
                                 dtrace_recorder** out);

/* *any = 1 while the open step (the replayed step or a repetition, never a
 * fast-forwarded step) may hold a pinned call; a program may skip asking
 * dtrace_recorder_pinned then. */
int dtrace_recorder_pins(const dtrace_recorder* recorder, int32_t* any);

/* Whether this call's output `name` of `op`, in the current scope, is pinned:
 * *pinned = 1 and the pinned bytes written to buffer (exactly capacity bytes,
 * the output's size), or *pinned = 0 and buffer untouched. Ask once per
 * output of every call, whatever the level in force: calls are counted per
 * (scope, op, name) within the step or repetition, the k-th asking matched
 * with the pin's record of occurrence k. A pin of another size than capacity
 * is DTRACE_ERROR_INVALID_ARGUMENT, nothing written; a damaged pin capture
 * DTRACE_ERROR_IO. */
int dtrace_recorder_pinned(dtrace_recorder* recorder, const char* op, const char* name, void* buffer,
                           size_t capacity, int32_t* pinned);

/* The message of the last failed call on this session ("" when none). */
const char* dtrace_session_last_error(const dtrace_session* session);

/* Frees the handle (NULL: nothing to do). */
int dtrace_session_close(dtrace_session* session);

#ifdef __cplusplus
}
#endif

#endif /* DTRACE_RECORDER_H */
