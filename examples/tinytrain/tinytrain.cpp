// tinytrain: a complete small training program that speaks dtrace's protocols,
// the example of docs/integrating.md ("Integrating your own training program").
// It records dtrace-fp/1 logs, writes checkpoints and answers every variable of
// the replay protocol dtrace-replay/1 (man dtrace-fp(5)), so that `dtrace diff`
// and `dtrace bisect` work on it. Build it against an installed dtrace:
//
//   c++ -std=c++20 -O2 -o tinytrain tinytrain.cpp $(pkg-config --cflags --libs dtrace-recorder)
//
// The model: x[8,32] -> layer.0: h = tanh(x W0 + b0) -> layer.1: y = h W1 + b1
// -> loss = mean((y - target)^2), plain backward, SGD with momentum. With
// --nondet, the matmul of layer.1 adds its 32 products in an order drawn anew
// in every process: the kind of nondeterminism (atomics, split-K) that dtrace
// is for. --nondet LIST plants it in the matmuls the comma-separated list
// names, layer.0 and/or layer.1 (fwd/layer.0 matmul, fwd/layer.1 matmul):
// two causes, the first feeding the second, for bisect to find one after the
// other (dtrace-fp(5), "Pinned ops").
//
// It serves replay sessions (dtrace-replay/1.2, dtrace-fp(5) "Replay
// sessions"): under DTRACE_SESSION one process answers all of a bisect side's
// replays, keeping the model as it was at the start of the replayed step.
// --startup-delay SECONDS stands in for a real job's start-up (a large
// checkpoint read, process-group set-up), which sessions pay once.
//
// It honours pins (dtrace-replay/1.3, dtrace-fp(5) "Pinned ops"): every op
// asks the recorder whether each of its outputs is pinned (DTRACE_PIN) right
// after computing it, and takes the pinned bytes in its place, so bisect can
// set a named nondeterministic op aside and look for the next.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dtrace/recorder.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kBatch = 8, kWidth = 32;

struct Tensor {
  std::vector<float> v;
  std::vector<std::int64_t> shape;
  explicit Tensor(std::vector<std::int64_t> s = {kBatch, kWidth})
      : v(static_cast<std::size_t>(
            std::reduce(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>()))),
        shape(std::move(s)) {}
  dtrace::TensorView view() const { return {v.data(), v.size() * sizeof(float), "f32", shape}; }
};
using Args = std::vector<std::pair<const char*, Tensor*>>;

// Every computation runs inside Trace::layer and Trace::op, so that one place
// records it and one place answers DTRACE_ISOLATE: under isolation, only the
// requested layer (or op) runs, from the inputs dtrace captured, K times.
class Trace {
 public:
  Trace(dtrace::Recorder* rec, const dtrace::ReplayRequest& request)
      : rec_(rec), request_(request) {}
  bool recording = true;  // false while fast-forwarding to a replayed step
  bool isolating() const { return request_.isolate.has_value(); }

  // A scope that only groups layers ("fwd", "bwd"): it runs unless an
  // isolation targets a scope outside it.
  void group(const char* name, const std::function<void()>& body) {
    Scope scope = open(name);
    if (!isolating() || request_.isolate_scope().starts_with(path_ + "/")) body();
  }
  // A layer: a scope that records its inputs and outputs with op = its own
  // name, at layer level. The inputs include the layer's parameters, so that
  // a capture of the layer holds everything needed to run it again.
  void layer(const char* name, const Args& ins, const Args& outs,
             const std::function<void()>& body) {
    Scope scope = open(name);
    if (!isolating()) {
      record(dtrace::Level::layer, name, dtrace::RecordIo::in, ins);
      body();
      record(dtrace::Level::layer, name, dtrace::RecordIo::out, outs);
    } else if (path_ == request_.isolate_scope()) {
      if (request_.isolate_op().empty())
        repeat(dtrace::Level::layer, name, ins, outs, body);
      else
        body();  // the op inside runs isolated; the other ops are skipped
    }
  }
  // A kernel inside a layer, recorded at kernel level. Under isolation it is
  // reached only inside the isolated layer (whose ops all run and record) or
  // the layer of the isolated op (where only that op runs).
  void op(const char* name, const Args& ins, const Args& outs, const std::function<void()>& body) {
    if (!isolating() || request_.isolate_op().empty()) {
      record(dtrace::Level::kernel, name, dtrace::RecordIo::in, ins);
      body();
      pin(name, outs);
      record(dtrace::Level::kernel, name, dtrace::RecordIo::out, outs);
    } else if (path_ == request_.isolate_scope() && request_.isolate_op() == name) {
      repeat(dtrace::Level::kernel, name, ins, outs, body);
    }
  }
  void record(dtrace::Level level, const char* op, dtrace::RecordIo io, const Args& args) {
    if (!recording || !rec_->wants(level)) return;
    for (const auto& [name, t] : args) rec_->tensor(level, op, io, name, t->view());
  }
  // Pinned ops (DTRACE_PIN): each output of an op that was just computed is
  // replaced by its pinned bytes when the recorder has any for this call,
  // before the op's out record and before anything downstream reads it.
  // Asked once per output of every call, at every level: the recorder counts
  // the calls to match them with the pins' occurrences. pins() is false
  // outside a replayed step or repetition, where nothing can be pinned.
  void pin(const char* op, const Args& outs) {
    if (!rec_->pins()) return;
    for (const auto& [name, t] : outs) {
      const auto bytes = rec_->pinned(op, name);
      if (!bytes) continue;
      if (bytes->size() != t->v.size() * sizeof(float))
        throw dtrace::RecorderError("DTRACE_PIN holds " + std::to_string(bytes->size()) + " bytes for " +
                                    path_ + "::" + op + " output " + name + ", this model's is " +
                                    std::to_string(t->v.size() * sizeof(float)));
      std::memcpy(t->v.data(), bytes->data(), bytes->size());
    }
  }
  int isolated_runs = 0;

 private:
  // Scopes nest in the recorder and in path_ alike: isolation compares path_
  // with DTRACE_ISOLATE, the recorder names records and finds captures by it.
  struct Scope {
    Trace* trace;
    std::size_t previous;
    dtrace::Recorder::Scope rec;
    ~Scope() { trace->path_.resize(previous); }
  };
  Scope open(const char* name) {
    const std::size_t previous = path_.size();
    path_ += (path_.empty() ? "" : "/") + std::string(name);
    return Scope{this, previous, rec_->scope(name)};
  }
  // Runs one layer or op DTRACE_REPEAT times from the captured inputs,
  // repetition k recorded as step k.
  void repeat(dtrace::Level level, const char* op, const Args& ins, const Args& outs,
              const std::function<void()>& body) {
    for (int k = 0; k < request_.repeat; ++k) {
      for (const auto& [name, t] : ins) {
        auto bytes = rec_->captured(path_, op, dtrace::RecordIo::in, name);
        if (!bytes || bytes->size() != t->v.size() * sizeof(float))
          throw dtrace::RecorderError("DTRACE_INPUTS holds no input " + std::string(name) + " of " +
                                      path_ + "::" + op);
        std::memcpy(t->v.data(), bytes->data(), bytes->size());
      }
      rec_->begin_repetition(k);
      record(level, op, dtrace::RecordIo::in, ins);
      body();  // an isolated layer's ops pin their own outputs (op() above)
      if (level == dtrace::Level::kernel) pin(op, outs);
      record(level, op, dtrace::RecordIo::out, outs);
      ++isolated_runs;
    }
  }
  dtrace::Recorder* rec_;
  const dtrace::ReplayRequest& request_;
  std::string path_;
};

// out[i,j] = sum_k a[i,k] b[k,j]. `unordered` adds the products in an order
// drawn anew at every call from a generator seeded differently in every
// process, as atomics or a split-K GEMM would: that is the planted bug.
void matmul(const Tensor& a, const Tensor& b, Tensor& out, bool unordered = false) {
  static std::mt19937 chaos(std::random_device{}());
  std::vector<int> order(kWidth);
  std::iota(order.begin(), order.end(), 0);
  if (unordered) std::shuffle(order.begin(), order.end(), chaos);
  for (int i = 0; i < kBatch; ++i)
    for (int j = 0; j < kWidth; ++j) {
      float sum = 0;
      for (const int k : order) sum += a.v[i * kWidth + k] * b.v[k * kWidth + j];
      out.v[i * kWidth + j] = sum;
    }
}

struct Model {
  Tensor w0{{kWidth, kWidth}}, b0{{kWidth}}, w1{{kWidth, kWidth}}, b1{{kWidth}};
  Tensor m_w0{{kWidth, kWidth}}, m_b0{{kWidth}}, m_w1{{kWidth, kWidth}}, m_b1{{kWidth}};
  Args state() {
    return {{"w0", &w0},     {"b0", &b0},     {"w1", &w1},     {"b1", &b1},
            {"m_w0", &m_w0}, {"m_b0", &m_b0}, {"m_w1", &m_w1}, {"m_b1", &m_b1}};
  }
};

// Which matmuls --nondet plants: fwd/layer.0's, fwd/layer.1's.
struct Nondet {
  bool layer0 = false, layer1 = false;
  bool any() const { return layer0 || layer1; }
  std::string names() const {
    if (!any()) return "none";
    return std::string(layer0 ? "layer.0" : "") + (layer0 && layer1 ? "," : "") + (layer1 ? "layer.1" : "");
  }
};

// --nondet's list: layer.0, layer.1, comma-separated.
Nondet parse_nondet(const std::string& list) {
  Nondet n;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = list.find(',', start);
    const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name == "layer.0")
      n.layer0 = true;
    else if (name == "layer.1")
      n.layer1 = true;
    else
      throw dtrace::RecorderError("--nondet " + list + ": '" + name + "' is not layer.0 or layer.1");
    if (comma == std::string::npos) return n;
    start = comma + 1;
  }
}

struct Options {
  int steps = 6, checkpoint_every = 0;
  double startup_delay = 0;
  Nondet nondet;
  std::string out, checkpoint_dir = "checkpoints", level = "step";
};

// One optimizer step. Every tensor is a named argument of the layer that reads
// or writes it; the data is a function of the step number (no data state).
float train_step(Trace& t, Model& m, std::int64_t step, const Nondet& nondet) {
  Tensor x, target, z0, h, z1, y, dy, dh, dz, g_w0{{kWidth, kWidth}}, g_b0{{kWidth}},
      g_w1{{kWidth, kWidth}}, g_b1{{kWidth}}, loss{{1}};
  for (std::size_t i = 0; i < x.v.size(); ++i) {
    x.v[i] = std::sin(0.37f * static_cast<float>(i) + 0.11f * static_cast<float>(step));
    target.v[i] = std::cos(0.23f * static_cast<float>(i) - 0.05f * static_cast<float>(step));
  }

  t.group("fwd", [&] {
    t.layer("layer.0", {{"x", &x}, {"w", &m.w0}, {"b", &m.b0}}, {{"h", &h}}, [&] {
      t.op("matmul", {{"x", &x}, {"w", &m.w0}}, {{"z", &z0}}, [&] { matmul(x, m.w0, z0, nondet.layer0); });
      t.op("bias_tanh", {{"z", &z0}, {"b", &m.b0}}, {{"h", &h}}, [&] {
        for (std::size_t i = 0; i < h.v.size(); ++i)
          h.v[i] = std::tanh(z0.v[i] + m.b0.v[i % kWidth]);
      });
    });
    t.layer("layer.1", {{"h", &h}, {"w", &m.w1}, {"b", &m.b1}}, {{"y", &y}}, [&] {
      t.op("matmul", {{"h", &h}, {"w", &m.w1}}, {{"z", &z1}}, [&] { matmul(h, m.w1, z1, nondet.layer1); });
      t.op("bias", {{"z", &z1}, {"b", &m.b1}}, {{"y", &y}}, [&] {
        for (std::size_t i = 0; i < y.v.size(); ++i) y.v[i] = z1.v[i] + m.b1.v[i % kWidth];
      });
    });
    t.layer("loss", {{"y", &y}, {"target", &target}}, {{"loss", &loss}, {"dy", &dy}}, [&] {
      double sum = 0;
      for (std::size_t i = 0; i < y.v.size(); ++i) {
        const float d = y.v[i] - target.v[i];
        sum += d * d;
        dy.v[i] = 2 * d / static_cast<float>(y.v.size());
      }
      loss.v[0] = static_cast<float>(sum / static_cast<double>(y.v.size()));
    });
  });
  t.group("bwd", [&] {
    t.layer("layer.1", {{"dy", &dy}, {"h", &h}, {"w", &m.w1}},
            {{"dw", &g_w1}, {"db", &g_b1}, {"dh", &dh}}, [&] {
              for (int i = 0; i < kWidth; ++i)
                for (int j = 0; j < kWidth; ++j) {
                  float dw = 0, dhv = 0;
                  for (int r = 0; r < kBatch; ++r) dw += h.v[r * kWidth + i] * dy.v[r * kWidth + j];
                  g_w1.v[i * kWidth + j] = dw;
                  if (i < kBatch) {
                    for (int k = 0; k < kWidth; ++k)
                      dhv += dy.v[i * kWidth + k] * m.w1.v[j * kWidth + k];
                    dh.v[i * kWidth + j] = dhv;
                  }
                }
              for (int j = 0; j < kWidth; ++j) {
                g_b1.v[j] = 0;
                for (int r = 0; r < kBatch; ++r) g_b1.v[j] += dy.v[r * kWidth + j];
              }
            });
    t.layer("layer.0", {{"dh", &dh}, {"h", &h}, {"x", &x}}, {{"dw", &g_w0}, {"db", &g_b0}}, [&] {
      for (std::size_t i = 0; i < dz.v.size(); ++i) dz.v[i] = dh.v[i] * (1 - h.v[i] * h.v[i]);
      for (int i = 0; i < kWidth; ++i)
        for (int j = 0; j < kWidth; ++j) {
          float dw = 0;
          for (int r = 0; r < kBatch; ++r) dw += x.v[r * kWidth + i] * dz.v[r * kWidth + j];
          g_w0.v[i * kWidth + j] = dw;
        }
      for (int j = 0; j < kWidth; ++j) {
        g_b0.v[j] = 0;
        for (int r = 0; r < kBatch; ++r) g_b0.v[j] += dz.v[r * kWidth + j];
      }
    });
  });
  Args params = {{"w0", &m.w0}, {"b0", &m.b0}, {"w1", &m.w1}, {"b1", &m.b1}};
  Args moments = {{"m_w0", &m.m_w0}, {"m_b0", &m.m_b0}, {"m_w1", &m.m_w1}, {"m_b1", &m.m_b1}};
  Args grads = {{"dw0", &g_w0}, {"db0", &g_b0}, {"dw1", &g_w1}, {"db1", &g_b1}};
  // The gradients at step level too: a run recorded at step level then shows a
  // divergence in the step it happens, not only in the next step's state.
  t.group("step", [&] { t.record(dtrace::Level::step, "grads", dtrace::RecordIo::out, grads); });
  Args ins = params;
  ins.insert(ins.end(), moments.begin(), moments.end());
  ins.insert(ins.end(), grads.begin(), grads.end());
  Args outs = params;
  outs.insert(outs.end(), moments.begin(), moments.end());
  t.layer("opt", ins, outs, [&] {
    for (std::size_t p = 0; p < params.size(); ++p)
      for (std::size_t i = 0; i < params[p].second->v.size(); ++i) {
        float& mom = moments[p].second->v[i];
        mom = 0.9f * mom + grads[p].second->v[i];
        params[p].second->v[i] -= 0.05f * mom;
      }
  });
  return loss.v[0];
}

// Checkpoints hold the state at the start of a step: every tensor of state().
std::string checkpoint_path(const Options& o, std::int64_t step) {
  return o.checkpoint_dir + "/ckpt-" + std::to_string(step) + ".bin";
}
void save_checkpoint(const Options& o, Model& m, std::int64_t step) {
  std::filesystem::create_directories(o.checkpoint_dir);
  const std::string path = checkpoint_path(o, step), temporary = path + ".tmp";
  std::ofstream f(temporary, std::ios::binary);
  for (auto& [name, t] : m.state())
    f.write(reinterpret_cast<const char*>(t->v.data()), t->v.size() * 4);
  if (!f.flush()) throw dtrace::RecorderError("cannot write " + temporary);
  f.close();
  std::filesystem::rename(temporary, path);  // whole or absent, even after a crash
}
// The newest checkpoint at or before `step`; 0 (initialization) when none.
std::int64_t load_checkpoint(const Options& o, Model& m, std::int64_t step) {
  for (std::int64_t s = step; s > 0; --s) {
    std::ifstream f(checkpoint_path(o, s), std::ios::binary);
    if (!f) continue;
    for (auto& [name, t] : m.state()) f.read(reinterpret_cast<char*>(t->v.data()), t->v.size() * 4);
    if (!f) throw dtrace::RecorderError("truncated checkpoint " + checkpoint_path(o, s));
    return s;
  }
  return 0;
}

void initialize(Model& m) {
  std::mt19937 rng(1234);  // fixed: two runs start from the same weights
  std::normal_distribution<float> normal(0.0f, 0.2f);
  for (Tensor* t : {&m.w0, &m.w1})
    std::generate(t->v.begin(), t->v.end(), [&] { return normal(rng); });
}

// The step-level records of one step: the state at its start and its loss.
// They keep the same scope, op and name in a run and in a replay, so that
// bisect can check a replay's restored state against the run's.
void record_state(Trace& t, Model& m) {
  t.record(dtrace::Level::step, "state", dtrace::RecordIo::state, m.state());
}

// A training run, a launched replay, or one request of a replay session. In a
// session, `kept` holds the model as it was at the start of the replayed step:
// the session's first step replay restores it from the checkpoint and keeps
// it, every later one starts from it (nothing it changed reaches the next
// request). A launch passes no `kept`.
int serve(const Options& o, const dtrace::RunOptions& options, const dtrace::ReplayRequest& request,
          std::optional<Model>* kept, bool first_step_request) {
  auto rec = dtrace::Recorder::open(options, request);
  Trace t(rec.get(), request);
  Model m;
  initialize(m);

  if (request
          .isolate) {  // isolation wins over DTRACE_REPLAY_STEP, which only names the captured step
    train_step(t, m, request.step.value_or(0), o.nondet);
    if (t.isolated_runs == 0)
      throw dtrace::RecorderError("DTRACE_ISOLATE names nothing this program runs");
    rec->end_step();
    return 0;
  }
  std::int64_t first = 0, last = o.steps;
  if (request.step) {  // replay one step: restore, fast-forward, record that step
    if (kept != nullptr && !first_step_request) {
      m = kept->value();  // a later request of a session: nothing to fast-forward
      first = *request.step;
    } else {
      first = load_checkpoint(o, m, *request.step);
    }
    last = *request.step + 1;
  }
  for (std::int64_t step = first; step < last; ++step) {
    if (kept != nullptr && first_step_request && step == *request.step) *kept = m;
    const bool replayed = request.step && step < *request.step;
    if (!request.is_replay() && o.checkpoint_every > 0 && step > 0 &&
        step % o.checkpoint_every == 0)
      save_checkpoint(o, m, step);
    // A fast-forwarded step is recorded at step level when bisect asks
    // (DTRACE_FAST_FORWARD=step: the recorder keeps its step-level records and
    // drops the rest), to be checked against the run; else not at all.
    t.recording = !replayed || request.record_fast_forward;
    if (t.recording) {
      rec->begin_step(step);
      auto scope = rec->scope("step");
      record_state(t, m);
    }
    const float loss = train_step(t, m, step, o.nondet);
    if (t.recording) {
      {
        auto scope = rec->scope("step");
        rec->scalar_f32(dtrace::Level::step, "loss", dtrace::RecordIo::metric, "loss", loss);
      }
      rec->end_step();
    }
    if (!request.is_replay() && step + 1 == last)
      std::printf("tinytrain: %lld steps, loss %.6f\n", static_cast<long long>(last), loss);
  }
  return 0;
}

int run(Options o, const std::vector<std::string>& argv) {
  if (o.startup_delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.startup_delay));
  const auto request = dtrace::ReplayRequest::from_environment();
  // dtrace verify and tax run arms with their own run and checkpoint
  // directories (DTRACE_RUN_DIR, which the recorder applies, and this one).
  if (request.checkpoint_dir) o.checkpoint_dir = *request.checkpoint_dir;
  dtrace::RunOptions options;
  options.run_dir = o.out;
  options.run_name = std::filesystem::path(o.out).filename().string();
  options.level = dtrace::parse_level(o.level).value_or(dtrace::Level::step);
  options.config_json = "{\"nondet\":\"" + o.nondet.names() + "\"}";
  options.replay_argv = argv;  // this very command: dtrace runs it again to replay
  options.serves_sessions = true;  // replay sessions (dtrace-replay/1.2)
  options.honours_pins = true;     // and pins: the header says dtrace-replay/1.3
  // A replay session: every request as a launch with its variables, then done.
  if (auto session = dtrace::ReplaySession::from_environment({options.rank})) {
    std::optional<Model> kept;
    while (auto served = session->next()) {
      serve(o, options, *served, &kept, session->first_step_request());
      session->done();  // after serve() closed the request's recorder
    }
    return 0;
  }
  return serve(o, options, request, nullptr, false);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> replay_argv = {std::filesystem::canonical("/proc/self/exe").string()};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    replay_argv.push_back(flag);
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw dtrace::RecorderError(flag + " needs a value");
      replay_argv.push_back(argv[i + 1]);
      return argv[++i];
    };
    try {
      if (flag == "--steps")
        o.steps = std::stoi(value());
      else if (flag == "--out")
        o.out = value();
      else if (flag == "--level")
        o.level = value();
      else if (flag == "--checkpoint-every")
        o.checkpoint_every = std::stoi(value());
      else if (flag == "--checkpoint-dir")
        o.checkpoint_dir = std::filesystem::absolute(value()).string();
      else if (flag == "--nondet")  // alone: layer.1's; followed by a list: those
        o.nondet = i + 1 < argc && argv[i + 1][0] != '-' ? parse_nondet(value()) : parse_nondet("layer.1");
      else if (flag == "--startup-delay")
        o.startup_delay = std::stod(value());
      else
        throw dtrace::RecorderError("unknown flag " + flag);
      if (flag == "--checkpoint-dir") replay_argv.back() = o.checkpoint_dir;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tinytrain: error: %s\n", e.what());
      return 2;
    }
  }
  try {
    if (o.out.empty() && !std::getenv("DTRACE_OUT") && !std::getenv("DTRACE_RUN_DIR") &&
        !std::getenv("DTRACE_SESSION"))
      throw dtrace::RecorderError("--out DIR is required");
    return run(o, replay_argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tinytrain: error: %s\n", e.what());
    return 2;
  }
}
