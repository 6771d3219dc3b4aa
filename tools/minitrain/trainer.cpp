#include "trainer.hpp"

#include <bit>
#include <cstring>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "checkpoint.hpp"
#include "comm.hpp"
#include "kernels.hpp"
#include "trace.hpp"

namespace minitrain {

namespace fs = std::filesystem;
using dtrace::Level;
using dtrace::RecordIo;

void fill_batch(const std::string& corpus, const ModelShape& shape, int rank,
                std::int64_t data_position, Tokens& inputs, Tokens& targets) {
  const std::uint64_t span = corpus.size() - static_cast<std::size_t>(shape.seq) - 1;
  for (int b = 0; b < shape.batch; ++b) {
    const std::uint64_t i =
        static_cast<std::uint64_t>(data_position) +
        static_cast<std::uint64_t>(rank) * static_cast<std::uint64_t>(shape.batch) +
        static_cast<std::uint64_t>(b);
    const std::uint64_t start = (i * 2654435761ULL + 12345ULL) % span;
    for (int t = 0; t < shape.seq; ++t) {
      inputs.data[static_cast<std::size_t>(b * shape.seq + t)] =
          static_cast<unsigned char>(corpus[start + static_cast<std::size_t>(t)]);
      targets.data[static_cast<std::size_t>(b * shape.seq + t)] =
          static_cast<unsigned char>(corpus[start + static_cast<std::size_t>(t) + 1]);
    }
  }
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string read_corpus(const std::string& path, const ModelShape& shape) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("corpus " + path + ": cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() < static_cast<std::size_t>(shape.seq) + 2) {
    throw Error("corpus " + path + ": " + std::to_string(text.size()) +
                " bytes, too short for --seq " + std::to_string(shape.seq));
  }
  return text;
}

TrainState initial_state(const Config& c, const Layout& layout) {
  TrainState s;
  init_params(layout, c.seed, s.params);
  s.adam_m.assign(layout.total, 0.0f);
  s.adam_v.assign(layout.total, 0.0f);
  for (int r = 0; r < c.ranks; ++r) {
    s.rngs.push_back(
        Xoshiro::seeded(mix_key(c.seed, 0x44524f50ULL, static_cast<std::uint64_t>(r))));
  }
  return s;
}

// A resumed run's restore. With resume-rng it "forgets" the RNG state and
// re-seeds from --seed, the classic incomplete restore.
TrainState resume_from(const Config& c, const Layout& layout, std::int64_t step) {
  TrainState s = read_checkpoint(checkpoint_path(c.checkpoint_dir, step), c.shape, c.ranks);
  if (c.planted.has(Planted::resume_rng)) s.rngs = initial_state(c, layout).rngs;
  return s;
}

std::int64_t newest_for_resume(const Config& c) {
  const auto newest = newest_checkpoint(c.checkpoint_dir, std::nullopt);
  if (!newest) throw Error("--resume: no checkpoint (ckpt-*.bin) in " + c.checkpoint_dir);
  return *newest;
}

class Session {
 public:
  Session(const Config& config, const std::string& executable, const dtrace::ReplayRequest& request,
          const std::vector<std::pair<std::string, std::string>>& env, KeptState* kept,
          bool first_step_request)
      : config_(config),
        request_(request),
        isolation_(Isolation::parse(request.isolate, request.repeat, request.isolate_call())),
        layout_(Layout::of(config.shape)),
        comm_(config.process_rank >= 0 ? 1 : config.ranks),
        backend_(&open_backend(config.backend, config.process_rank >= 0 ? config.process_rank : 0)),
        chaos_base_(config.chaos_seed ? *config.chaos_seed : fresh_chaos()) {
    corpus_ = read_corpus(config_.corpus, config_.shape);
    if (kept != nullptr && request_.step && !isolation_.active()) {
      kept_ = kept;
      keep_ = first_step_request;
      if (keep_) {
        kept->ranks.assign(static_cast<std::size_t>(config_.ranks), TrainState{});
      } else if (kept->ranks.empty()) {
        throw Error("a session's step replay before its first: no state kept to start from");
      }
    }
    if (config_.process_rank >= 0) {
      collective_ = open_collective(*backend_, config_.process_rank, config_.ranks,
                                    config_.bootstrap_dir,
                                    config_.planted.has(Planted::allreduce_arrival));
    }
    plan();
    options_.run_dir = config_.out;
    options_.run_name = config_.out.empty()
                            ? std::string("minitrain")
                            : fs::path(config_.out).lexically_normal().filename().string();
    options_.world_size = config_.ranks;
    // An isolated layer or op is recorded per kernel unless DTRACE_LEVEL says otherwise.
    options_.level = isolation_.active() ? Level::kernel : config_.level;
    options_.env = env;
    options_.config_json = config_json(config_);
    options_.replay_argv = replay_argv(config_, executable);
    // Every process serves sessions (main.cpp), except the launcher of a
    // multi-process job, which would have to pass each request to its ranks.
    options_.serves_sessions = !(config_.backend == "cuda" && config_.ranks > 1);
    // Every op honours pins (Trace::kernel asks for each output; dtrace-replay/1.3),
    // which the protocol announces only with sessions.
    options_.honours_pins = options_.serves_sessions;
    // Every rank is a data-parallel replica of the others (one group); the RNG
    // (dropout) and data position are each rank's own.
    if (config_.ranks > 1) {
      options_.replica_groups.emplace_back();
      for (int r = 0; r < config_.ranks; ++r) options_.replica_groups.back().push_back(r);
      options_.per_rank_state = {"rng", "data"};
    }
    rngs_.resize(static_cast<std::size_t>(config_.ranks));
    losses_.assign(static_cast<std::size_t>(config_.ranks), {});
  }

  RunResult run() {
    // A process of a multi-process job: the launcher checked the run directory.
    if (!request_.is_replay() && config_.process_rank < 0) {
      std::error_code ec;
      if (fs::exists(config_.out, ec)) {
        throw Error("run directory " + config_.out +
                    " exists; refusing to overwrite it (choose a new --out)");
      }
    }
    std::vector<std::thread> threads;
    for (int r = first_rank(); r <= last_rank(); ++r)
      threads.emplace_back([this, r] { guarded_rank_main(r); });
    for (auto& t : threads) t.join();
    if (error_) std::rethrow_exception(error_);

    RunResult result;
    result.mode = isolation_.active() ? RunResult::Mode::isolate
                  : request_.step     ? RunResult::Mode::replay_step
                                      : RunResult::Mode::train;
    result.first_step = first_recorded_;
    result.end_step = end_;
    result.isolated_runs = isolated_runs_;
    if (timed_steps_ > 0) {
      result.step_seconds = step_seconds_ / static_cast<double>(timed_steps_);
      result.record_seconds = record_seconds_ / static_cast<double>(timed_steps_);
    }
    result.tokens_per_step =
        static_cast<std::int64_t>(config_.ranks) * config_.shape.batch * config_.shape.seq;
    // One process of a multi-process job: the launcher decides whether any ran it.
    if (isolation_.active() && isolated_runs_ == 0 && config_.process_rank < 0) {
      throw Error("DTRACE_ISOLATE=" + *request_.isolate +
                  ": no rank ran it (no such layer or op in this model, or DTRACE_INPUTS lacks its "
                  "inputs)");
    }
    // Over the ranks of this process (a process of a multi-process job: its own).
    const std::size_t steps = losses_[static_cast<std::size_t>(first_rank())].size();
    for (std::size_t i = 0; i < steps; ++i) {
      double sum = 0;
      for (int r = first_rank(); r <= last_rank(); ++r) sum += losses_[static_cast<std::size_t>(r)][i];
      result.mean_loss.push_back(sum / static_cast<double>(last_rank() - first_rank() + 1));
    }
    return result;
  }

 private:
  struct Rank {
    int rank;
    std::unique_ptr<dtrace::Recorder> recorder;
    Trace trace;
    Model model;
    PlantedState planted;
    Floats params, grads, reduced, adam_m, adam_v;
    std::int64_t adam_step = 0;
    std::int64_t data_position = 0;
    Xoshiro rng;
    Tensor grad_norm{std::vector<std::int64_t>{1}};
    // Fingerprints of each parameter's value and moments as the optimizer left
    // them, taken per tensor right after AdamW wrote it (still in cache), for
    // the state records of step `step`. Hashing them again at the start of that
    // step, after the training loop has evicted them, cost twice as much.
    struct StateDigests {
      std::int64_t step = -1;  // -1: none valid
      std::vector<std::uint64_t> params, adam_m, adam_v;
    };
    StateDigests state_digests{};
    double total_step_seconds = 0.0;
    double total_record_seconds = 0.0;
    std::int64_t timed_steps = 0;
  };

  // The ranks this process runs: all of them as threads, or its own.
  int first_rank() const { return config_.process_rank >= 0 ? config_.process_rank : 0; }
  int last_rank() const {
    return config_.process_rank >= 0 ? config_.process_rank : config_.ranks - 1;
  }

  static std::uint64_t fresh_chaos() {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }

  // Which state the ranks start from and which steps they run.
  void plan() {
    const Config& c = config_;
    if (isolation_.active()) {
      start_ = initial_state(c, layout_);
      end_ = 0;
      return;
    }
    if (request_.step) {
      const std::int64_t n = *request_.step;
      if (n < 0) throw Error("DTRACE_REPLAY_STEP=" + std::to_string(n) + " is negative");
      if (kept_ != nullptr && !keep_) {
        // A later step replay of a session: from the kept state, nothing
        // fast-forwarded. rank_main takes each rank's own.
        start_ = kept_->ranks[static_cast<std::size_t>(first_rank())];
      } else if (c.resume) {
        const std::int64_t from = c.resume_step ? *c.resume_step : newest_for_resume(c);
        if (from > n) {
          throw Error("DTRACE_REPLAY_STEP=" + std::to_string(n) +
                      ": this resumed run starts at step " + std::to_string(from));
        }
        start_ = resume_from(c, layout_, from);
      } else if (auto ckpt = newest_checkpoint(c.checkpoint_dir, n)) {
        start_ = read_checkpoint(checkpoint_path(c.checkpoint_dir, *ckpt), c.shape, c.ranks);
      } else {
        start_ = initial_state(c, layout_);
      }
      first_recorded_ = n;
      end_ = n + 1;
      return;
    }
    if (c.resume) {
      resolved_resume_ = c.resume_step ? *c.resume_step : newest_for_resume(c);
      config_.resume_step = resolved_resume_;
      start_ = resume_from(c, layout_, resolved_resume_);
      if (start_.step >= c.steps) {
        throw Error("--resume: the checkpoint is at step " + std::to_string(start_.step) +
                    ", nothing left to run with --steps " + std::to_string(c.steps));
      }
    } else {
      start_ = initial_state(c, layout_);
    }
    first_recorded_ = start_.step;
    end_ = c.steps;
    if (c.stop_at) {
      if (*c.stop_at <= start_.step) {
        throw Error("DTRACE_STOP_AT=" + std::to_string(*c.stop_at) + ": this run starts at step " +
                    std::to_string(start_.step));
      }
      end_ = *c.stop_at;
    }
  }

  void guarded_rank_main(int rank) {
    try {
      rank_main(rank);
    } catch (const CommAborted&) {
      // Another rank failed first; its error is the one to report.
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      comm_.abort();
    }
  }

  void rank_main(int rank) {
    dtrace::RunOptions options = options_;
    options.rank = rank;
    auto recorder = dtrace::Recorder::open(options, request_);
    Rank* self = nullptr;
    auto on_repetition = [&self, this](int k) {
      self->planted.begin_repetition(k);
      backend_->begin_repetition();
    };
    const bool from_kept = kept_ != nullptr && !keep_;
    const TrainState& start = from_kept ? kept_->ranks[static_cast<std::size_t>(rank)] : start_;
    Rank r{rank,
           std::move(recorder),
           Trace(nullptr, isolation_, on_repetition),
           Model(config_.shape, layout_, *backend_),
           PlantedState{},
           Floats(start.params.begin(), start.params.end()),
           Floats(layout_.total),
           Floats(layout_.total),
           Floats(start.adam_m.begin(), start.adam_m.end()),
           Floats(start.adam_v.begin(), start.adam_v.end()),
           start.adam_step,
           start.data_position,
           from_kept ? start.rngs.front() : start.rngs[static_cast<std::size_t>(rank)],
           Tensor({1})};
    self = &r;
    r.trace = Trace(r.recorder.get(), isolation_, on_repetition);
    r.trace.set_backend(backend_);
    r.planted.planted = config_.planted;
    r.planted.fast_kernels = config_.fast_kernels;
    r.planted.chaos_base = chaos_base_;
    r.planted.rank = rank;
    rngs_[static_cast<std::size_t>(rank)] = &r.rng;

    if (isolation_.active()) {
      run_step(r, 0);
      std::lock_guard lock(mutex_);
      isolated_runs_ += r.trace.isolated_runs();
      return;
    }
    for (std::int64_t step = start_.step; step < end_; ++step) {
      // Steps before the replayed one are fast-forwarded: the recorder writes
      // their step-level records when bisect asks (DTRACE_FAST_FORWARD) and
      // nothing of them otherwise.
      r.trace.set_recording(step >= first_recorded_ || request_.record_fast_forward);
      if (keep_ && step == first_recorded_) keep_state(r, step);
      // --replay-fault kernel-restore: a kernel-level step replay starts from
      // other parameters than the run (and its other replays) did.
      if (config_.replay_fault == "kernel-restore" && request_.step && step == first_recorded_ &&
          request_.level == dtrace::Level::kernel) {
        flip_bit(r, 0);
      }
      run_step(r, step);
      if (!request_.is_replay()) maybe_checkpoint(r, step + 1);
    }
    // --replay-fault carry-state: what a session keeps for its next request
    // is where this one ended, not the step's start.
    if (kept_ != nullptr && config_.replay_fault == "carry-state") keep_state(r, first_recorded_);
    if (rank == first_rank()) {
      timed_steps_ = r.timed_steps;
      step_seconds_ = r.total_step_seconds;
      record_seconds_ = r.total_record_seconds;
    }
  }

  // The first step replay of a session keeps each rank's state at the start of
  // the replayed step (before --flip-bit, which every replay then applies).
  void keep_state(const Rank& r, std::int64_t step) {
    backend_->sync();
    TrainState& s = kept_->ranks[static_cast<std::size_t>(r.rank)];
    s.step = step;
    s.params.assign(r.params.begin(), r.params.end());
    s.adam_m.assign(r.adam_m.begin(), r.adam_m.end());
    s.adam_v.assign(r.adam_v.begin(), r.adam_v.end());
    s.adam_step = r.adam_step;
    s.data_position = r.data_position;
    s.rngs = {r.rng};
  }

  void maybe_checkpoint(Rank& r, std::int64_t next) {
    const std::int64_t k = config_.checkpoint_every;
    const bool stopping = config_.stop_at && next == *config_.stop_at;
    if (!stopping && (k <= 0 || next % k != 0 || next >= config_.steps)) return;
    backend_->sync();
    comm_.barrier();
    // Every process's RNG state, for rank 0's checkpoint.
    std::vector<Xoshiro> all_rngs;
    if (collective_) all_rngs = collective_->allgather(r.rng);
    if (r.rank == 0) {
      TrainState state;
      state.step = next;
      state.params.assign(r.params.begin(), r.params.end());
      state.adam_m.assign(r.adam_m.begin(), r.adam_m.end());
      state.adam_v.assign(r.adam_v.begin(), r.adam_v.end());
      state.adam_step = r.adam_step;
      state.data_position = r.data_position;
      if (collective_) {
        state.rngs = all_rngs;
      } else {
        for (const Xoshiro* rng : rngs_) state.rngs.push_back(*rng);
      }
      write_checkpoint(config_.checkpoint_dir, config_.shape, state);
    }
    comm_.barrier();
  }

  // Per-parameter views of a flat vector, named by the parameter, with their
  // fingerprints when `digests` has them.
  std::vector<Arg> per_param(Floats& flat, const std::vector<std::uint64_t>* digests = nullptr) const {
    std::vector<Arg> args;
    for (std::size_t i = 0; i < layout_.params.size(); ++i) {
      const ParamInfo& p = layout_.params[i];
      args.push_back(
          {p.name, flat.data() + p.offset, p.size * sizeof(float), "f32", p.shape, false});
      if (digests != nullptr) args.back().digest = (*digests)[i];
    }
    return args;
  }

  void record_state(Rank& r, std::int64_t step_now) {
    auto scope = r.trace.scope("step");
    auto& d = r.state_digests;
    const bool ahead = d.step == step_now;
    d.step = -1;
    const std::vector<Arg> params = per_param(r.params, ahead ? &d.params : nullptr),
                           m = per_param(r.adam_m, ahead ? &d.adam_m : nullptr),
                           v = per_param(r.adam_v, ahead ? &d.adam_v : nullptr),
                           step{arg("step", r.adam_step)},
                           rng{arg(kRngStateName, r.rng)},
                           position{arg("position", r.data_position)};
    r.trace.record_groups(Level::step, {{"param", RecordIo::state, &params},
                                        {"adam_m", RecordIo::state, &m},
                                        {"adam_v", RecordIo::state, &v},
                                        {"adam", RecordIo::state, &step},
                                        {"rng", RecordIo::state, &rng},
                                        {"data", RecordIo::state, &position}});
  }

  // --flip-bit: what a silent data corruption does to one replica. The
  // digests computed ahead (state_digests) no longer describe the parameters.
  void flip_bit(Rank& r, int bit = 20) {
    backend_->sync();
    std::uint32_t bits = 0;
    std::memcpy(&bits, r.params.data(), sizeof bits);
    bits ^= std::uint32_t{1} << bit;
    std::memcpy(r.params.data(), &bits, sizeof bits);
    r.state_digests.step = -1;
  }

  void run_step(Rank& r, std::int64_t step) {
    const auto started = Clock::now();
    r.planted.begin_step(step);
    if (config_.flip_bit && config_.flip_bit->rank == r.rank && config_.flip_bit->step == step) {
      flip_bit(r);
    }
    fill_batch(corpus_, config_.shape, r.rank, r.data_position, r.model.inputs(),
               r.model.targets());
    dtrace::Recorder* rec = isolation_.active() ? nullptr : r.trace.recorder();
    if (rec != nullptr) {
      Trace::RecordTimer timer(r.trace);
      rec->begin_step(step);
      record_state(r, step);
    }
    const float loss = r.model.forward_backward(r.trace, r.planted, r.rng, r.params, r.grads);
    const std::vector<std::int64_t> flat{static_cast<std::int64_t>(layout_.total)};
    {
      auto comm = r.trace.scope("comm");
      const std::vector<Arg> ins{arg("grads", r.grads.data(), flat)};
      const std::vector<Arg> outs{arg("grads", r.reduced.data(), flat)};
      Chaos* arrival = config_.planted.has(Planted::allreduce_arrival) ? &r.planted.chaos : nullptr;
      r.trace.layer("grad_allreduce", ins, outs, [&] {
        r.trace.kernel("allreduce", ins, outs, [&] {
          if (collective_) {
            collective_->allreduce_mean(r.grads.data(), r.reduced.data(), layout_.total);
          } else if (backend_->device_resident() && config_.ranks == 1) {
            // A world of one on the device: no trip through host memory.
            backend_->copy(r.grads.data(), layout_.total, r.reduced.data());
          } else {
            comm_.allreduce_mean(r.rank - first_rank(), r.grads.data(), r.reduced.data(),
                                 layout_.total, arrival);
          }
        });
      });
    }
    if (rec != nullptr) {
      Trace::RecordTimer timer(r.trace);
      auto scope = r.trace.scope("step");
      r.trace.record(Level::step, "grads", RecordIo::out, per_param(r.reduced));
    }
    optimizer_step(r, step, flat);
    backend_->sync();  // the host reads the gradient norm and writes the next batch
    if (!isolation_.active()) {
      r.data_position += static_cast<std::int64_t>(config_.ranks) * config_.shape.batch;
      if (step >= first_recorded_) losses_[static_cast<std::size_t>(r.rank)].push_back(loss);
    }
    if (rec != nullptr) {
      {
        Trace::RecordTimer timer(r.trace);
        auto scope = r.trace.scope("step");
        rec->scalar(Level::step, "loss", RecordIo::metric, "loss", "f32",
                    std::bit_cast<std::uint32_t>(loss), loss);
        const float norm = r.grad_norm.data[0];
        rec->scalar(Level::step, "grad_norm", RecordIo::metric, "grad_norm", "f32",
                    std::bit_cast<std::uint32_t>(norm), norm);
      }
      // Timing records (never compared): the step so far, and the part of it
      // spent recording. The end_step() flush after them counts in the totals.
      {
        auto scope = r.trace.scope("step");
        const double step_seconds = seconds_since(started);
        const double record_seconds = r.trace.take_record_seconds();
        rec->scalar(Level::step, "time", RecordIo::timing, "step_seconds", "f64",
                    std::bit_cast<std::uint64_t>(step_seconds), step_seconds);
        rec->scalar(Level::step, "time", RecordIo::timing, "record_seconds", "f64",
                    std::bit_cast<std::uint64_t>(record_seconds), record_seconds);
        r.total_record_seconds += record_seconds;
      }
      const auto flush = Clock::now();
      rec->end_step();
      r.total_record_seconds += seconds_since(flush);
    }
    if (step >= first_recorded_ && !isolation_.active()) {
      r.total_step_seconds += seconds_since(started);
      ++r.timed_steps;
    }
    if (config_.step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(config_.step_delay_ms));
  }

  void optimizer_step(Rank& r, std::int64_t step, const std::vector<std::int64_t>& flat) {
    const std::vector<Arg> state{
        arg("params", r.params.data(), flat), arg("adam_m", r.adam_m.data(), flat),
        arg("adam_v", r.adam_v.data(), flat), arg("adam_step", r.adam_step)};
    std::vector<Arg> ins = state;
    ins.insert(ins.begin() + 1, arg("grads", r.reduced.data(), flat));
    std::vector<Arg> outs = state;
    outs.push_back(arg("grad_norm", r.grad_norm));
    r.trace.layer("opt", ins, outs, [&] {
      r.trace.kernel("grad_norm", {arg("grads", r.reduced.data(), flat)},
                     {arg("norm", r.grad_norm)}, [&] {
                       backend_->grad_norm(r.reduced.data(), layout_.total, r.grad_norm.p());
                     });
      std::vector<Arg> adam_ins = ins;
      adam_ins.push_back(arg("grad_norm", r.grad_norm));
      // The next step's state records, when it will be recorded here and the
      // tensors are in host memory (a device backend fingerprints them in one
      // batch on the device instead).
      const bool ahead = !isolation_.active() && r.trace.recorder() != nullptr &&
                         step + 1 < end_ && !backend_->device_resident();
      const bool pinned = r.trace.kernel("adamw", adam_ins, state, [&] {
        auto& d = r.state_digests;
        if (ahead) {
          d.params.resize(layout_.params.size());
          d.adam_m.resize(layout_.params.size());
          d.adam_v.resize(layout_.params.size());
        }
        for (std::size_t i = 0; i < layout_.params.size(); ++i) {
          const ParamInfo& p = layout_.params[i];
          backend_->adamw(config_.adamw, r.params.data(), r.reduced.data(), r.adam_m.data(),
                          r.adam_v.data(), p.offset, p.offset + p.size, p.decay, r.adam_step,
                          r.grad_norm.p());
          if (ahead) {
            Trace::RecordTimer timer(r.trace);
            const std::size_t bytes = p.size * sizeof(float);
            d.params[i] = dtrace::host_fingerprint(r.params.data() + p.offset, bytes);
            d.adam_m[i] = dtrace::host_fingerprint(r.adam_m.data() + p.offset, bytes);
            d.adam_v[i] = dtrace::host_fingerprint(r.adam_v.data() + p.offset, bytes);
          }
        }
        ++r.adam_step;
        d.step = ahead ? step + 1 : -1;
      });
      // A pinned output replaced what the digests describe: the next step's
      // state records hash the pinned bytes themselves.
      if (pinned) r.state_digests.step = -1;
    });
  }

  Config config_;
  dtrace::ReplayRequest request_;
  Isolation isolation_;
  Layout layout_;
  Comm comm_;
  Backend* backend_;
  std::unique_ptr<Collective> collective_;  // processes of a multi-process job only
  std::uint64_t chaos_base_;
  std::string corpus_;
  dtrace::RunOptions options_;
  TrainState start_;
  KeptState* kept_ = nullptr;  // a session's step replay: the state kept in memory
  bool keep_ = false;          // this replay restores it and keeps it there
  std::int64_t first_recorded_ = 0;
  std::int64_t end_ = 0;
  std::int64_t resolved_resume_ = 0;
  std::vector<const Xoshiro*> rngs_;
  std::vector<std::vector<float>> losses_;
  std::mutex mutex_;
  std::exception_ptr error_;
  int isolated_runs_ = 0;
  std::int64_t timed_steps_ = 0;  // rank 0's
  double step_seconds_ = 0.0;
  double record_seconds_ = 0.0;
};

}  // namespace

RunResult run(const Config& config, const std::string& executable,
              const dtrace::ReplayRequest& request,
              const std::vector<std::pair<std::string, std::string>>& env, KeptState* kept,
              bool first_step_request) {
  Session session(config, executable, request, env, kept, first_step_request);
  return session.run();
}

}  // namespace minitrain
