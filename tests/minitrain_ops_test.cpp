// The CPU proof of minitrain's GPU kernels. First the per-output bodies of
// cuda/minitrain_ops.cuh over every index of every op, against the bits of
// tools/minitrain/kernels.cpp (where a planted CPU kernel draws an order from
// chaos, the test draws the same order and combines the bodies' partial
// results in it: the pieces the GPU combines by atomics). Then the CUDA
// backend's own class, OpsBackend, with a loop for a launch: the extents,
// thread mapping and arguments of every op, training the model to the CPU
// backend's bits.
#include "cuda/minitrain_ops.cuh"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "minitrain/backend.hpp"
#include "minitrain/chaos.hpp"
#include "minitrain/kernels.hpp"
#include "minitrain_support.hpp"
#include "minitrain/model.hpp"
#include "minitrain/ops_backend.hpp"
#include "minitrain/trace.hpp"
#include "minitrain/trainer.hpp"

namespace mt = minitrain;
namespace k = minitrain::kernels;
namespace ops = minitrain::ops;

namespace {

using test_support::random_values;

std::vector<std::int32_t> random_tokens(std::size_t n, int V, std::uint64_t seed) {
  mt::Xoshiro rng = mt::Xoshiro::seeded(seed);
  std::vector<std::int32_t> v(n);
  for (auto& t : v) t = static_cast<std::int32_t>(rng.next() % static_cast<std::uint64_t>(V));
  return v;
}

// Index of the first element whose bits differ, or -1.
long first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]))
      return static_cast<long>(i);
  return -1;
}

// Small but not square, heads of 8, a vocabulary that is not a multiple of the
// fused-ce chunk, enough rows for the uninit-pad tile.
constexpr int B = 3, T = 7, H = 2, D = 16, F = 4 * D, V = 80, M = B * T;

}  // namespace

TEST_CASE("GPU bodies: embedding and its gradient give the CPU's bits", "[minitrain][ops]") {
  const auto tokens = random_tokens(M, V, 1);
  const auto tok = random_values(static_cast<std::size_t>(V) * D, 2);
  const auto pos = random_values(static_cast<std::size_t>(T) * D, 3);
  std::vector<float> ref(static_cast<std::size_t>(M) * D), got(ref.size());
  k::embedding(tokens.data(), tok.data(), pos.data(), B, T, D, ref.data());
  for (std::size_t i = 0; i < got.size(); ++i)
    got[i] = ops::embedding_at(tokens.data(), tok.data(), pos.data(), T, D, i);
  CHECK(first_difference(ref, got) == -1);

  const auto dx = random_values(static_cast<std::size_t>(M) * D, 4);
  std::vector<float> ref_tok(tok.size()), ref_pos(pos.size()), got_tok(tok.size()),
      got_pos(pos.size());
  k::embedding_grad(dx.data(), tokens.data(), B, T, D, V, ref_tok.data(), ref_pos.data());
  for (int v = 0; v < V; ++v)
    for (int d = 0; d < D; ++d)
      got_tok[static_cast<std::size_t>(v) * D + d] =
          ops::embedding_grad_tok_at(dx.data(), tokens.data(), M, D, v, d);
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < D; ++d)
      got_pos[static_cast<std::size_t>(t) * D + d] =
          ops::embedding_grad_pos_at(dx.data(), B, T, D, t, d);
  CHECK(first_difference(ref_tok, got_tok) == -1);
  CHECK(first_difference(ref_pos, got_pos) == -1);
}

TEST_CASE("GPU bodies: layernorm and its gradient give the CPU's bits", "[minitrain][ops]") {
  const auto x = random_values(static_cast<std::size_t>(M) * D, 5, 3.0f);
  const auto g = random_values(D, 6), b = random_values(D, 7);
  std::vector<float> y(x.size()), mean(M), rstd(M), y2(x.size()), mean2(M), rstd2(M);
  k::layernorm(x.data(), g.data(), b.data(), M, D, y.data(), mean.data(), rstd.data());
  for (int i = 0; i < M; ++i)
    ops::layernorm_row(x.data(), g.data(), b.data(), D, i, y2.data(), mean2.data(), rstd2.data());
  CHECK(first_difference(y, y2) == -1);
  CHECK(first_difference(mean, mean2) == -1);
  CHECK(first_difference(rstd, rstd2) == -1);

  const auto dy = random_values(x.size(), 8);
  std::vector<float> dx(x.size()), dg(D), db(D), dx2(x.size()), dg2(D), db2(D);
  k::layernorm_grad(dy.data(), x.data(), mean.data(), rstd.data(), g.data(), M, D, dx.data(),
                    dg.data(), db.data());
  for (int i = 0; i < M; ++i)
    ops::layernorm_grad_row(dy.data(), x.data(), mean.data(), rstd.data(), g.data(), D, i,
                            dx2.data());
  for (int d = 0; d < D; ++d)
    ops::layernorm_grad_param_at(dy.data(), x.data(), mean.data(), rstd.data(), M, D, d, dg2.data(),
                                 db2.data());
  CHECK(first_difference(dx, dx2) == -1);
  CHECK(first_difference(dg, dg2) == -1);
  CHECK(first_difference(db, db2) == -1);
}

TEST_CASE("GPU bodies: the GEMMs and the bias gradient give the CPU's bits", "[minitrain][ops]") {
  const int K = D, N = F;
  const auto x = random_values(static_cast<std::size_t>(M) * K, 9);
  const auto w = random_values(static_cast<std::size_t>(K) * N, 10);
  const auto bias = random_values(N, 11);
  for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
    std::vector<float> ref(static_cast<std::size_t>(M) * N), got(ref.size());
    k::gemm(x.data(), w.data(), b, M, K, N, ref.data());
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        got[static_cast<std::size_t>(i) * N + j] = ops::gemm_at(x.data(), w.data(), b, K, N, i, j);
    CHECK(first_difference(ref, got) == -1);

    k::gemm_interleaved(x.data(), w.data(), b, M, K, N, ref.data());
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        got[static_cast<std::size_t>(i) * N + j] =
            ops::gemm_interleaved_at(x.data(), w.data(), b, K, N, i, j);
    CHECK(first_difference(ref, got) == -1);
  }
  const auto dy = random_values(static_cast<std::size_t>(M) * N, 12);
  std::vector<float> dx(static_cast<std::size_t>(M) * K), dx2(dx.size());
  k::gemm_dx(dy.data(), w.data(), M, K, N, dx.data());
  for (int i = 0; i < M; ++i)
    for (int kk = 0; kk < K; ++kk)
      dx2[static_cast<std::size_t>(i) * K + kk] = ops::gemm_dx_at(dy.data(), w.data(), K, N, i, kk);
  CHECK(first_difference(dx, dx2) == -1);

  std::vector<float> dw(static_cast<std::size_t>(K) * N), dw2(dw.size());
  k::gemm_dw(x.data(), dy.data(), M, K, N, dw.data());
  for (int kk = 0; kk < K; ++kk)
    for (int j = 0; j < N; ++j)
      dw2[static_cast<std::size_t>(kk) * N + j] =
          ops::gemm_dw_at(x.data(), dy.data(), M, K, N, kk, j);
  CHECK(first_difference(dw, dw2) == -1);

  std::vector<float> db(N), db2(N);
  k::bias_grad(dy.data(), M, N, db.data());
  for (int j = 0; j < N; ++j)
    db2[static_cast<std::size_t>(j)] = ops::bias_grad_at(dy.data(), M, N, j);
  CHECK(first_difference(db, db2) == -1);
}

TEST_CASE("GPU bodies: attention forward and backward give the CPU's bits", "[minitrain][ops]") {
  const auto ix = ops::heads(B, T, H, D);
  const std::size_t S = static_cast<std::size_t>(B) * H * T * T;
  const auto qkv = random_values(static_cast<std::size_t>(M) * 3 * D, 13);
  std::vector<float> scores(S), scores2(S);
  k::attn_scores(qkv.data(), B, T, H, D, scores.data());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t)
        for (int u = 0; u < T; ++u)
          scores2[ix.row(b, h, t) + static_cast<std::size_t>(u)] =
              ops::attn_scores_at(qkv.data(), ix, b, h, t, u);
  CHECK(first_difference(scores, scores2) == -1);

  std::vector<float> probs(S), probs2(S);
  k::softmax_causal(scores.data(), B * H * T, T, probs.data());
  for (int r = 0; r < B * H * T; ++r) ops::softmax_causal_row(scores.data(), T, r, probs2.data());
  CHECK(first_difference(probs, probs2) == -1);

  std::vector<float> out(static_cast<std::size_t>(M) * D), out2(out.size());
  k::attn_values(probs.data(), qkv.data(), B, T, H, D, out.data());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int e = 0; e < ix.hd; ++e)
          out2[ix.out(b, t, h) + static_cast<std::size_t>(e)] =
              ops::attn_values_at(probs.data(), qkv.data(), ix, b, t, h, e);
  CHECK(first_difference(out, out2) == -1);

  // attn_values_grad writes d_probs and the v part (q, k zero); attn_scores_grad
  // then the q and k parts.
  const auto d_out = random_values(out.size(), 14);
  std::vector<float> d_probs(S), d_probs2(S), d_qkv(qkv.size()), d_qkv2(qkv.size(), -1.0f);
  k::attn_values_grad(d_out.data(), probs.data(), qkv.data(), B, T, H, D, d_probs.data(),
                      d_qkv.data());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t)
        for (int u = 0; u < T; ++u)
          d_probs2[ix.row(b, h, t) + static_cast<std::size_t>(u)] =
              ops::attn_values_grad_probs_at(d_out.data(), qkv.data(), ix, b, h, t, u);
  for (int b = 0; b < B; ++b)
    for (int u = 0; u < T; ++u)
      for (int h = 0; h < H; ++h)
        for (int e = 0; e < ix.hd; ++e) {
          d_qkv2[ix.q(b, u, h) + static_cast<std::size_t>(e)] = 0.0f;
          d_qkv2[ix.k(b, u, h) + static_cast<std::size_t>(e)] = 0.0f;
          d_qkv2[ix.v(b, u, h) + static_cast<std::size_t>(e)] =
              ops::attn_values_grad_v_at(d_out.data(), probs.data(), ix, b, u, h, e);
        }
  CHECK(first_difference(d_probs, d_probs2) == -1);
  CHECK(first_difference(d_qkv, d_qkv2) == -1);

  std::vector<float> d_scores(S), d_scores2(S);
  k::softmax_grad(probs.data(), d_probs.data(), B * H * T, T, d_scores.data());
  for (int r = 0; r < B * H * T; ++r)
    ops::softmax_grad_row(probs.data(), d_probs.data(), T, r, d_scores2.data());
  CHECK(first_difference(d_scores, d_scores2) == -1);

  k::attn_scores_grad(d_scores.data(), qkv.data(), B, T, H, D, d_qkv.data());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int e = 0; e < ix.hd; ++e) {
          d_qkv2[ix.q(b, t, h) + static_cast<std::size_t>(e)] =
              ops::attn_scores_grad_q_at(d_scores.data(), qkv.data(), ix, b, t, h, e);
          d_qkv2[ix.k(b, t, h) + static_cast<std::size_t>(e)] =
              ops::attn_scores_grad_k_at(d_scores.data(), qkv.data(), ix, b, t, h, e);
        }
  CHECK(first_difference(d_qkv, d_qkv2) == -1);
}

TEST_CASE("GPU bodies: elementwise ops, cross-entropy and AdamW give the CPU's bits",
          "[minitrain][ops]") {
  const std::size_t n = static_cast<std::size_t>(M) * F;
  const auto x = random_values(n, 15, 4.0f), dy = random_values(n, 16);
  std::vector<float> y(n), y2(n);
  k::gelu(x.data(), n, y.data());
  for (std::size_t i = 0; i < n; ++i) y2[i] = ops::gelu_at(x[i]);
  CHECK(first_difference(y, y2) == -1);
  k::gelu_grad(dy.data(), x.data(), n, y.data());
  for (std::size_t i = 0; i < n; ++i) y2[i] = ops::gelu_grad_at(dy[i], x[i]);
  CHECK(first_difference(y, y2) == -1);

  // Dropout: the GPU applies the host-drawn mask with one multiply.
  mt::Xoshiro rng_a = mt::Xoshiro::seeded(3), rng_b = mt::Xoshiro::seeded(3);
  std::vector<float> mask(n), mask2(n);
  k::dropout(x.data(), n, 0.25f, rng_a, y.data(), mask.data());
  const float keep = 1.0f / (1.0f - 0.25f);
  for (std::size_t i = 0; i < n; ++i) {
    mask2[i] = rng_b.uniform() < 0.25f ? 0.0f : keep;
    y2[i] = x[i] * mask2[i];
  }
  CHECK(first_difference(mask, mask2) == -1);
  CHECK(first_difference(y, y2) == -1);

  const auto logits = random_values(static_cast<std::size_t>(M) * V, 17, 5.0f);
  const auto targets = random_tokens(M, V, 18);
  std::vector<float> losses(M), losses2(M);
  const float loss = k::cross_entropy(logits.data(), targets.data(), M, V, losses.data());
  for (int i = 0; i < M; ++i)
    losses2[static_cast<std::size_t>(i)] = ops::token_loss_row(logits.data(), targets.data(), V, i);
  CHECK(first_difference(losses, losses2) == -1);
  CHECK(std::bit_cast<std::uint32_t>(loss) ==
        std::bit_cast<std::uint32_t>(ops::mean_loss(losses2.data(), M)));

  std::vector<float> dl(logits.size()), dl2(logits.size());
  k::cross_entropy_grad(logits.data(), targets.data(), M, V, dl.data());
  for (int i = 0; i < M; ++i)
    ops::cross_entropy_grad_row(logits.data(), targets.data(), M, V, i, dl2.data());
  CHECK(first_difference(dl, dl2) == -1);

  CHECK(std::bit_cast<std::uint32_t>(k::sum_of_squares(x.data(), n)) ==
        std::bit_cast<std::uint32_t>(ops::sum_of_squares(x.data(), n)));
  CHECK(std::bit_cast<std::uint32_t>(ops::sum_of_squares_chunk(x.data(), n, 0)) ==
        std::bit_cast<std::uint32_t>(ops::sum_of_squares(x.data(), ops::kNormChunk)));

  const k::AdamW hp;
  for (const float norm : {0.5f, 3.0f}) {
    for (const bool decay : {false, true}) {
      const std::int64_t step = 4;
      auto p = random_values(n, 19), m = random_values(n, 20), v = random_values(n, 21);
      for (float& e : v) e = std::abs(e);
      auto p2 = p, m2 = m, v2 = v;
      k::adamw(hp, p.data(), dy.data(), m.data(), v.data(), 0, n, decay, step, norm);
      const float t = static_cast<float>(step + 1);
      const ops::AdamWConstants c{hp.lr * std::min(1.0f, t / static_cast<float>(hp.warmup)),
                                  hp.beta1,
                                  hp.beta2,
                                  hp.eps,
                                  hp.weight_decay,
                                  hp.clip,
                                  1.0f - std::pow(hp.beta1, t),
                                  1.0f - std::pow(hp.beta2, t)};
      for (std::size_t i = 0; i < n; ++i)
        ops::adamw_at(c, p2.data(), dy.data(), m2.data(), v2.data(), i, decay, norm);
      CHECK(first_difference(p, p2) == -1);
      CHECK(first_difference(m, m2) == -1);
      CHECK(first_difference(v, v2) == -1);
    }
  }
}

TEST_CASE("GPU bodies: planted partials combined in the CPU's chaos order give its bits",
          "[minitrain][ops]") {
  const int K = F, N = D;
  const auto x = random_values(static_cast<std::size_t>(M) * K, 22);
  const auto w = random_values(static_cast<std::size_t>(K) * N, 23);
  const auto b = random_values(N, 24);

  SECTION("splitk: chunk partials, added in the drawn order after the bias") {
    mt::Chaos chaos_a, chaos_b;
    chaos_a.reset(77);
    chaos_b.reset(77);
    std::vector<float> ref(static_cast<std::size_t>(M) * N), got(ref.size());
    k::gemm_splitk(x.data(), w.data(), b.data(), M, K, N, ref.data(), chaos_a);
    const int chunks = ops::splitk_chunks(K);
    CHECK(chunks == 8);
    std::vector<int> order(static_cast<std::size_t>(chunks));
    for (int i = 0; i < M; ++i) {
      std::iota(order.begin(), order.end(), 0);
      chaos_b.shuffle(std::span<int>(order));
      for (int j = 0; j < N; ++j) {
        float acc = b[static_cast<std::size_t>(j)];
        for (int c : order) acc += ops::gemm_splitk_partial_at(x.data(), w.data(), K, N, i, j, c);
        got[static_cast<std::size_t>(i) * N + j] = acc;
      }
    }
    CHECK(first_difference(ref, got) == -1);
  }

  SECTION("atomic bias gradient: rows added in the drawn order") {
    mt::Chaos chaos_a, chaos_b;
    chaos_a.reset(5);
    chaos_b.reset(5);
    std::vector<float> ref(static_cast<std::size_t>(K)), got(ref.size(), 0.0f);
    k::bias_grad_unordered(x.data(), M, K, ref.data(), chaos_a);
    std::vector<int> rows(M);
    std::iota(rows.begin(), rows.end(), 0);
    chaos_b.shuffle(std::span<int>(rows));
    for (int i : rows)
      for (int j = 0; j < K; ++j)
        got[static_cast<std::size_t>(j)] += x[static_cast<std::size_t>(i) * K + j];
    CHECK(first_difference(ref, got) == -1);
  }

  SECTION("uninit-pad: the padded sum reads every tail row") {
    const int padded = ops::padded_rows(M);
    CHECK(padded == 48);
    std::vector<float> workspace(static_cast<std::size_t>(padded) * K, 0.0f);
    std::copy(x.begin(), x.end(), workspace.begin());
    std::vector<float> ref(static_cast<std::size_t>(K)), got(ref.size());
    k::bias_grad(x.data(), M, K, ref.data());
    for (int j = 0; j < K; ++j)
      got[static_cast<std::size_t>(j)] = ops::bias_grad_at(workspace.data(), padded, K, j);
    // A zero tail adds nothing (the inputs have no -0.0 sums) ...
    CHECK(first_difference(ref, got) == -1);
    // ... and one stale value in it changes the result.
    workspace[static_cast<std::size_t>(padded - 1) * K + 3] = 1e30f;
    CHECK(ops::bias_grad_at(workspace.data(), padded, K, 3) == 1e30f);
  }

  SECTION("fused-ce: chunk statistics merged online in the drawn order") {
    const auto logits = random_values(static_cast<std::size_t>(M) * V, 25, 5.0f);
    const auto targets = random_tokens(M, V, 26);
    mt::Chaos chaos_a, chaos_b;
    chaos_a.reset(9);
    chaos_b.reset(9);
    std::vector<float> ref(M), got(M);
    const float loss =
        k::cross_entropy_unordered(logits.data(), targets.data(), M, V, ref.data(), chaos_a);
    const int chunks = (V + ops::kCeChunk - 1) / ops::kCeChunk;
    std::vector<int> order(static_cast<std::size_t>(chunks));
    for (int i = 0; i < M; ++i) {
      const float* row = logits.data() + static_cast<std::size_t>(i) * V;
      std::iota(order.begin(), order.end(), 0);
      chaos_b.shuffle(std::span<int>(order));
      float running_max = -std::numeric_limits<float>::infinity(), running_sum = 0.0f;
      for (int c : order) {
        float cm = 0, cs = 0;
        ops::ce_chunk_stats(row, V, c, &cm, &cs);
        ops::ce_merge(&running_max, &running_sum, cm, cs);
      }
      got[static_cast<std::size_t>(i)] =
          std::log(running_sum) + running_max - row[targets[static_cast<std::size_t>(i)]];
    }
    CHECK(first_difference(ref, got) == -1);
    std::vector<int> rows(M);
    std::iota(rows.begin(), rows.end(), 0);
    chaos_b.shuffle(std::span<int>(rows));
    float total = 0.0f;
    for (int i : rows) total += got[static_cast<std::size_t>(i)];
    CHECK(std::bit_cast<std::uint32_t>(loss) ==
          std::bit_cast<std::uint32_t>(total / static_cast<float>(M)));
  }
}

// ---- the GPU backend's own code, run by a loop ----

namespace {

// The executor of tests: every thread index in order, one after the other.
struct Sequential {
  template <class F>
  void operator()(std::size_t n, F f) const {
    for (std::size_t i = 0; i < n; ++i) f(i);
  }
  template <class F>
  void spread(std::size_t n, F f) const {
    (*this)(n, f);
  }
};

// OpsBackend<Sequential>: the CUDA backend's class code with a loop for a
// launch; what only a device has is the CPU's (autotune picks as the CPU does,
// uninit-pad's tail is zeros: the sums then equal the ordered kernel's).
class LoopBackend final : public mt::OpsBackend<Sequential> {
 public:
  LoopBackend() : OpsBackend<Sequential>(Sequential{}) {}
  std::string_view name() const override { return "loop"; }
  void bias_grad_padded(const float* dy, int M, int N, float* db, mt::Chaos&) override {
    std::vector<float> workspace(static_cast<std::size_t>(ops::padded_rows(M)) * N, 0.0f);
    std::copy(dy, dy + static_cast<std::size_t>(M) * N, workspace.begin());
    ops::bias_grad(run_, workspace.data(), ops::padded_rows(M), N, db);
  }

 protected:
  int autotune_pick(const float*, const float*, const float*, int, int, int, float*,
                    int cpu_pick) override {
    return cpu_pick;
  }
};

struct Trained {
  std::vector<float> losses, params, grads;
};

// Three training steps of a small model (dropout on, AdamW) on `backend`.
Trained train(mt::Backend& backend, mt::Planted planted) {
  mt::ModelShape shape;
  shape.d_model = 16;
  shape.n_layer = 2;
  shape.n_head = 2;
  shape.seq = 8;
  shape.batch = 3;
  const mt::Layout layout = mt::Layout::of(shape);
  std::vector<float> init;
  mt::init_params(layout, 3, init);
  mt::Floats params(init.begin(), init.end()), grads(layout.total), m(layout.total),
      v(layout.total);
  mt::Tensor norm({1});
  mt::Model model(shape, layout, backend);
  mt::Trace trace(nullptr, {}, {});
  mt::PlantedState state;
  state.planted = planted;
  mt::Xoshiro rng = mt::Xoshiro::seeded(11);
  const std::string text =
      "A model that learns the same thing twice should learn it the same way twice, bit for bit.";
  Trained out;
  for (std::int64_t step = 0; step < 3; ++step) {
    state.begin_step(step);
    mt::fill_batch(text, shape, 0, step * shape.batch, model.inputs(), model.targets());
    out.losses.push_back(model.forward_backward(trace, state, rng, params, grads));
    // The CPU's norm on both sides: the GPU's chunked order differs by design
    // (its own test below), and the rest must stay comparable bit for bit.
    mt::cpu_backend().grad_norm(grads.data(), layout.total, norm.p());
    for (const mt::ParamInfo& p : layout.params)
      backend.adamw({}, params.data(), grads.data(), m.data(), v.data(), p.offset,
                    p.offset + p.size, p.decay, step, norm.p());
    backend.sync();
  }
  out.params.assign(params.begin(), params.end());
  out.grads.assign(grads.begin(), grads.end());
  return out;
}

}  // namespace

TEST_CASE("the GPU backend's code, run by a loop, trains the model to the CPU's bits",
          "[minitrain][ops]") {
  LoopBackend loop;
  // Deterministic ops, and the atomics run in one order (rows, chunks and
  // tokens in index order, which is the ordered kernels' order for the bias
  // gradient and the loss, and splitk's chunks added after the bias).
  for (const mt::Planted planted :
       {mt::Planted::none, mt::Planted::autotune, mt::Planted::atomic_bias_grad,
        mt::Planted::fused_ce, mt::Planted::uninit_pad}) {
    INFO("planted " << mt::planted_name(planted));
    // The CPU's planted kernels draw chaos; compare the GPU code's atomics,
    // run in index order, with the CPU's ordered kernels instead.
    const mt::Planted on_cpu =
        planted == mt::Planted::autotune ? mt::Planted::autotune : mt::Planted::none;
    const Trained cpu = train(mt::cpu_backend(), on_cpu);
    const Trained gpu = train(loop, planted);
    CHECK(first_difference(cpu.losses, gpu.losses) == -1);
    CHECK(first_difference(cpu.grads, gpu.grads) == -1);
    CHECK(first_difference(cpu.params, gpu.params) == -1);
    CHECK(cpu.losses.back() < cpu.losses.front());
  }
}

TEST_CASE("the GPU backend's split-K atomics, in index order, add the chunks after the bias",
          "[minitrain][ops]") {
  LoopBackend loop;
  const int K = 64, N = 16;
  const auto x = random_values(static_cast<std::size_t>(M) * K, 31);
  const auto w = random_values(static_cast<std::size_t>(K) * N, 32);
  const auto b = random_values(N, 33);
  std::vector<float> y(static_cast<std::size_t>(M) * N), ordered(y.size()), want(y.size());
  mt::Chaos unused;
  loop.gemm_splitk(x.data(), w.data(), b.data(), M, K, N, y.data(), unused);
  k::gemm(x.data(), w.data(), b.data(), M, K, N, ordered.data());
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = b[static_cast<std::size_t>(j)];
      for (int c = 0; c < ops::splitk_chunks(K); ++c)
        acc += ops::gemm_splitk_partial_at(x.data(), w.data(), K, N, i, j, c);
      want[static_cast<std::size_t>(i) * N + j] = acc;
    }
  CHECK(first_difference(y, want) == -1);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(std::abs(y[i] - ordered[i]) < 1e-4f);
}

TEST_CASE("the GPU gradient norm: chunks in index order, then the chunks in order",
          "[minitrain][ops]") {
  LoopBackend loop;
  // Not a multiple of the chunk: the last chunk is short.
  const std::size_t n = 3 * ops::kNormChunk + 77;
  const auto g = random_values(n, 41);
  float norm = 0.0f, cpu = 0.0f;
  loop.grad_norm(g.data(), n, &norm);
  mt::cpu_backend().grad_norm(g.data(), n, &cpu);
  float want = 0.0f;
  for (std::size_t c = 0; c < 4; ++c) {
    float chunk = 0.0f;
    for (std::size_t i = c * ops::kNormChunk; i < std::min(n, (c + 1) * ops::kNormChunk); ++i)
      chunk += g[i] * g[i];
    want += chunk;
  }
  CHECK(std::bit_cast<std::uint32_t>(norm) == std::bit_cast<std::uint32_t>(std::sqrt(want)));
  CHECK(std::abs(norm - cpu) <= 1e-5f * cpu);
  // A larger call grows the partials; a smaller one reuses them.
  loop.grad_norm(g.data(), ops::kNormChunk, &norm);
  CHECK(std::bit_cast<std::uint32_t>(norm) ==
        std::bit_cast<std::uint32_t>(std::sqrt(ops::sum_of_squares(g.data(), ops::kNormChunk))));
}
