#include "diff/diff.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "log/writer.hpp"
#include "support.hpp"

using dtrace::diff::diff_runs;
using dtrace::diff::Kind;
using dtrace::diff::Report;
using dtrace::diff::Role;
using dtrace::diff::ulp_distance;
using dtrace::log::Digest;
using dtrace::log::Io;
using dtrace::log::Record;
using dtrace::test::TempDir;

namespace {

Digest bits(std::uint64_t value, std::uint8_t digits) { return Digest::from_u64(value, digits); }

// ---- runs written with log::Writer ------------------------------------------

const std::int64_t kShapeX[] = {4, 8};
const std::int64_t kShapeY[] = {4, 16};
const std::int64_t kShapeY2[] = {4, 32};
const std::int64_t kShapeGrad[] = {64};

Record tensor(const char* scope, const char* op, Io io, const char* name, const char* dtype,
              std::span<const std::int64_t> shape, std::uint64_t hash) {
  Record r;
  r.scope = scope;
  r.op = op;
  r.io = io;
  r.io_text = dtrace::log::io_name(io);
  r.name = name;
  r.dtype = dtype;
  r.shape = shape;
  r.has_shape = true;
  r.digest = bits(hash, 16);
  return r;
}

Record scalar(const char* scope, const char* op, Io io, const char* name, std::uint32_t f32_bits) {
  Record r;
  r.scope = scope;
  r.op = op;
  r.io = io;
  r.io_text = dtrace::log::io_name(io);
  r.name = name;
  r.dtype = "f32";
  r.scalar = true;
  r.digest = bits(f32_bits, 8);
  return r;
}

std::uint64_t h(int rank, std::int64_t step, int what) {
  return 0x5eed000000000000ull | (std::uint64_t(rank) << 32) | (std::uint64_t(step) << 16) |
         std::uint64_t(what);
}

// Positions in a standard step (and their seq).
enum : std::size_t { kX = 0, kY = 1, kGradIn = 2, kGradOut = 3, kLoss = 4 };

// One rank's records at one step, as in testdata/diff: gemm_fc1 in x / out y,
// the gradient allreduce in / out (the same on every rank), the loss.
std::vector<Record> standard_step(int rank, std::int64_t step) {
  return {
      tensor("fwd/layer.0/mlp", "gemm_fc1", Io::in, "x", "bf16", kShapeX, h(rank, step, 0)),
      tensor("fwd/layer.0/mlp", "gemm_fc1", Io::out, "y", "bf16", kShapeY, h(rank, step, 1)),
      tensor("comm/grad_allreduce", "all_reduce", Io::in, "grad", "f32", kShapeGrad, h(rank, step, 2)),
      tensor("comm/grad_allreduce", "all_reduce", Io::out, "grad", "f32", kShapeGrad, h(99, step, 3)),
      scalar("step", "loss", Io::metric, "loss", 0x40200000u + static_cast<std::uint32_t>(step)),
  };
}

struct RunSpec {
  int world_size = 2;
  std::string hash = "xxh3-64k/1";
  std::map<std::pair<int, std::int64_t>, std::vector<Record>> steps;  // (rank, step): records
  std::set<std::pair<int, std::int64_t>> without_end;
  bool one_file = false;  // every rank in run.jsonl, in map order, instead of rank<r>.jsonl
  std::string level = "layer";

  std::vector<Record>& at(int rank, std::int64_t step) { return steps.at({rank, step}); }
  // Marks a record of B as different (a fresh hash, or the next float up).
  void change(int rank, std::int64_t step, std::size_t index) {
    Record& r = at(rank, step).at(index);
    r.digest.low = r.scalar ? r.digest.low + 1 : (r.digest.low ^ 0xbad0000000000000ull);
  }
};

RunSpec standard_run(int world_size, std::int64_t first, std::int64_t last) {
  RunSpec spec;
  spec.world_size = world_size;
  for (int rank = 0; rank < world_size; ++rank) {
    for (std::int64_t step = first; step <= last; ++step) spec.steps[{rank, step}] = standard_step(rank, step);
  }
  return spec;
}

// Writes the run; seq is each record's index within its step.
std::string write_run(const TempDir& dir, const std::string& name, const RunSpec& spec) {
  std::map<std::string, dtrace::log::Writer> writers;
  dtrace::log::Header header;
  header.format = "fp/1";
  header.run = name;
  header.world_size = spec.world_size;
  header.hash = spec.hash;
  header.level = spec.level;
  auto writer_for = [&](int rank) -> dtrace::log::Writer& {
    const std::string file = spec.one_file ? "run.jsonl" : "rank" + std::to_string(rank) + ".jsonl";
    auto it = writers.find(file);
    if (it == writers.end()) {
      auto w = dtrace::log::Writer::create(dir.path(name + "/" + file));
      REQUIRE(w.ok());
      it = writers.emplace(file, std::move(*w)).first;
      it->second.header(header);
    }
    return it->second;
  };
  for (const auto& [key, records] : spec.steps) {
    auto& w = writer_for(key.first);
    for (std::size_t i = 0; i < records.size(); ++i) {
      Record r = records[i];
      r.rank = key.first;
      r.step = key.second;
      r.seq = static_cast<std::int64_t>(i);
      w.record(r);
    }
    if (!spec.without_end.contains(key)) w.end_step(key.first, key.second, static_cast<std::int64_t>(records.size()));
  }
  for (auto& [file, w] : writers) REQUIRE(w.flush().ok());
  return dir.root() + "/" + name;
}

Report diff(const TempDir& dir, const RunSpec& a, const RunSpec& b) {
  auto report = diff_runs(write_run(dir, "a", a), write_run(dir, "b", b));
  INFO((report ? std::string() : report.error().message));
  REQUIRE(report.ok());
  return std::move(*report);
}

std::string diff_error(const TempDir& dir, const RunSpec& a, const RunSpec& b) {
  auto report = diff_runs(write_run(dir, "a", a), write_run(dir, "b", b));
  REQUIRE_FALSE(report.ok());
  return report.error().message;
}

bool has_note(const Report& r, const std::string& text) {
  for (const auto& n : r.notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

std::map<int, Role> roles(const Report& r) {
  std::map<int, Role> out;
  for (const auto& m : r.ranks) out[m.rank] = m.role;
  return out;
}

}  // namespace

// ---- ulp_distance -------------------------------------------------------------

TEST_CASE("ulp distance of f32 bit patterns", "[diff][ulp]") {
  CHECK(ulp_distance(bits(0x3f800000, 8), bits(0x3f800000, 8)) == 0u);
  CHECK(ulp_distance(bits(0x3f800000, 8), bits(0x3f800001, 8)) == 1u);
  CHECK(ulp_distance(bits(0x3f800001, 8), bits(0x3f800000, 8)) == 1u);
  CHECK(ulp_distance(bits(0x3f800000, 8), bits(0x3f800010, 8)) == 16u);
  // Across an exponent boundary the bit patterns stay neighbours.
  CHECK(ulp_distance(bits(0x3f7fffff, 8), bits(0x3f800000, 8)) == 1u);
  // -0.0 and +0.0 are distinct patterns, one unit apart.
  CHECK(ulp_distance(bits(0x00000000, 8), bits(0x80000000, 8)) == 1u);
  // Across zero: the smallest negative and positive subnormals are 3 apart (-d, -0, +0, +d).
  CHECK(ulp_distance(bits(0x80000001, 8), bits(0x00000001, 8)) == 3u);
  CHECK(ulp_distance(bits(0xbf800000, 8), bits(0xbf800001, 8)) == 1u);
  // The largest finite and infinity.
  CHECK(ulp_distance(bits(0x7f7fffff, 8), bits(0x7f800000, 8)) == 1u);
}

TEST_CASE("ulp distance of NaNs is unknown", "[diff][ulp]") {
  CHECK_FALSE(ulp_distance(bits(0x7fc00000, 8), bits(0x7fc00001, 8)).has_value());
  CHECK_FALSE(ulp_distance(bits(0x7fc00000, 8), bits(0x3f800000, 8)).has_value());
  CHECK_FALSE(ulp_distance(bits(0x3f800000, 8), bits(0xffc00000, 8)).has_value());
  CHECK_FALSE(ulp_distance(bits(0x7ff8000000000000ull, 16), bits(0x7ff8000000000001ull, 16)).has_value());
  CHECK_FALSE(ulp_distance(bits(0x7fc0, 4), bits(0x7fc1, 4)).has_value());  // bf16
}

TEST_CASE("ulp distance of f64 and 16-bit patterns", "[diff][ulp]") {
  CHECK(ulp_distance(bits(0x3ff0000000000000ull, 16), bits(0x3ff0000000000001ull, 16)) == 1u);
  CHECK(ulp_distance(bits(0x0000000000000000ull, 16), bits(0x8000000000000000ull, 16)) == 1u);
  CHECK(ulp_distance(bits(0x3f80, 4), bits(0x3f82, 4)) == 2u);
  CHECK(ulp_distance(bits(0x8000, 4), bits(0x0000, 4)) == 1u);
}

TEST_CASE("ulp distance of f16 NaNs is unknown", "[diff][ulp]") {
  // f16 has a 5-bit exponent: 7c01..7fff are NaNs although bf16 reads them as numbers.
  CHECK_FALSE(ulp_distance(bits(0x7e00, 4), bits(0x7e01, 4), "f16").has_value());
  CHECK_FALSE(ulp_distance(bits(0x7c01, 4), bits(0x3c00, 4), "f16").has_value());
  CHECK(ulp_distance(bits(0x7bff, 4), bits(0x7c00, 4), "f16") == 1u);  // max finite, inf
  CHECK(ulp_distance(bits(0x7e00, 4), bits(0x7e01, 4), "bf16") == 1u);  // numbers in bf16
}

TEST_CASE("ulp distance needs patterns of one width", "[diff][ulp]") {
  CHECK_FALSE(ulp_distance(bits(0x3f80, 4), bits(0x3f800000, 8)).has_value());
  CHECK_FALSE(ulp_distance(bits(0x3f, 2), bits(0x3f, 2)).has_value());
}

// ---- diff_runs ------------------------------------------------------------------

TEST_CASE("identical runs", "[diff]") {
  TempDir dir;
  const Report r = diff(dir, standard_run(2, 0, 2), standard_run(2, 0, 2));
  CHECK_FALSE(r.diverged());
  CHECK(r.ranks.empty());
  CHECK(r.compared.first_step == 0);
  CHECK(r.compared.last_step == 2);
  CHECK(r.compared.steps == 3);
  CHECK(r.compared.ranks == 2);
  CHECK(r.compared.records == 30);
  CHECK(r.notes.empty());
  CHECK(r.header_differences.empty());
}

TEST_CASE("an origin at one rank, receivers through the collective", "[diff][roles]") {
  TempDir dir;
  RunSpec b = standard_run(4, 0, 2);
  b.change(2, 1, kY);
  b.change(2, 1, kGradIn);
  for (int rank = 0; rank < 4; ++rank) b.change(rank, 1, kGradOut);
  const Report r = diff(dir, standard_run(4, 0, 2), b);
  REQUIRE(r.first);
  CHECK(r.first->step == 1);
  CHECK(r.first->rank == 2);
  CHECK(r.first->name == "y");
  CHECK(r.first->role == Role::origin);
  CHECK(r.first->kind == Kind::value);
  CHECK(roles(r) == std::map<int, Role>{{0, Role::receiver}, {1, Role::receiver}, {2, Role::origin},
                                        {3, Role::receiver}});
  for (const auto& m : r.ranks) {
    if (m.rank != 2) CHECK(m.op == "all_reduce");
  }
}

TEST_CASE("among origins at one step the lowest rank is first", "[diff][roles]") {
  TempDir dir;
  RunSpec b = standard_run(4, 0, 2);
  for (int rank : {3, 1}) b.change(rank, 1, kY);
  const Report r = diff(dir, standard_run(4, 0, 2), b);
  REQUIRE(r.first);
  CHECK(r.first->rank == 1);
  CHECK(roles(r) == std::map<int, Role>{{1, Role::origin}, {3, Role::origin}});
}

TEST_CASE("the earliest step is first, whatever the roles", "[diff][roles]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 3);
  b.change(1, 1, kX);  // a receiver at step 1
  b.change(0, 2, kY);  // an origin at step 2
  const Report r = diff(dir, standard_run(2, 0, 3), b);
  REQUIRE(r.first);
  CHECK(r.first->step == 1);
  CHECK(r.first->rank == 1);
  CHECK(r.first->role == Role::receiver);
  CHECK(r.ranks.size() == 2);
}

TEST_CASE("an unknown role beats a receiver at the same step", "[diff][roles]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 2);
  b.change(0, 1, kX);     // rank 0: an input differs: receiver
  b.change(1, 1, kLoss);  // rank 1: only the loss differs: unknown
  const Report r = diff(dir, standard_run(2, 0, 2), b);
  REQUIRE(r.first);
  CHECK(r.first->rank == 1);
  CHECK(r.first->role == Role::unknown);
  CHECK(r.first->io == "metric");
  CHECK(r.first->ulp == 1u);
  CHECK(roles(r) == std::map<int, Role>{{0, Role::receiver}, {1, Role::unknown}});
}

TEST_CASE("a collective that differs on every rank with matching inputs: origins", "[diff][roles]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 2);
  for (int rank = 0; rank < 2; ++rank) b.change(rank, 1, kGradOut);
  const Report r = diff(dir, standard_run(2, 0, 2), b);
  REQUIRE(r.first);
  CHECK(r.first->rank == 0);
  CHECK(r.first->op == "all_reduce");
  CHECK(roles(r) == std::map<int, Role>{{0, Role::origin}, {1, Role::origin}});
}

TEST_CASE("a differing input to another invocation of the collective does not make a receiver",
          "[diff][roles]") {
  TempDir dir;
  // Two allreduces per step; at step 1 the first one's output differs on both
  // ranks with matching inputs, and rank 1's input to the second one differs.
  auto two_allreduces = [] {
    RunSpec spec = standard_run(2, 0, 2);
    for (auto& [key, records] : spec.steps) {
      records.push_back(tensor("comm/grad_allreduce", "all_reduce", Io::in, "grad", "f32", kShapeGrad,
                               h(key.first, key.second, 7)));
      records.push_back(tensor("comm/grad_allreduce", "all_reduce", Io::out, "grad", "f32", kShapeGrad,
                               h(99, key.second, 8)));
    }
    return spec;
  };
  RunSpec b = two_allreduces();
  for (int rank = 0; rank < 2; ++rank) b.change(rank, 1, kGradOut);
  b.change(1, 1, 5);
  const Report r = diff(dir, two_allreduces(), b);
  REQUIRE(r.first);
  CHECK(r.first->rank == 0);
  CHECK(roles(r) == std::map<int, Role>{{0, Role::origin}, {1, Role::origin}});
}

TEST_CASE("a collective output without own inputs receives another rank's differing input",
          "[diff][roles]") {
  // A broadcast from rank 0: only the root records the input. When the root's
  // input differs, rank 1's output differs because of it: a receiver, not unknown.
  TempDir dir;
  auto broadcasting = [] {
    RunSpec spec = standard_run(2, 0, 2);
    for (auto& [key, records] : spec.steps) {
      std::vector<Record> broadcast;
      if (key.first == 0) {
        broadcast.push_back(tensor("comm/param_broadcast", "broadcast", Io::in, "w", "f32", kShapeGrad,
                                   h(0, key.second, 11)));
      }
      broadcast.push_back(tensor("comm/param_broadcast", "broadcast", Io::out, "w", "f32", kShapeGrad,
                                 h(0, key.second, 11)));
      records.insert(records.begin() + 2, broadcast.begin(), broadcast.end());
    }
    return spec;
  };
  RunSpec b = broadcasting();
  b.change(0, 1, kY);
  b.change(0, 1, 2);  // rank 0's broadcast input
  b.change(0, 1, 3);  // rank 0's broadcast output
  b.change(1, 1, 2);  // rank 1's broadcast output
  const Report r = diff(dir, broadcasting(), b);
  REQUIRE(r.first);
  CHECK(r.first->rank == 0);
  CHECK(r.first->role == Role::origin);
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[1].op == "broadcast");
  CHECK(r.ranks[1].role == Role::receiver);
}

TEST_CASE("a collective output without inputs anywhere stays unknown", "[diff][roles]") {
  TempDir dir;
  auto with_barrier = [] {
    RunSpec spec = standard_run(2, 0, 2);
    for (auto& [key, records] : spec.steps) {
      records.push_back(tensor("comm/sync", "all_gather", Io::out, "flags", "f32", kShapeGrad, h(0, key.second, 12)));
    }
    return spec;
  };
  RunSpec b = with_barrier();
  b.change(1, 2, 5);
  const Report r = diff(dir, with_barrier(), b);
  REQUIRE(r.first);
  CHECK(r.first->op == "all_gather");
  CHECK(r.first->role == Role::unknown);
}

TEST_CASE("an op without recorded inputs gives role unknown", "[diff][roles]") {
  TempDir dir;
  RunSpec a = standard_run(2, 0, 2), b = standard_run(2, 0, 2);
  for (RunSpec* s : {&a, &b}) {
    for (auto& [key, records] : s->steps) {
      records.insert(records.begin() + 2, tensor("fwd/layer.0/mlp", "gelu", Io::out, "h", "bf16", kShapeY,
                                                 h(key.first, key.second, 9)));
    }
  }
  b.change(0, 2, 2);
  const Report r = diff(dir, a, b);
  REQUIRE(r.first);
  CHECK(r.first->op == "gelu");
  CHECK(r.first->role == Role::unknown);
}

TEST_CASE("state records that differ give role unknown", "[diff][roles]") {
  TempDir dir;
  RunSpec a = standard_run(2, 0, 2), b = standard_run(2, 0, 2);
  for (RunSpec* s : {&a, &b}) {
    for (auto& [key, records] : s->steps) {
      records.insert(records.begin(), tensor("opt", "adam", Io::state, "exp_avg", "f32", kShapeGrad,
                                             h(key.first, key.second, 10)));
    }
  }
  b.change(1, 1, 0);
  const Report r = diff(dir, a, b);
  REQUIRE(r.first);
  CHECK(r.first->io == "state");
  CHECK(r.first->role == Role::unknown);
  CHECK(r.first->seq == 0);
}

// A generator nobody seeded (issue 38): the first difference is the state a
// layer draws from, every record before it matching. Nothing recorded computed
// it, so no input "already differed": not a receiver, and the report names
// the generator.
TEST_CASE("a generator's state that differs first is unknown and named, not a receiver", "[diff][roles][generator]") {
  TempDir dir;
  RunSpec a = standard_run(1, 0, 1), b = standard_run(1, 0, 1);
  for (RunSpec* s : {&a, &b}) {
    for (auto& [key, records] : s->steps) {
      records.insert(records.begin() + 1, tensor("fwd/layer.0/mlp", "gemm_fc1", Io::in, "rng", "u64", kShapeGrad,
                                                 h(key.first, key.second, 11)));
    }
  }
  b.change(0, 0, 1);
  const Report r = diff(dir, a, b);
  REQUIRE(r.first);
  CHECK(r.first->name == "rng");
  CHECK(r.first->role == Role::unknown);
  REQUIRE(r.first->generator);
  CHECK(r.first->generator->text() == "fwd/layer.0/mlp gemm_fc1 in rng");
}

TEST_CASE("an input that is not a generator's state stays a receiver, naming none", "[diff][roles][generator]") {
  TempDir dir;
  RunSpec a = standard_run(1, 0, 1), b = standard_run(1, 0, 1);
  b.change(0, 0, kX);
  const Report r = diff(dir, a, b);
  REQUIRE(r.first);
  CHECK(r.first->role == Role::receiver);
  CHECK_FALSE(r.first->generator);
}

// Python's and NumPy's generators are recorded at the end of a step that drew
// from them (op rng, io state): what the draw computed differs first, its
// recorded inputs matching. Not an origin: the generator is named.
TEST_CASE("an output whose inputs match, in a step whose drawn generator differs, names the generator",
          "[diff][roles][generator]") {
  TempDir dir;
  RunSpec a = standard_run(1, 0, 1), b = standard_run(1, 0, 1);
  for (RunSpec* s : {&a, &b}) {
    for (auto& [key, records] : s->steps) {
      records.push_back(tensor("step", "rng", Io::state, "numpy", "i64", kShapeGrad, h(key.first, key.second, 12)));
    }
  }
  b.change(0, 0, kY);
  b.change(0, 0, 5);  // the generator's state at the step's start
  const Report r = diff(dir, a, b);
  REQUIRE(r.first);
  CHECK(r.first->name == "y");
  CHECK(r.first->role == Role::unknown);
  REQUIRE(r.first->generator);
  CHECK(r.first->generator->text() == "step rng state numpy");

  // Its op's input recorded after it (dtrace_torch's param_grad before its
  // grad_output) and differing: still a receiver, the generator named.
  RunSpec late = standard_run(1, 0, 1), late_b;
  for (auto& [key, records] : late.steps) {
    std::swap(records[kX], records[kY]);
    records.push_back(tensor("step", "rng", Io::state, "numpy", "i64", kShapeGrad, h(key.first, key.second, 12)));
  }
  late_b = late;
  late_b.change(0, 0, 0);  // y, first
  late_b.change(0, 0, 1);  // x, its op's input
  late_b.change(0, 0, 5);
  TempDir late_dir;
  const Report l = diff(late_dir, late, late_b);
  REQUIRE(l.first);
  CHECK(l.first->name == "y");
  CHECK(l.first->role == Role::receiver);
  REQUIRE(l.first->generator);
  CHECK(l.first->generator->text() == "step rng state numpy");

  // The same output with the generator alike: its op introduced it.
  RunSpec c = standard_run(1, 0, 1);
  for (auto& [key, records] : c.steps) {
    records.push_back(tensor("step", "rng", Io::state, "numpy", "i64", kShapeGrad, h(key.first, key.second, 12)));
  }
  c.change(0, 0, kY);
  TempDir other;
  const Report o = diff(other, a, c);
  REQUIRE(o.first);
  CHECK(o.first->role == Role::origin);
  CHECK_FALSE(o.first->generator);
}

TEST_CASE("recomputed records are told apart by occurrence", "[diff][occurrence]") {
  TempDir dir;
  auto recomputing = [] {
    RunSpec spec = standard_run(2, 0, 2);
    for (auto& [key, records] : spec.steps) {
      records.insert(records.begin() + 2, records.begin(), records.begin() + 2);  // x, y again
    }
    return spec;
  };
  RunSpec b = recomputing();
  b.change(1, 1, 3);  // the second y
  const Report r = diff(dir, recomputing(), b);
  REQUIRE(r.first);
  CHECK(r.first->rank == 1);
  CHECK(r.first->step == 1);
  CHECK(r.first->seq == 3);
  CHECK(r.first->name == "y");
  CHECK(r.first->occurrence == 1);
  CHECK(r.first->role == Role::origin);
  CHECK(r.compared.records == 42);
}

TEST_CASE("the second invocation's output is a receiver when its own input differs", "[diff][occurrence]") {
  // Output y#1 differs, its input x#1 differs too, but x#1 is recorded in a
  // different invocation than y#0: only the first mismatch in seq order counts,
  // which is x#1 (a receiver); y#0 and x#0 match.
  TempDir dir;
  auto recomputing = [] {
    RunSpec spec = standard_run(2, 0, 2);
    for (auto& [key, records] : spec.steps) records.insert(records.begin() + 2, records.begin(), records.begin() + 2);
    return spec;
  };
  RunSpec b = recomputing();
  b.change(0, 2, 2);
  b.change(0, 2, 3);
  const Report r = diff(dir, recomputing(), b);
  REQUIRE(r.first);
  CHECK(r.first->name == "x");
  CHECK(r.first->occurrence == 1);
  CHECK(r.first->role == Role::receiver);
}

TEST_CASE("the same records in another order are identical", "[diff][align]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 2);
  std::swap(b.at(1, 1)[kLoss], b.at(1, 1)[kX]);
  const Report r = diff(dir, standard_run(2, 0, 2), b);
  CHECK_FALSE(r.diverged());
  CHECK(r.compared.records == 30);
}

TEST_CASE("a record on one side only is a structure mismatch", "[diff][align]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 2);
  b.at(0, 1).erase(b.at(0, 1).begin() + kGradIn);
  Report r = diff(dir, standard_run(2, 0, 2), b);
  REQUIRE(r.first);
  CHECK(r.first->kind == Kind::structure);
  CHECK(r.first->step == 1);
  CHECK(r.first->name == "grad");
  CHECK(r.first->io == "in");
  CHECK(r.first->b.is_null());
  CHECK(r.first->detail == "recorded in A only");

  TempDir dir2;
  r = diff(dir2, b, standard_run(2, 0, 2));
  REQUIRE(r.first);
  CHECK(r.first->a.is_null());
  CHECK(r.first->detail == "recorded in B only");
}

TEST_CASE("a B-only record earlier than A's first mismatch comes first", "[diff][align]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 2);
  b.at(0, 1).insert(b.at(0, 1).begin() + 1,
                    tensor("fwd/layer.0/mlp", "dropout", Io::out, "mask", "bool", kShapeX, 0x1234));
  b.change(0, 1, kLoss + 1);
  const Report r = diff(dir, standard_run(2, 0, 2), b);
  REQUIRE(r.first);
  CHECK(r.first->op == "dropout");
  CHECK(r.first->seq == 1);
}

TEST_CASE("dtype, shape and tensor-vs-scalar changes are structure mismatches", "[diff][align]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 3);
  b.at(0, 1)[kY].shape = kShapeY2;
  b.at(1, 2)[kGradIn].dtype = "bf16";
  Record& loss = b.at(0, 3)[kLoss];
  loss.scalar = false;
  loss.digest = bits(0x0123456789abcdefull, 16);
  const Report r = diff(dir, standard_run(2, 0, 3), b);
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[0].kind == Kind::structure);
  CHECK(r.ranks[0].detail == "shape [4,16] in A, [4,32] in B");
  CHECK(r.ranks[1].kind == Kind::structure);
  CHECK(r.ranks[1].detail == "dtype f32 in A, bf16 in B");
  CHECK_FALSE(r.ranks[1].ulp.has_value());

  TempDir dir2;
  RunSpec c = standard_run(2, 0, 3);
  c.at(0, 3)[kLoss] = loss;
  const Report s = diff(dir2, standard_run(2, 0, 3), c);
  REQUIRE(s.first);
  CHECK(s.first->kind == Kind::structure);
  CHECK(s.first->detail == "a scalar in A, a tensor in B");
}

TEST_CASE("records whose io is not compared are ignored", "[diff][align]") {
  TempDir dir;
  RunSpec a = standard_run(2, 0, 2), b = standard_run(2, 0, 2);
  for (RunSpec* s : {&a, &b}) {
    for (auto& [key, records] : s->steps) {
      Record t = scalar("step", "wall", Io::timing, "ms", s == &a ? 0x41200000u : 0x41300000u);
      records.push_back(t);
    }
  }
  const Report r = diff(dir, a, b);
  CHECK_FALSE(r.diverged());
  CHECK(r.compared.records == 30);
}

TEST_CASE("a scalar mismatch carries its ulp distance", "[diff]") {
  TempDir dir;
  RunSpec a = standard_run(2, 0, 2), b = standard_run(2, 0, 2);
  a.at(1, 2)[kLoss].digest = bits(0x00000000, 8);
  b.at(1, 2)[kLoss].digest = bits(0x80000000, 8);
  Report r = diff(dir, a, b);
  REQUIRE(r.first);
  CHECK(r.first->ulp == 1u);
  CHECK(r.first->a["bits"] == "00000000");
  CHECK(r.first->b["bits"] == "80000000");

  TempDir dir2;
  b.at(1, 2)[kLoss].digest = bits(0x7fc00001, 8);
  a.at(1, 2)[kLoss].digest = bits(0x7fc00000, 8);
  r = diff(dir2, a, b);
  REQUIRE(r.first);
  CHECK(r.first->kind == Kind::value);
  CHECK_FALSE(r.first->ulp.has_value());

  // An f16 NaN (7e00, 7e01) has no ulp distance either, though bf16 would read numbers.
  TempDir dir3;
  for (auto [spec, pattern] : {std::pair{&a, 0x7e00u}, std::pair{&b, 0x7e01u}}) {
    Record& loss = spec->at(1, 2)[kLoss];
    loss.dtype = "f16";
    loss.digest = bits(pattern, 4);
  }
  r = diff(dir3, a, b);
  REQUIRE(r.first);
  CHECK(r.first->a["bits"] == "7e00");
  CHECK_FALSE(r.first->ulp.has_value());
}

TEST_CASE("a resumed run: steps in one run only are noted, not compared", "[diff][steps]") {
  TempDir dir;
  const Report r = diff(dir, standard_run(2, 0, 5), standard_run(2, 3, 5));
  CHECK_FALSE(r.diverged());
  CHECK(r.compared.first_step == 3);
  CHECK(r.compared.last_step == 5);
  CHECK(r.compared.steps == 3);
  CHECK(r.notes == std::vector<std::string>{"steps 0-2 only in run A, not compared (ranks 0-1)"});
}

TEST_CASE("incomplete steps are excluded and noted", "[diff][steps]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 2);
  b.without_end.insert({1, 2});
  b.change(1, 2, kY);  // would diverge, were the step compared
  const Report r = diff(dir, standard_run(2, 0, 2), b);
  CHECK_FALSE(r.diverged());
  CHECK(r.compared.records == 25);
  CHECK(has_note(r, "step 2 incomplete in run B"));
  CHECK_FALSE(has_note(r, "only in run A"));
}

TEST_CASE("a rank in one run only is noted, not compared", "[diff][steps]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 2);
  for (std::int64_t s = 0; s <= 2; ++s) b.steps.erase({1, s});
  const Report r = diff(dir, standard_run(2, 0, 2), b);
  CHECK_FALSE(r.diverged());
  CHECK(r.compared.ranks == 1);
  CHECK(has_note(r, "rank 1 only in run A, not compared"));
}

TEST_CASE("a rank file present twice: the extra records are noted, the steps compared", "[diff][steps]") {
  TempDir dir;
  const std::string a = write_run(dir, "a", standard_run(2, 0, 2));
  std::filesystem::copy_file(a + "/rank0.jsonl", a + "/rank0-copy.jsonl");
  auto report = diff_runs(a, write_run(dir, "b", standard_run(2, 0, 2)));
  REQUIRE(report.ok());
  CHECK_FALSE(report->diverged());
  CHECK(report->compared.records == 30);
  CHECK(report->notes == std::vector<std::string>{
                             "steps 0-2 of run A: records after the step's end record (a file twice?), "
                             "ignored (rank 0)"});
}

TEST_CASE("steps out of order in a file are still paired right", "[diff][steps]") {
  TempDir dir;
  // A's one file holds steps 3-5 before steps 0-2; B is in step order. Reading
  // A's step 4 lets diff decide early that B's step 0 has no partner, which
  // A's step 0 arriving later contradicts: diff must read again, not miss it.
  RunSpec late = standard_run(1, 3, 5), early = standard_run(1, 0, 2);
  late.one_file = early.one_file = true;
  const std::string path_a = write_run(dir, "a", late);
  write_run(dir, "early", early);
  {
    std::ifstream steps_0_to_2(dir.path("early/run.jsonl"));
    std::string header_line;
    std::getline(steps_0_to_2, header_line);
    std::ofstream out(path_a + "/run.jsonl", std::ios::app);
    out << steps_0_to_2.rdbuf();
  }
  RunSpec b = standard_run(1, 0, 5);
  b.change(0, 1, kY);
  auto report = diff_runs(path_a, write_run(dir, "b", b));
  INFO((report ? std::string() : report.error().message));
  REQUIRE(report.ok());
  REQUIRE(report->first);
  CHECK(report->first->step == 1);
  CHECK(report->first->name == "y");
  CHECK(report->compared.steps == 6);
  CHECK(report->compared.records == 30);
  CHECK_FALSE(has_note(*report, "only in run"));
  CHECK(has_note(*report, "out of order"));
}

TEST_CASE("runs that cannot be compared are errors", "[diff][errors]") {
  {
    TempDir dir;
    RunSpec b = standard_run(2, 0, 2);
    b.hash = "sha256/1";
    const std::string e = diff_error(dir, standard_run(2, 0, 2), b);
    CHECK(e.rfind("runs cannot be compared: ", 0) == 0);
    CHECK(e.find("sha256/1") != std::string::npos);
  }
  {
    TempDir dir;
    const std::string e = diff_error(dir, standard_run(2, 0, 2), standard_run(3, 0, 2));
    CHECK(e.rfind("runs cannot be compared: ", 0) == 0);
    CHECK(e.find("world_size 2") != std::string::npos);
  }
  {
    TempDir dir;
    const std::string e = diff_error(dir, standard_run(2, 0, 1), standard_run(2, 2, 3));
    CHECK(e.find("no complete step in common") != std::string::npos);
  }
  {
    TempDir dir;
    RunSpec b = standard_run(2, 0, 1);
    b.without_end = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
    const std::string e = diff_error(dir, standard_run(2, 0, 1), b);
    CHECK(e.find("no complete step in common") != std::string::npos);
  }
}

// ---- runs recorded at different levels ----------------------------------------

// The standard run at kernel level: each rank's step also holds the kernels
// inside the layer (and one more input of gemm_fc1 that only a kernel-level
// recorder sees), which a layer-level run does not write.
RunSpec kernel_level_run(int world_size, std::int64_t first, std::int64_t last) {
  RunSpec spec = standard_run(world_size, first, last);
  spec.level = "kernel";
  for (auto& [key, records] : spec.steps) {
    const std::uint64_t k = h(key.first, key.second, 50);
    records.insert(records.begin() + 1,
                   {tensor("fwd/layer.0/mlp", "gemm_fc1", Io::in, "w", "bf16", kShapeX, k),
                    tensor("fwd/layer.0/mlp", "matmul", Io::in, "x", "bf16", kShapeX, k + 1),
                    tensor("fwd/layer.0/mlp", "matmul", Io::out, "y", "bf16", kShapeY, k + 2),
                    tensor("fwd/layer.0/mlp", "gelu", Io::in, "x", "bf16", kShapeY, k + 2),
                    tensor("fwd/layer.0/mlp", "gelu", Io::out, "y", "bf16", kShapeY, k + 3)});
  }
  return spec;
}

TEST_CASE("the same run at layer and at kernel level is identical", "[diff][levels]") {
  for (bool kernel_first : {false, true}) {
    TempDir dir;
    const RunSpec layer = standard_run(2, 0, 2), kernel = kernel_level_run(2, 0, 2);
    const Report r = kernel_first ? diff(dir, kernel, layer) : diff(dir, layer, kernel);
    CHECK_FALSE(r.diverged());
    CHECK(r.compared.records == 30);  // what the layer-level run holds
    const std::string fine = kernel_first ? "A" : "B", coarse = kernel_first ? "B" : "A";
    CHECK(has_note(r, "run " + fine + " was recorded at level kernel, run " + coarse +
                          " at level layer: only the records both levels write are compared (30 in/out "
                          "records that only " + fine + "'s finer level writes were left out)"));
  }
}

TEST_CASE("runs at different levels diverge on a record both write, with its role", "[diff][levels]") {
  TempDir dir;
  RunSpec kernel = kernel_level_run(2, 0, 2);
  // gemm_fc1's output y (index 6 after the five kernel records): its input x
  // matches, and its input w, which only the kernel level records, is no
  // reason to call it a receiver.
  kernel.change(1, 1, 6);
  const Report r = diff(dir, standard_run(2, 0, 2), kernel);
  REQUIRE(r.first);
  CHECK(r.first->step == 1);
  CHECK(r.first->rank == 1);
  CHECK(r.first->op == "gemm_fc1");
  CHECK(r.first->name == "y");
  CHECK(r.first->kind == Kind::value);
  CHECK(r.first->role == Role::origin);

  TempDir dir2;
  RunSpec kernel2 = kernel_level_run(2, 0, 2);
  kernel2.change(0, 2, kX);  // the layer's input x: a receiver
  const Report r2 = diff(dir2, kernel2, standard_run(2, 0, 2));
  REQUIRE(r2.first);
  CHECK(r2.first->step == 2);
  CHECK(r2.first->name == "x");
  CHECK(r2.first->role == Role::receiver);
}

TEST_CASE("runs at different levels: a record the coarser run writes is still required", "[diff][levels]") {
  TempDir dir;
  RunSpec kernel = kernel_level_run(2, 0, 2);
  kernel.at(0, 1).pop_back();  // the loss, which every level writes
  const Report r = diff(dir, standard_run(2, 0, 2), kernel);
  REQUIRE(r.first);
  CHECK(r.first->step == 1);
  CHECK(r.first->name == "loss");
  CHECK(r.first->kind == Kind::structure);
  CHECK(r.first->detail == "recorded in A only");

  // A state or metric record only the finer run has is no level's privilege.
  TempDir dir2;
  RunSpec kernel2 = kernel_level_run(2, 0, 2);
  kernel2.at(1, 0).push_back(scalar("step", "grad_norm", Io::metric, "grad_norm", 0x3f800000u));
  const Report r2 = diff(dir2, standard_run(2, 0, 2), kernel2);
  REQUIRE(r2.first);
  CHECK(r2.first->name == "grad_norm");
  CHECK(r2.first->detail == "recorded in B only");
}

TEST_CASE("runs at one level: a record on one side only stays a mismatch", "[diff][levels]") {
  TempDir dir;
  RunSpec a = kernel_level_run(2, 0, 2), b = kernel_level_run(2, 0, 2);
  a.at(0, 1).erase(a.at(0, 1).begin() + 2);  // matmul's input x, in B only
  const Report r = diff(dir, a, b);
  REQUIRE(r.first);
  CHECK(r.first->op == "matmul");
  CHECK(r.first->detail == "recorded in B only");
  CHECK_FALSE(has_note(r, "only the records both levels write"));
}

TEST_CASE("header differences", "[diff][header]") {
  TempDir dir;
  const std::string a = write_run(dir, "a", standard_run(1, 0, 0));
  const std::string b = dir.root() + "/b";
  {
    auto w = dtrace::log::Writer::create(dir.path("b/rank0.jsonl"));
    REQUIRE(w.ok());
    w->raw_line(R"({"dtrace":"fp/1","run":"b","world_size":1,"hash":"xxh3-64k/1","level":"kernel",)"
                R"("env":{"NCCL_ALGO":"Tree","EXTRA":"1"},"config":{"model":{"layers":4}}})");
    auto records = standard_step(0, 0);
    for (std::size_t i = 0; i < records.size(); ++i) {
      records[i].seq = static_cast<std::int64_t>(i);
      w->record(records[i]);
    }
    w->end_step(0, 0, 5);
    REQUIRE(w->flush().ok());
  }
  auto r = diff_runs(a, b);
  REQUIRE(r.ok());
  CHECK_FALSE(r->diverged());
  std::map<std::string, std::pair<nlohmann::json, nlohmann::json>> diffs;
  for (const auto& d : r->header_differences) diffs[d.section + ":" + d.key] = {d.a, d.b};
  CHECK(diffs.size() == 4);
  CHECK(diffs["level:"] == std::pair<nlohmann::json, nlohmann::json>{"layer", "kernel"});
  CHECK(diffs["env:NCCL_ALGO"].second == "Tree");
  CHECK(diffs["env:NCCL_ALGO"].first.is_null());  // A has no env at all
  CHECK(diffs["env:EXTRA"].second == "1");
  CHECK(diffs["config:model.layers"].second == 4);
}

// ---- the first divergent step's records (the HTML report's strip) -------------

TEST_CASE("the first divergent step's records, paired and in seq order", "[diff][strip]") {
  TempDir dir;
  RunSpec b = standard_run(4, 0, 2);
  b.change(2, 1, kY);
  b.change(2, 1, kGradIn);
  for (int rank = 0; rank < 4; ++rank) b.change(rank, 1, kGradOut);
  const Report r = diff(dir, standard_run(4, 0, 2), b);
  REQUIRE(r.first);
  REQUIRE(r.first->rank == 2);
  using dtrace::diff::Match;
  REQUIRE(r.first_step.size() == 5);
  std::vector<Match> matches;
  for (std::size_t i = 0; i < r.first_step.size(); ++i) {
    CHECK(r.first_step[i].seq == static_cast<std::int64_t>(i));
    matches.push_back(r.first_step[i].match);
  }
  CHECK(matches == std::vector<Match>{Match::matched, Match::differs, Match::differs, Match::differs, Match::matched});
  CHECK(r.first_step[1].op == "gemm_fc1");
  CHECK(r.first_step[1].name == "y");
  CHECK(r.first_step[1].location.ends_with("rank2.jsonl:9"));  // header, step 0 (5 + end), then seq 0, 1
}

TEST_CASE("the strip names a record on one side only", "[diff][strip]") {
  TempDir dir;
  RunSpec b = standard_run(2, 0, 2);
  b.at(0, 1).insert(b.at(0, 1).begin() + 1,
                    tensor("fwd/layer.0/mlp", "dropout", Io::out, "mask", "bool", kShapeX, 0x1234));
  const Report r = diff(dir, standard_run(2, 0, 2), b);
  REQUIRE(r.first);
  using dtrace::diff::Match;
  REQUIRE(r.first_step.size() == 6);
  CHECK(r.first_step[1].op == "dropout");
  CHECK(r.first_step[1].match == Match::b_only);
  CHECK(r.first_step[1].location.find("b/rank0.jsonl:") != std::string::npos);
  CHECK(r.first_step[0].match == Match::matched);
  CHECK(r.first_step[2].match == Match::matched);  // B's seq 2 is A's seq 1: paired by identity
}

TEST_CASE("identical runs have no strip", "[diff][strip]") {
  TempDir dir;
  const Report r = diff(dir, standard_run(2, 0, 1), standard_run(2, 0, 1));
  CHECK_FALSE(r.first);
  CHECK(r.first_step.empty());
}
