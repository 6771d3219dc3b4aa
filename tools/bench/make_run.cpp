// make_run: writes a synthetic layer-level run for benchmarks and scale tests,
// through the same log::Writer the recorder uses. Every record's hash is the
// fingerprint of a small deterministic buffer, so two invocations with the same
// arguments write byte-identical runs; --diverge plants one differing record.
// A step is the layers' records (forward, then backward) and a loss;
// --records N keeps only the first N-1 layer records before the loss, the
// shape of a long step-level run (many small steps: per-step cost dominates).
// --chain writes each step's chained digest and the end record's own line
// number in its end record (dtrace-fp(5)), as the recorder does, so that
// `dtrace diff` can search instead of stream. --timing SALT adds a step_seconds
// timing record to each step, its value set by SALT (two salts: two runs of
// one job, which differ there only). --only FIRST:LAST writes the files of
// ranks FIRST to LAST alone (the others' are left to another invocation):
// each rank file depends only on the arguments and its rank, so a large run
// is written by several processes at once, and the files two runs share
// byte for byte can be copied instead of written twice (tools/bench/search.sh).
// --undeclared leaves the header's rank declaration out, as older recorders
// and hand-made logs do: the search diff then does not apply (it needs each
// file held to one declared rank), and the streaming diff reads every file
// (tools/bench/many_files.sh).
//
//   make_run DIR --ranks 8 --steps 100 --layers 24 [--records N] [--diverge STEP:RANK:SEQ] [--chain] [--timing SALT]
//            [--only FIRST:LAST] [--undeclared]
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fingerprint/fingerprint.hpp"
#include "log/chain.hpp"
#include "log/writer.hpp"

namespace {

long arg_value(int& i, int argc, char** argv) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "make_run: %s needs a value\n", argv[i]);
    std::exit(2);
  }
  return std::strtol(argv[++i], nullptr, 10);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_run DIR [--ranks R] [--steps S] [--layers L] [--records N] [--diverge STEP:RANK:SEQ] [--chain] [--timing SALT] [--only FIRST:LAST] [--undeclared]\n");
    return 2;
  }
  std::string dir = argv[1];
  long ranks = 8, steps = 100, layers = 24;
  long records = 0;  // 0: every layer record
  long div_step = -1, div_rank = -1, div_seq = -1;
  bool chain = false;
  bool declared = true;  // --undeclared: no rank in the header
  long timing = -1;  // -1: no timing record; else the run's salt for its step_seconds values
  long only_first = 0, only_last = -1;  // --only: the ranks whose files are written (-1: to the last)
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ranks")) ranks = arg_value(i, argc, argv);
    else if (!std::strcmp(argv[i], "--steps")) steps = arg_value(i, argc, argv);
    else if (!std::strcmp(argv[i], "--layers")) layers = arg_value(i, argc, argv);
    else if (!std::strcmp(argv[i], "--records")) records = arg_value(i, argc, argv);
    else if (!std::strcmp(argv[i], "--chain")) chain = true;
    else if (!std::strcmp(argv[i], "--undeclared")) declared = false;
    else if (!std::strcmp(argv[i], "--timing")) timing = arg_value(i, argc, argv);
    else if (!std::strcmp(argv[i], "--diverge") && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%ld:%ld:%ld", &div_step, &div_rank, &div_seq) != 3) return 2;
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%ld:%ld", &only_first, &only_last) != 2 || only_first < 0 || only_last < only_first) {
        std::fprintf(stderr, "make_run: --only needs FIRST:LAST, 0 <= FIRST <= LAST\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "make_run: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  std::filesystem::create_directories(dir);
  const char* sublayers[] = {"attn", "mlp"};
  const char* phases[] = {"fwd", "bwd"};
  const std::vector<std::int64_t> shape = {8, 1024, 4096};
  const long last_rank = only_last < 0 ? ranks - 1 : std::min(only_last, ranks - 1);
  for (long r = only_first; r <= last_rank; ++r) {
    auto writer = dtrace::log::Writer::create(dir + "/rank" + std::to_string(r) + ".jsonl");
    if (!writer) {
      std::fprintf(stderr, "make_run: %s\n", writer.error().message.c_str());
      return 2;
    }
    dtrace::log::Header h;
    h.run = "bench";  // the same in every run, so identical runs are identical bytes
    h.world_size = ranks;
    h.hash = "xxh3-64k/1";
    h.level = "layer";
    h.env = {{"NCCL_ALGO", "Ring"}, {"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}};
    h.config = {{"layers", layers}, {"generator", "tools/bench/make_run"}};
    // One rank per file, in step order, as the recorder writes.
    if (declared) h.rank = static_cast<std::int32_t>(r);
    writer->header(h);
    dtrace::log::ChainHasher chainer;
    std::uint64_t previous = 0;
    std::int64_t line = 1;  // lines written: the header
    std::string end_line;
    for (long s = 0; s < steps; ++s) {
      std::int64_t seq = 0;
      if (chain) chainer.begin(previous, s);
      std::string scope;
      auto emit = [&](const std::string& sc, const char* op, dtrace::log::Io io, const char* name) {
        if (records > 0 && seq >= records - 1) return;  // room left for the loss only
        std::uint64_t words[3] = {static_cast<std::uint64_t>(s), static_cast<std::uint64_t>(seq),
                                  static_cast<std::uint64_t>(r)};
        if (s == div_step && r == div_rank && seq == div_seq) words[0] ^= 0x5a5a;
        dtrace::log::Record rec;
        rec.step = s;
        rec.rank = static_cast<std::int32_t>(r);
        rec.seq = seq++;
        rec.scope = sc;
        rec.op = op;
        rec.io = io;
        rec.name = name;
        rec.dtype = "bf16";
        rec.shape = shape;
        rec.has_shape = true;
        rec.digest = dtrace::log::Digest::from_u64(dtrace::fingerprint(words, sizeof words));
        writer->record(rec);
        if (chain) chainer.add(rec);
      };
      for (const char* phase : phases) {
        for (long l = 0; l < layers; ++l) {
          const long layer = std::strcmp(phase, "bwd") == 0 ? layers - 1 - l : l;
          for (const char* sub : sublayers) {
            // --records: past the kept records nothing is written, so no scope is built
            // (at step level that was most of the generator's time).
            if (records > 0 && seq >= records - 1) break;
            scope = std::string(phase) + "/layer." + std::to_string(layer) + "/" + sub;
            emit(scope, sub, dtrace::log::Io::in, "x");
            emit(scope, sub, dtrace::log::Io::in, "weight");
            emit(scope, sub, dtrace::log::Io::out, "y");
          }
        }
      }
      dtrace::log::Record loss;
      loss.step = s;
      loss.rank = static_cast<std::int32_t>(r);
      loss.seq = seq++;
      loss.scope = "step";
      loss.op = "loss";
      loss.io = dtrace::log::Io::metric;
      loss.name = "loss";
      loss.dtype = "f32";
      loss.scalar = true;
      loss.digest = dtrace::log::Digest::from_u64(0x3f9e0419, 8);
      loss.value = 1.2345;
      loss.has_value = true;
      writer->record(loss);
      if (timing >= 0) {
        // A wall-clock step time, as minitrain writes it: another value (and
        // often length) in each run with another salt, never compared.
        dtrace::log::Record t = loss;
        t.seq = seq++;
        t.op = "time";
        t.io = dtrace::log::Io::timing;
        t.name = "step_seconds";
        t.dtype = "f64";
        t.value = 0.5 + 1e-6 * static_cast<double>((timing * 7919 + s * 104729 + r) % 100000);
        std::uint64_t bits = 0;
        std::memcpy(&bits, &t.value, sizeof bits);
        t.digest = dtrace::log::Digest::from_u64(bits);
        writer->record(t);
      }
      if (chain) {
        chainer.add(loss);
        previous = chainer.finish();
        end_line.clear();
        line += seq + 1;
        dtrace::log::append_end_line(end_line, static_cast<std::int32_t>(r), s, seq, previous, line);
        if (!end_line.empty() && end_line.back() == '\n') end_line.pop_back();
        writer->raw_line(end_line);
      } else {
        writer->end_step(static_cast<std::int32_t>(r), s, seq);
      }
      if (auto f = writer->flush(); !f) {
        std::fprintf(stderr, "make_run: %s\n", f.error().message.c_str());
        return 2;
      }
    }
  }
  return 0;
}
