// minitrain's arithmetic: the backward pass is the derivative of the forward
// pass (finite differences through the whole model), and each planted kernel
// computes the same value as its ordered twin while its bits depend on chaos.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "minitrain/comm.hpp"
#include "minitrain/kernels.hpp"
#include "minitrain_support.hpp"
#include "minitrain/model.hpp"
#include "minitrain/trace.hpp"
#include "minitrain/trainer.hpp"

namespace mt = minitrain;
namespace k = minitrain::kernels;

namespace {

using test_support::random_values;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

const std::string kText =
    "When two days begin the same and end differently, go back and find the first hour where they "
    "parted. That is where the reason is. Write it down and watch the tide come in.";

}  // namespace

TEST_CASE("minitrain backward pass matches finite differences of the loss", "[minitrain]") {
  mt::ModelShape shape;
  shape.d_model = 16;
  shape.n_layer = 2;
  shape.n_head = 2;
  shape.seq = 8;
  shape.batch = 2;
  shape.dropout = 0.0f;
  const mt::Layout layout = mt::Layout::of(shape);
  std::vector<float> params;
  mt::init_params(layout, 7, params);
  // Larger weights than the initialization, so every path carries gradient.
  auto extra = random_values(params.size(), 99, 0.2f);
  for (std::size_t i = 0; i < params.size(); ++i) params[i] += extra[i];

  mt::Model model(shape, layout);
  mt::fill_batch(kText, shape, 0, 0, model.inputs(), model.targets());
  mt::Trace trace(nullptr, {}, {});
  mt::PlantedState planted;
  auto loss_and_grads = [&](std::vector<float>& p, std::vector<float>& g) {
    mt::Xoshiro rng = mt::Xoshiro::seeded(1);
    return model.forward_backward(trace, planted, rng, p, g);
  };
  std::vector<float> grads(layout.total);
  loss_and_grads(params, grads);

  std::vector<float> scratch(layout.total);
  const float eps = 1e-2f;
  int checked = 0;
  for (const mt::ParamInfo& p : layout.params) {
    for (std::size_t pick : {std::size_t{0}, p.size / 2, p.size - 1}) {
      const std::size_t i = p.offset + pick;
      const float saved = params[i];
      params[i] = saved + eps;
      const float up = loss_and_grads(params, scratch);
      params[i] = saved - eps;
      const float down = loss_and_grads(params, scratch);
      params[i] = saved;
      const float numeric = (up - down) / (2.0f * eps);
      INFO(p.name << "[" << pick << "] analytic " << grads[i] << " numeric " << numeric);
      CHECK(std::abs(numeric - grads[i]) <= 1e-3f + 0.05f * std::abs(grads[i]));
      ++checked;
    }
  }
  CHECK(checked == 3 * static_cast<int>(layout.params.size()));
}

TEST_CASE("minitrain ordered kernels are bitwise repeatable", "[minitrain]") {
  const int M = 64, K = 96, N = 48;
  auto x = random_values(static_cast<std::size_t>(M) * K, 1);
  auto w = random_values(static_cast<std::size_t>(K) * N, 2);
  std::vector<float> y1(static_cast<std::size_t>(M) * N), y2(y1.size());
  k::gemm(x.data(), w.data(), nullptr, M, K, N, y1.data());
  k::gemm(x.data(), w.data(), nullptr, M, K, N, y2.data());
  CHECK(same_bits(y1, y2));
}

TEST_CASE("minitrain planted kernels: same value, bits from chaos", "[minitrain]") {
  const int M = 128, K = 256, N = 64;
  auto x = random_values(static_cast<std::size_t>(M) * K, 3);
  auto w = random_values(static_cast<std::size_t>(K) * N, 4);
  std::vector<float> ref(static_cast<std::size_t>(M) * N), a(ref.size()), b(ref.size()),
      c(ref.size());
  k::gemm(x.data(), w.data(), nullptr, M, K, N, ref.data());
  mt::Chaos chaos;

  SECTION("splitk") {
    chaos.reset(1);
    k::gemm_splitk(x.data(), w.data(), nullptr, M, K, N, a.data(), chaos);
    chaos.reset(2);
    k::gemm_splitk(x.data(), w.data(), nullptr, M, K, N, b.data(), chaos);
    chaos.reset(1);
    k::gemm_splitk(x.data(), w.data(), nullptr, M, K, N, c.data(), chaos);
    for (std::size_t i = 0; i < ref.size(); ++i) REQUIRE(a[i] == Approx(ref[i]).margin(1e-4));
    CHECK_FALSE(same_bits(a, b));
    CHECK(same_bits(a, c));
  }
  SECTION("autotune's second configuration reduces in another order") {
    k::gemm_interleaved(x.data(), w.data(), nullptr, M, K, N, a.data());
    for (std::size_t i = 0; i < ref.size(); ++i) REQUIRE(a[i] == Approx(ref[i]).margin(1e-4));
    CHECK_FALSE(same_bits(a, ref));
  }
  SECTION("atomic bias grad") {
    std::vector<float> db0(static_cast<std::size_t>(K)), db1(db0.size()), db2(db0.size());
    k::bias_grad(x.data(), M, K, db0.data());
    chaos.reset(1);
    k::bias_grad_unordered(x.data(), M, K, db1.data(), chaos);
    chaos.reset(2);
    k::bias_grad_unordered(x.data(), M, K, db2.data(), chaos);
    for (std::size_t i = 0; i < db0.size(); ++i) REQUIRE(db1[i] == Approx(db0[i]).margin(1e-4));
    CHECK_FALSE(same_bits(db1, db2));
  }
  SECTION("uninit pad: differences unrelated to magnitude") {
    std::vector<float> db0(static_cast<std::size_t>(K)), db1(db0.size());
    k::bias_grad(x.data(), M, K, db0.data());
    chaos.reset(5);
    k::bias_grad_padded(x.data(), M, K, db1.data(), chaos);
    int wild = 0;
    for (std::size_t i = 0; i < db0.size(); ++i) {
      if (!std::isfinite(db1[i]) || std::abs(db1[i] - db0[i]) > 1e3f) ++wild;
    }
    CHECK(wild > 0);
    CHECK_FALSE(same_bits(db0, db1));
  }
  SECTION("fused cross-entropy") {
    const int V = 256;
    auto logits = random_values(static_cast<std::size_t>(M) * V, 6, 3.0f);
    std::vector<std::int32_t> targets(static_cast<std::size_t>(M));
    for (int i = 0; i < M; ++i) targets[static_cast<std::size_t>(i)] = (i * 37) % V;
    std::vector<float> t0(static_cast<std::size_t>(M)), t1(t0.size()), t2(t0.size());
    const float l0 = k::cross_entropy(logits.data(), targets.data(), M, V, t0.data());
    chaos.reset(1);
    const float l1 =
        k::cross_entropy_unordered(logits.data(), targets.data(), M, V, t1.data(), chaos);
    chaos.reset(2);
    const float l2 =
        k::cross_entropy_unordered(logits.data(), targets.data(), M, V, t2.data(), chaos);
    CHECK(l1 == Approx(l0).epsilon(1e-5));
    for (std::size_t i = 0; i < t0.size(); ++i) REQUIRE(t1[i] == Approx(t0[i]).epsilon(1e-5));
    CHECK(std::bit_cast<std::uint32_t>(l1) != std::bit_cast<std::uint32_t>(l2));
    CHECK_FALSE(same_bits(t1, t2));
  }
}

TEST_CASE("minitrain all-reduce: ring order is fixed, arrival order is not", "[minitrain]") {
  const int R = 4;
  const std::size_t n = 4096;
  std::vector<std::vector<float>> in;
  for (int r = 0; r < R; ++r)
    in.push_back(random_values(n, 10 + static_cast<std::uint64_t>(r), 1e3f));
  auto reduce = [&](std::optional<std::uint64_t> chaos_key) {
    mt::Comm comm(R);
    std::vector<std::vector<float>> out(R, std::vector<float>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < R; ++r) {
      threads.emplace_back([&, r] {
        mt::Chaos chaos;
        if (chaos_key) chaos.reset(*chaos_key);
        comm.allreduce_mean(r, in[static_cast<std::size_t>(r)].data(),
                            out[static_cast<std::size_t>(r)].data(), n,
                            chaos_key ? &chaos : nullptr);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 1; r < R; ++r) REQUIRE(same_bits(out[0], out[static_cast<std::size_t>(r)]));
    return out[0];
  };
  const auto ring1 = reduce(std::nullopt);
  const auto ring2 = reduce(std::nullopt);
  CHECK(same_bits(ring1, ring2));
  for (std::size_t i = 0; i < n; i += 97) {
    float sum = 0;
    for (int r = 0; r < R; ++r) sum += in[static_cast<std::size_t>(r)][i];
    REQUIRE(ring1[i] == Approx(sum / R).margin(1e-2));
  }
  CHECK_FALSE(same_bits(reduce(1), reduce(2)));
}
