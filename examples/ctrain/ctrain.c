/* ctrain: a small training program in C that records dtrace-fp/1 logs and
 * answers every dtrace-replay/1 variable through libdtrace's C API
 * (<dtrace/recorder.h>, man dtrace-recorder(3)). It is the example of that page
 * and of the e2e test tests/e2e/capi_workload.sh, which builds it against an
 * installed libdtrace with pkg-config only:
 *
 *   cc -std=c11 -o ctrain ctrain.c $(pkg-config --cflags --libs dtrace) -lm
 *
 * The model: a two-layer perceptron (tanh) with a mean-squared-error loss and
 * plain SGD, on batches generated from the step number. Every kernel runs
 * through one table (PLAN below) that names its scope, op, inputs and outputs,
 * so recording, capturing and isolation are generic.
 *
 * --planted reorders the reduction of fwd/layer.1's gemm: each output sums its
 * terms in an order drawn from a chaos generator keyed by (--chaos-seed, step,
 * repetition), as atomics would; two runs with different seeds diverge there,
 * and `dtrace bisect --trust` names that op and scope. --planted LIST plants
 * the causes a comma-separated list names: gemm (that one) and wgrad, which
 * reorders the batch reduction of bwd/layer.0's grad_w (the weight gradient,
 * as a split-K wgrad GEMM would), so bisect has two causes to find, the second
 * once the first is pinned. DTRACE_DETERMINISTIC=1 turns them off, =0 on (the
 * gemm when the command line plants nothing).
 *
 * It serves replay sessions (dtrace-replay/1.2, dtrace-fp(5) "Replay
 * sessions"; dtrace-recorder(3), "Replay sessions"): under DTRACE_SESSION one process
 * answers every request of a bisect side, each as a launch with the request's
 * variables would, the parameters at the start of the replayed step kept in
 * memory after the first step replay restored them.
 *
 * It honours pins (dtrace-replay/1.3, dtrace-fp(5) "Pinned ops"): every kernel
 * asks, for each of its outputs, whether DTRACE_PIN pins it, and takes the
 * pinned bytes in its place (run_kernel), so that bisect can set a named
 * nondeterministic op aside and look for the next.
 *
 * Usage: ctrain --out RUN_DIR [--steps N] [--level step|layer|kernel]
 *               [--checkpoint-dir DIR] [--checkpoint-every K]
 *               [--chaos-seed S] [--planted [gemm,wgrad]] [--run-name NAME]
 * Exit 0 done, 2 trouble (a message on stderr). */
#define _POSIX_C_SOURCE 200809L /* strdup, readlink, PATH_MAX */
#include <dtrace/recorder.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { BATCH = 8, DIN = 16, HID = 32, DOUT = 4 };
#define LEARNING_RATE 0.05f

/* ---- State. ---------------------------------------------------------------- */

typedef struct {
  float w0[DIN * HID], b0[HID], w1[HID * DOUT], b1[DOUT];
} Params;

static Params params, grads;
static float x[BATCH * DIN], target[BATCH * DOUT];
static float a0[BATCH * HID], h0[BATCH * HID], a1[BATCH * DOUT], y[BATCH * DOUT];
static float loss[1], dy[BATCH * DOUT], dh0[BATCH * HID], da0[BATCH * HID];

/* The planted causes (--planted): a set of these bits. */
enum { PLANT_GEMM = 1, PLANT_WGRAD = 2 };
static int planted;          /* which reductions are reordered */
static uint64_t chaos_seed;  /* pins the reordering: a run and its replays agree */
static uint64_t chaos;       /* the generator, re-keyed per step and repetition */

static dtrace_recorder* rec;
static dtrace_session* session; /* NULL unless serving a replay session */

static void die(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fputs("ctrain: error: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  dtrace_recorder_close(rec);
  exit(2);
}

/* Every C API call goes through here: a failure ends the program with the
 * recorder's own message, which names the variable, file or record. */
static void check_session(int code, const char* what) {
  if (code != DTRACE_OK) die("%s: %s", what, dtrace_session_last_error(session));
}

static void check(int code, const char* what) {
  if (code != DTRACE_OK) {
    die("%s: %s (%s)", what, dtrace_recorder_last_error(rec), dtrace_error_string(code));
  }
}

static uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static void rekey_chaos(int64_t step, int repetition) {
  chaos = chaos_seed;
  chaos = splitmix64(&chaos) ^ ((uint64_t)step * UINT64_C(0xd1b54a32d192ed03));
  chaos = splitmix64(&chaos) ^ (uint64_t)(repetition + 1);
}

/* ---- Kernels. -------------------------------------------------------------- */

/* The order in which a reduction adds its n terms: index order, or (planted)
 * shuffled from the chaos generator. Float addition is not associative. */
static void draw_order(int* order, int n, int reorder) {
  for (int k = 0; k < n; ++k) order[k] = k;
  if (!reorder) return;
  for (int k = n - 1; k > 0; --k) {
    const int j = (int)(splitmix64(&chaos) % (uint64_t)(k + 1));
    const int t = order[k];
    order[k] = order[j];
    order[j] = t;
  }
}

/* out[r][c] = sum_k in[r][k] * w[k][c], k in index order, or (planted) in an
 * order shuffled per output. */
static void gemm(const float* in, const float* w, float* out, int rows, int inner, int cols,
                 int reorder) {
  int order[HID > DIN ? HID : DIN];
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      draw_order(order, inner, reorder);
      float sum = 0.0f;
      for (int k = 0; k < inner; ++k) sum += in[r * inner + order[k]] * w[order[k] * cols + c];
      out[r * cols + c] = sum;
    }
  }
}

static void k_gemm0(void) { gemm(x, params.w0, a0, BATCH, DIN, HID, 0); }
static void k_bias_tanh(void) {
  for (int i = 0; i < BATCH * HID; ++i) h0[i] = tanhf(a0[i] + params.b0[i % HID]);
}
static void k_gemm1(void) { gemm(h0, params.w1, a1, BATCH, HID, DOUT, planted & PLANT_GEMM); }
static void k_bias(void) {
  for (int i = 0; i < BATCH * DOUT; ++i) y[i] = a1[i] + params.b1[i % DOUT];
}
static void k_mse(void) {
  float sum = 0.0f;
  for (int i = 0; i < BATCH * DOUT; ++i) {
    const float d = y[i] - target[i];
    sum += d * d;
    dy[i] = 2.0f * d / (float)(BATCH * DOUT);
  }
  loss[0] = sum / (float)(BATCH * DOUT);
}
/* g[k][c] = sum_r in[r][k] * d[r][c], r in index order or (planted) shuffled per output. */
static void grad_w(const float* in, const float* d, float* g, int inner, int cols, int reorder) {
  int order[BATCH];
  for (int k = 0; k < inner; ++k)
    for (int c = 0; c < cols; ++c) {
      draw_order(order, BATCH, reorder);
      float sum = 0.0f;
      for (int r = 0; r < BATCH; ++r) sum += in[order[r] * inner + k] * d[order[r] * cols + c];
      g[k * cols + c] = sum;
    }
}
static void sum_rows(const float* d, float* g, int cols) {
  for (int c = 0; c < cols; ++c) {
    float sum = 0.0f;
    for (int r = 0; r < BATCH; ++r) sum += d[r * cols + c];
    g[c] = sum;
  }
}
static void k_grad_w1(void) { grad_w(h0, dy, grads.w1, HID, DOUT, 0); }
static void k_grad_b1(void) { sum_rows(dy, grads.b1, DOUT); }
static void k_grad_h0(void) {
  for (int r = 0; r < BATCH; ++r)
    for (int k = 0; k < HID; ++k) {
      float sum = 0.0f;
      for (int c = 0; c < DOUT; ++c) sum += dy[r * DOUT + c] * params.w1[k * DOUT + c];
      dh0[r * HID + k] = sum;
    }
}
static void k_tanh_grad(void) {
  for (int i = 0; i < BATCH * HID; ++i) da0[i] = dh0[i] * (1.0f - h0[i] * h0[i]);
}
static void k_grad_w0(void) { grad_w(x, da0, grads.w0, DIN, HID, planted & PLANT_WGRAD); }
static void k_grad_b0(void) { sum_rows(da0, grads.b0, HID); }
static void sgd(float* p, const float* g, int n) {
  for (int i = 0; i < n; ++i) p[i] -= LEARNING_RATE * g[i];
}
static void k_sgd(void) {
  sgd(params.w0, grads.w0, DIN * HID);
  sgd(params.b0, grads.b0, HID);
  sgd(params.w1, grads.w1, HID * DOUT);
  sgd(params.b1, grads.b1, DOUT);
}

/* ---- The plan: every layer and kernel, with what it reads and writes. ----- */

typedef struct {
  const char* name;
  float* data;
  int64_t rows, cols; /* cols 0: a vector of `rows` */
} Tensor;

#define T2(n, d, r, c) {n, d, r, c}
#define T1(n, d, r) {n, d, r, 0}
#define MAX_ARGS 8

typedef struct {
  const char* op;
  void (*run)(void);
  Tensor ins[MAX_ARGS], outs[MAX_ARGS];
} Kernel;

/* A layer is a scope (group/part) whose own records use op = part; its inputs
 * include its parameters, so it can be re-run from a capture alone. */
typedef struct {
  const char* group; /* NULL: a top-level scope */
  const char* part;
  Tensor ins[MAX_ARGS], outs[MAX_ARGS];
  Kernel kernels[4];
} Layer;

#define X T2("x", x, BATCH, DIN)
#define W0 T2("w0", params.w0, DIN, HID)
#define B0 T1("b0", params.b0, HID)
#define W1 T2("w1", params.w1, HID, DOUT)
#define B1 T1("b1", params.b1, DOUT)

static const Layer PLAN[] = {
    {"fwd", "layer.0", {X, W0, B0}, {T2("h", h0, BATCH, HID)},
     {{"gemm", k_gemm0, {X, W0}, {T2("y", a0, BATCH, HID)}},
      {"bias_tanh", k_bias_tanh, {T2("x", a0, BATCH, HID), B0}, {T2("y", h0, BATCH, HID)}}}},
    {"fwd", "layer.1", {T2("h", h0, BATCH, HID), W1, B1}, {T2("y", y, BATCH, DOUT)},
     {{"gemm", k_gemm1, {T2("x", h0, BATCH, HID), W1}, {T2("y", a1, BATCH, DOUT)}},
      {"bias", k_bias, {T2("x", a1, BATCH, DOUT), B1}, {T2("y", y, BATCH, DOUT)}}}},
    {NULL, "loss", {T2("y", y, BATCH, DOUT), T2("target", target, BATCH, DOUT)},
     {T1("loss", loss, 1), T2("dy", dy, BATCH, DOUT)},
     {{"mse", k_mse, {T2("y", y, BATCH, DOUT), T2("target", target, BATCH, DOUT)},
       {T1("loss", loss, 1), T2("dy", dy, BATCH, DOUT)}}}},
    {"bwd", "layer.1", {T2("dy", dy, BATCH, DOUT), T2("h", h0, BATCH, HID), W1},
     {T2("dh", dh0, BATCH, HID), T2("gw1", grads.w1, HID, DOUT), T1("gb1", grads.b1, DOUT)},
     {{"grad_w", k_grad_w1, {T2("h", h0, BATCH, HID), T2("dy", dy, BATCH, DOUT)},
       {T2("gw1", grads.w1, HID, DOUT)}},
      {"grad_b", k_grad_b1, {T2("dy", dy, BATCH, DOUT)}, {T1("gb1", grads.b1, DOUT)}},
      {"grad_x", k_grad_h0, {T2("dy", dy, BATCH, DOUT), W1}, {T2("dh", dh0, BATCH, HID)}}}},
    {"bwd", "layer.0", {T2("dh", dh0, BATCH, HID), T2("h", h0, BATCH, HID), X},
     {T2("gw0", grads.w0, DIN, HID), T1("gb0", grads.b0, HID)},
     {{"tanh_grad", k_tanh_grad, {T2("dh", dh0, BATCH, HID), T2("h", h0, BATCH, HID)},
       {T2("da", da0, BATCH, HID)}},
      {"grad_w", k_grad_w0, {X, T2("da", da0, BATCH, HID)}, {T2("gw0", grads.w0, DIN, HID)}},
      {"grad_b", k_grad_b0, {T2("da", da0, BATCH, HID)}, {T1("gb0", grads.b0, HID)}}}},
    {NULL, "opt",
     {W0, B0, W1, B1, T2("gw0", grads.w0, DIN, HID), T1("gb0", grads.b0, HID),
      T2("gw1", grads.w1, HID, DOUT), T1("gb1", grads.b1, DOUT)},
     {W0, B0, W1, B1},
     {{"sgd", k_sgd,
       {W0, B0, W1, B1, T2("gw0", grads.w0, DIN, HID), T1("gb0", grads.b0, HID),
        T2("gw1", grads.w1, HID, DOUT), T1("gb1", grads.b1, DOUT)},
       {W0, B0, W1, B1}}}},
};
enum { LAYERS = sizeof PLAN / sizeof PLAN[0] };

/* ---- Recording. ------------------------------------------------------------ */

static size_t tensor_bytes(const Tensor* t) {
  return (size_t)t->rows * (size_t)(t->cols ? t->cols : 1) * sizeof(float);
}

static void record(int32_t level, const char* op, int32_t io, const Tensor* list) {
  for (const Tensor* t = list; t < list + MAX_ARGS && t->name != NULL; ++t) {
    const int64_t shape[2] = {t->rows, t->cols};
    check(dtrace_recorder_tensor(rec, level, op, io, t->name, "f32", shape, t->cols ? 2 : 1,
                                 t->data, tensor_bytes(t)),
          t->name);
  }
}

static void push_layer(const Layer* layer) {
  if (layer->group != NULL) check(dtrace_recorder_push_scope(rec, layer->group), "push_scope");
  check(dtrace_recorder_push_scope(rec, layer->part), "push_scope");
}

static void pop_layer(const Layer* layer) {
  check(dtrace_recorder_pop_scope(rec), "pop_scope");
  if (layer->group != NULL) check(dtrace_recorder_pop_scope(rec), "pop_scope");
}

/* Pinned ops (DTRACE_PIN): each output of the kernel just run becomes the
 * pinned bytes when the recorder holds some for this call, before its out
 * record and before anything downstream reads it. Asked once per output of
 * every call, whatever the level (the recorder counts the calls to match them
 * with the pins' occurrences); dtrace_recorder_pins is 0 outside a replayed
 * step or repetition, where nothing can be pinned. A pin of another size than
 * the output stops the program with the library's message naming it. */
static void take_pins(const Kernel* k) {
  int32_t any = 0;
  check(dtrace_recorder_pins(rec, &any), "dtrace_recorder_pins");
  if (!any) return;
  for (const Tensor* t = k->outs; t < k->outs + MAX_ARGS && t->name != NULL; ++t) {
    int32_t pinned = 0;
    check(dtrace_recorder_pinned(rec, k->op, t->name, t->data, tensor_bytes(t), &pinned), t->name);
  }
}

static void run_kernel(const Kernel* k) {
  record(DTRACE_LEVEL_KERNEL, k->op, DTRACE_IO_IN, k->ins);
  k->run();
  take_pins(k);
  record(DTRACE_LEVEL_KERNEL, k->op, DTRACE_IO_OUT, k->outs);
}

static void run_layer(const Layer* layer) {
  push_layer(layer);
  record(DTRACE_LEVEL_LAYER, layer->part, DTRACE_IO_IN, layer->ins);
  for (const Kernel* k = layer->kernels; k < layer->kernels + 4 && k->op != NULL; ++k) run_kernel(k);
  record(DTRACE_LEVEL_LAYER, layer->part, DTRACE_IO_OUT, layer->outs);
  pop_layer(layer);
}

static const Tensor STATE[] = {W0, B0, W1, B1};

/* One training step, recorded: the state it starts from, every layer, the loss. */
static void train_step(int64_t step) {
  rekey_chaos(step, -1);
  check(dtrace_recorder_begin_step(rec, step), "begin_step");
  check(dtrace_recorder_push_scope(rec, "step"), "push_scope");
  for (int i = 0; i < 4; ++i) {
    Tensor one[MAX_ARGS] = {STATE[i]};
    record(DTRACE_LEVEL_STEP, "param", DTRACE_IO_STATE, one);
  }
  check(dtrace_recorder_pop_scope(rec), "pop_scope");
  for (int l = 0; l < LAYERS; ++l) run_layer(&PLAN[l]);
  check(dtrace_recorder_push_scope(rec, "step"), "push_scope");
  uint32_t bits;
  memcpy(&bits, &loss[0], sizeof bits);
  check(dtrace_recorder_scalar(rec, DTRACE_LEVEL_STEP, "loss", DTRACE_IO_METRIC, "loss", "f32",
                               bits, loss[0]),
        "loss");
  check(dtrace_recorder_pop_scope(rec), "pop_scope");
  check(dtrace_recorder_end_step(rec), "end_step");
}

/* ---- Data, initial state, checkpoints. ------------------------------------ */

static float uniform(uint64_t* state) {
  return (float)(splitmix64(state) >> 40) * 0x1.0p-23f - 1.0f; /* [-1, 1) */
}

static void make_batch(int64_t step) {
  uint64_t state = UINT64_C(0x5eed) ^ ((uint64_t)step << 20);
  for (int i = 0; i < BATCH * DIN; ++i) x[i] = uniform(&state);
  for (int r = 0; r < BATCH; ++r)
    for (int c = 0; c < DOUT; ++c) target[r * DOUT + c] = sinf(x[r * DIN + c] + x[r * DIN + c + 4]);
}

static void initial_params(void) {
  uint64_t state = 42;
  for (int i = 0; i < DIN * HID; ++i) params.w0[i] = uniform(&state) * 0.5f;
  for (int i = 0; i < HID * DOUT; ++i) params.w1[i] = uniform(&state) * 0.3f;
  memset(params.b0, 0, sizeof params.b0);
  memset(params.b1, 0, sizeof params.b1);
}

static const char CHECKPOINT_MAGIC[8] = {'c', 't', 'r', 'a', 'i', 'n', 'c', '1'};

static void checkpoint_path(char* out, size_t size, const char* dir, int64_t step) {
  if (snprintf(out, size, "%s/ckpt-%" PRId64 ".bin", dir, step) >= (int)size) {
    die("checkpoint directory name too long: %s", dir);
  }
}

/* mkdir -p */
static void make_directories(const char* dir) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) die("%s: name too long", dir);
  for (char* p = path + 1; *p != '\0'; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST) die("%s: cannot create: %s", path, strerror(errno));
    *p = '/';
  }
  if (mkdir(path, 0755) != 0 && errno != EEXIST) die("%s: cannot create: %s", path, strerror(errno));
}

/* The state at the start of `step`, written whole to a temporary file and
 * renamed, so a crash never leaves half a checkpoint. */
static void write_checkpoint(const char* dir, int64_t step) {
  make_directories(dir);
  char path[PATH_MAX], temporary[PATH_MAX + 8];
  checkpoint_path(path, sizeof path, dir, step);
  snprintf(temporary, sizeof temporary, "%s.tmp", path);
  FILE* file = fopen(temporary, "wb");
  if (file == NULL) die("%s: cannot create: %s", temporary, strerror(errno));
  const int ok = fwrite(CHECKPOINT_MAGIC, sizeof CHECKPOINT_MAGIC, 1, file) == 1 &&
                 fwrite(&step, sizeof step, 1, file) == 1 &&
                 fwrite(&params, sizeof params, 1, file) == 1;
  if (fclose(file) != 0 || !ok || rename(temporary, path) != 0) {
    die("%s: cannot write: %s", path, strerror(errno));
  }
}

static void read_checkpoint(const char* dir, int64_t step) {
  char path[PATH_MAX];
  checkpoint_path(path, sizeof path, dir, step);
  FILE* file = fopen(path, "rb");
  if (file == NULL) die("%s: cannot open: %s", path, strerror(errno));
  char magic[sizeof CHECKPOINT_MAGIC];
  int64_t stored = -1;
  const int ok = fread(magic, sizeof magic, 1, file) == 1 && fread(&stored, sizeof stored, 1, file) == 1 &&
                 fread(&params, sizeof params, 1, file) == 1;
  fclose(file);
  if (!ok || memcmp(magic, CHECKPOINT_MAGIC, sizeof magic) != 0 || stored != step) {
    die("%s: not a ctrain checkpoint of step %" PRId64, path, step);
  }
}

/* The newest checkpoint at or before `step`, or 0 (the initial state). */
static int64_t newest_checkpoint(const char* dir, int64_t step) {
  char path[PATH_MAX];
  for (int64_t s = step; s > 0; --s) {
    checkpoint_path(path, sizeof path, dir, s);
    if (access(path, R_OK) == 0) return s;
  }
  return 0;
}

/* ---- Isolation: DTRACE_ISOLATE=scope or scope::op, from DTRACE_INPUTS. ---- */

static void load_inputs(const char* scope, const char* op, const Tensor* ins) {
  for (const Tensor* t = ins; t < ins + MAX_ARGS && t->name != NULL; ++t) {
    size_t index = 0;
    check(dtrace_recorder_captured_find(rec, scope, op, DTRACE_IO_IN, t->name, 0, &index),
          "DTRACE_INPUTS");
    dtrace_captured_record captured;
    check(dtrace_recorder_captured_record(rec, index, &captured), "DTRACE_INPUTS");
    if (captured.bytes != tensor_bytes(t)) {
      die("DTRACE_INPUTS: %s holds %" PRIu64 " bytes for %s %s '%s', this model needs %zu",
          captured.file, captured.bytes, scope, op, t->name, tensor_bytes(t));
    }
    check(dtrace_recorder_captured_read(rec, index, t->data, tensor_bytes(t)), "DTRACE_INPUTS");
  }
}

static void isolate(void) {
  const char *scope = NULL, *op = NULL;
  int32_t repeat = 1;
  int64_t step = 0;
  check(dtrace_recorder_isolate_scope(rec, &scope), "isolate_scope");
  check(dtrace_recorder_isolate_op(rec, &op), "isolate_op");
  check(dtrace_recorder_repeat(rec, &repeat), "repeat");
  check(dtrace_recorder_replay_step(rec, &step), "replay_step");
  for (int l = 0; l < LAYERS; ++l) {
    const Layer* layer = &PLAN[l];
    char path[64];
    snprintf(path, sizeof path, "%s%s%s", layer->group ? layer->group : "",
             layer->group ? "/" : "", layer->part);
    if (strcmp(path, scope) != 0) continue;
    const Kernel* kernel = NULL;
    for (const Kernel* k = layer->kernels; op != NULL && k < layer->kernels + 4 && k->op; ++k) {
      if (strcmp(k->op, op) == 0) kernel = k;
    }
    if (op != NULL && kernel == NULL) die("DTRACE_ISOLATE=%s::%s: no such op in %s", scope, op, scope);
    for (int32_t k = 0; k < repeat; ++k) {
      /* Every repetition from the same captured inputs, with its own chaos. */
      if (kernel != NULL) load_inputs(scope, kernel->op, kernel->ins);
      else load_inputs(scope, layer->part, layer->ins);
      rekey_chaos(step, k);
      check(dtrace_recorder_begin_repetition(rec, k), "begin_repetition");
      if (kernel != NULL) {
        push_layer(layer);
        run_kernel(kernel);
        pop_layer(layer);
      } else {
        run_layer(layer);
      }
    }
    check(dtrace_recorder_end_step(rec), "end_step");
    return;
  }
  die("DTRACE_ISOLATE=%s: no such layer in this model", scope);
}

/* ---- Options and main. ----------------------------------------------------- */

typedef struct {
  const char* out;
  const char* run_name;
  const char* checkpoint_dir;
  int64_t steps, checkpoint_every;
  int32_t level;
  int have_seed;
} Options;

/* --planted's list: gemm, wgrad, comma-separated. */
static int parse_planted(const char* list) {
  int plants = 0;
  const char* p = list;
  for (;;) {
    const size_t n = strcspn(p, ",");
    if (n == 4 && strncmp(p, "gemm", 4) == 0) plants |= PLANT_GEMM;
    else if (n == 5 && strncmp(p, "wgrad", 5) == 0) plants |= PLANT_WGRAD;
    else die("--planted %s: '%.*s' is not gemm or wgrad", list, (int)n, p);
    if (p[n] == '\0') return plants;
    p += n + 1;
  }
}

/* The --planted list of these bits, as the header's config and replay command spell it. */
static const char* planted_names(int plants) {
  switch (plants) {
    case PLANT_GEMM: return "gemm";
    case PLANT_WGRAD: return "wgrad";
    case PLANT_GEMM | PLANT_WGRAD: return "gemm,wgrad";
    default: return "none";
  }
}

static int64_t number(const char* flag, const char* text) {
  char* end = NULL;
  errno = 0;
  const long long value = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0) die("%s %s: not a number >= 0", flag, text);
  return value;
}

static Options parse(int argc, char** argv) {
  Options o = {NULL, NULL, NULL, 4, 2, DTRACE_LEVEL_STEP, 0};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--planted") == 0) { /* alone: the gemm; followed by a list: those */
      if (v != NULL && v[0] != '-') { planted = parse_planted(v); ++i; }
      else planted = PLANT_GEMM;
      continue;
    }
    if (v == NULL) die("%s needs a value (see the comment at the top of ctrain.c)", a);
    ++i;
    if (strcmp(a, "--out") == 0) o.out = v;
    else if (strcmp(a, "--run-name") == 0) o.run_name = v;
    else if (strcmp(a, "--checkpoint-dir") == 0) o.checkpoint_dir = v;
    else if (strcmp(a, "--steps") == 0) o.steps = number(a, v);
    else if (strcmp(a, "--checkpoint-every") == 0) o.checkpoint_every = number(a, v);
    else if (strcmp(a, "--chaos-seed") == 0) { chaos_seed = (uint64_t)number(a, v); o.have_seed = 1; }
    else if (strcmp(a, "--level") == 0) {
      if (strcmp(v, "step") == 0) o.level = DTRACE_LEVEL_STEP;
      else if (strcmp(v, "layer") == 0) o.level = DTRACE_LEVEL_LAYER;
      else if (strcmp(v, "kernel") == 0) o.level = DTRACE_LEVEL_KERNEL;
      else die("--level %s: not step, layer or kernel", v);
    } else die("unknown option %s", a);
  }
  if (o.out == NULL) die("--out RUN_DIR is required");
  return o;
}

/* An absolute path, so the replay command works from any directory. */
static char* absolute(const char* path) {
  if (path[0] == '/') return strdup(path);
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == NULL) die("getcwd: %s", strerror(errno));
  char* out = malloc(strlen(cwd) + strlen(path) + 2);
  if (out == NULL) die("out of memory");
  sprintf(out, "%s/%s", cwd, path);
  return out;
}

/* A training run, a launched replay, or one request of a replay session. The
 * recorder announces sessions (dtrace_recorder_open_session: the header says
 * dtrace-replay/1.2) and, in a session, reads the request's variables. */
static Params kept; /* a session's parameters at the start of its step */

static void serve(const dtrace_run_options* options, const Options* o, const char* run_checkpoint_dir) {
  /* dtrace_recorder_open_pinning: as dtrace_recorder_open_session, and the
   * header says dtrace-replay/1.3, which promises take_pins' answers. */
  check(dtrace_recorder_open_pinning(options, session, &rec), "dtrace_recorder_open_pinning");
  char* checkpoint_dir = strdup(run_checkpoint_dir);
  if (checkpoint_dir == NULL) die("out of memory");

  int32_t deterministic = -1;
  check(dtrace_recorder_deterministic(rec, &deterministic), "deterministic");
  if (deterministic == 1) planted = 0;
  if (deterministic == 0 && planted == 0) planted = PLANT_GEMM;

  initial_params();
  const char* isolate_scope = NULL;
  check(dtrace_recorder_isolate_scope(rec, &isolate_scope), "isolate_scope");
  if (isolate_scope != NULL) {
    isolate();
  } else {
    int32_t replaying = 0, first_request = 0;
    int64_t replay_step = -1, stop_at = -1, resume_at = -1;
    const char* ckpt_variable = NULL;
    check(dtrace_recorder_is_replay(rec, &replaying), "is_replay");
    check(dtrace_recorder_replay_step(rec, &replay_step), "replay_step");
    check(dtrace_recorder_stop_at(rec, &stop_at), "stop_at");
    check(dtrace_recorder_resume_at(rec, &resume_at), "resume_at");
    check(dtrace_recorder_checkpoint_dir(rec, &ckpt_variable), "checkpoint_dir");
    if (session != NULL) {
      check_session(dtrace_session_first_step_request(session, &first_request), "first_step_request");
    }
    if (ckpt_variable != NULL) {
      free(checkpoint_dir);
      checkpoint_dir = strdup(ckpt_variable);
      if (checkpoint_dir == NULL) die("out of memory");
    }

    /* Where to start and stop. A replay of step N restores the newest
     * checkpoint at or before N; the recorder fast-forwards the steps between
     * (they run, and record nothing but, when bisect asks with
     * DTRACE_FAST_FORWARD=step, their step-level records), then step N is
     * recorded and we stop. In a session only the first step replay does so
     * and keeps the parameters at the start of step N; later ones start there. */
    int64_t first = 0, end = o->steps;
    const int from_kept = session != NULL && replay_step >= 0 && !first_request;
    if (from_kept) {
      params = kept;
      first = replay_step;
      end = replay_step + 1;
    } else if (replay_step >= 0) {
      first = newest_checkpoint(checkpoint_dir, replay_step);
      end = replay_step + 1;
    } else if (resume_at >= 0) {
      first = resume_at;
    }
    if (stop_at >= 0 && stop_at < end) end = stop_at;
    if (first > 0 && !from_kept) read_checkpoint(checkpoint_dir, first);

    for (int64_t step = first; step < end; ++step) {
      if (first_request && step == replay_step) kept = params;
      make_batch(step);
      train_step(step);
      const int64_t next = step + 1;
      const int due = o->checkpoint_every > 0 && next % o->checkpoint_every == 0 && next < o->steps;
      if (!replaying && (due || next == stop_at)) write_checkpoint(checkpoint_dir, next);
    }
  }
  const int code = dtrace_recorder_close(rec);
  rec = NULL;
  if (code != DTRACE_OK) die("dtrace_recorder_close: %s", dtrace_error_string(code));
  free(checkpoint_dir);
}

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (!o.have_seed) chaos_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  char* out = absolute(o.out);
  char* checkpoint_dir = NULL;
  if (o.checkpoint_dir != NULL) {
    checkpoint_dir = absolute(o.checkpoint_dir);
  } else {
    checkpoint_dir = malloc(strlen(out) + 6);
    if (checkpoint_dir == NULL) die("out of memory");
    sprintf(checkpoint_dir, "%s.ckpt", out);
  }
  char program[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", program, sizeof program - 1);
  if (length <= 0) die("cannot find this program's path: %s", strerror(errno));
  program[length] = '\0';

  /* The header's replay command: this program with every choice spelled out,
   * the chaos seed included, so a replay of any step recomputes this run. */
  char steps[24], every[24], seed[24];
  snprintf(steps, sizeof steps, "%" PRId64, o.steps);
  snprintf(every, sizeof every, "%" PRId64, o.checkpoint_every);
  snprintf(seed, sizeof seed, "%" PRIu64, chaos_seed);
  const char* level_names[] = {"step", "layer", "kernel"};
  const char* replay[] = {program, "--out", out, "--steps", steps, "--checkpoint-dir",
                          checkpoint_dir, "--checkpoint-every", every, "--chaos-seed", seed,
                          "--level", level_names[o.level], "--planted", planted_names(planted)};
  char config[256];
  snprintf(config, sizeof config,
           "{\"model\":\"mlp-%d-%d-%d\",\"batch\":%d,\"lr\":0.05,\"steps\":%" PRId64
           ",\"planted\":\"%s\",\"chaos_seed\":%" PRIu64 "}",
           DIN, HID, DOUT, BATCH, o.steps, planted_names(planted), chaos_seed);

  dtrace_run_options options;
  dtrace_run_options_init(&options);
  options.run_dir = out;
  options.run_name = o.run_name != NULL ? o.run_name : "ctrain";
  options.level = o.level;
  options.config_json = config;
  options.replay_argv = replay;
  options.replay_argc = planted ? 15 : 13;

  /* A replay session: every request served as a launch with its variables
   * would, then done; the end request ends the process. */
  const int32_t ranks[] = {0};
  check_session(dtrace_session_open(ranks, 1, &session), "dtrace_session_open");
  if (session == NULL) {
    serve(&options, &o, checkpoint_dir);
  } else {
    const int planted_option = planted;
    int32_t more = 0;
    for (;;) {
      check_session(dtrace_session_next(session, -1, &more), "dtrace_session_next");
      if (!more) break;
      planted = planted_option; /* a request's DTRACE_DETERMINISTIC is its own */
      serve(&options, &o, checkpoint_dir);
      check_session(dtrace_session_done(session), "dtrace_session_done");
    }
    dtrace_session_close(session);
    session = NULL;
  }
  free(out);
  free(checkpoint_dir);
  return 0;
}
