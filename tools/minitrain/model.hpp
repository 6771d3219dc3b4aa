// The model: a small GPT (byte vocabulary, token + position embeddings, pre-LN
// blocks of causal multi-head attention and a GELU MLP with dropout, final LN,
// LM head, cross-entropy), its flat parameter layout, and its forward and
// backward passes written as layers of named kernels run through a Trace.
//
// Scopes and ops (L = n_layer, l = 0 .. L-1):
//   fwd/embed          embedding
//   fwd/layer.l/attn   layernorm gemm_qkv attn_scores softmax attn_values
//                      gemm_attn_out dropout residual_add
//   fwd/layer.l/mlp    layernorm gemm_fc1 gelu gemm_fc2 dropout residual_add
//   fwd/head           layernorm gemm_lm_head cross_entropy
//   bwd/head           cross_entropy_grad gemm_lm_head_dw gemm_lm_head_dx layernorm_grad
//   bwd/layer.l/mlp    dropout_grad gemm_fc2_dw bias_grad_fc2 gemm_fc2_dx gelu_grad
//                      gemm_fc1_dw bias_grad_fc1 gemm_fc1_dx layernorm_grad residual_grad_add
//   bwd/layer.l/attn   dropout_grad gemm_attn_out_dw bias_grad_attn_out gemm_attn_out_dx
//                      attn_values_grad softmax_grad attn_scores_grad gemm_qkv_dw
//                      bias_grad_qkv gemm_qkv_dx layernorm_grad residual_grad_add
//   bwd/embed          embedding_grad
// (comm/grad_allreduce and opt are the trainer's.) Each op name occurs once per
// scope and step, so a record's identity never needs an occurrence count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "chaos.hpp"
#include "tensor.hpp"
#include "trace.hpp"

namespace minitrain {

struct ModelShape {
  int vocab = 256;
  int d_model = 64;
  int n_layer = 2;
  int n_head = 4;
  int seq = 32;
  int batch = 4;  // sequences per rank per step
  float dropout = 0.1f;

  int d_ff() const { return 4 * d_model; }
  int rows() const { return batch * seq; }
};

// The kinds of nondeterminism `--nondet` plants.
enum class Planted {
  none,
  atomic_bias_grad,
  splitk,
  autotune,
  fused_ce,
  allreduce_arrival,
  resume_rng,
  uninit_pad,
  splitk_second_call,
  splitk_fc1
};
std::optional<Planted> parse_planted(std::string_view name);
std::string_view planted_name(Planted planted);
const std::vector<std::string_view>& planted_names();

// The plants of one run: `--nondet splitk,atomic-bias-grad` plants several
// causes at once (issue 40: a bisect that names every one), each at its own
// site, as it would be alone.
class Plants {
 public:
  Plants() = default;
  // One plant (none: no plant), so that `config.planted = Planted::splitk` reads as before.
  Plants(Planted one) {  // NOLINT(google-explicit-constructor)
    if (one != Planted::none) list_.push_back(one);
  }
  // `--nondet`'s value: names separated by commas, or "none". Throws Error,
  // naming `flag`, for an unknown or empty name, a name given twice, "none"
  // beside another, and plants that cannot go together (two at one op).
  static Plants parse(std::string_view names, std::string_view flag = "--nondet");

  bool has(Planted planted) const;
  bool empty() const { return list_.empty(); }
  // In the order given.
  const std::vector<Planted>& list() const { return list_; }
  // In the order their sites run in a step (the order bisect meets them):
  // the restored state first, then forward, backward, the all-reduce.
  std::vector<Planted> in_step_order() const;
  // As `--nondet` takes it back: "splitk,atomic-bias-grad", or "none".
  std::string names() const;

 private:
  std::vector<Planted> list_;
};

// Where a switch acts: the op and scope of the records of the planted kernel.
struct PlantedSite {
  std::string op;
  std::string scope;
  int occurrence = 0;  // which call of op in scope (splitk-second-call: the second)
  int calls = 1;       // how many calls of op the scope holds
};
PlantedSite planted_site(Planted planted, const ModelShape& shape);
// The name of the dropout RNG state record (what resume-rng fails to restore).
inline constexpr std::string_view kRngStateName = "dropout_rng";

struct ParamInfo {
  std::string name;  // "layer.0.attn.w_qkv"
  std::size_t offset = 0;
  std::size_t size = 0;
  std::vector<std::int64_t> shape;
  bool decay = false;  // weight decay applies (matrices only)
};

struct Layout {
  struct Block {
    int ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_fc1, b_fc1, w_fc2, b_fc2;
  };
  std::vector<ParamInfo> params;
  std::size_t total = 0;
  int tok_emb = 0, pos_emb = 0, lnf_g = 0, lnf_b = 0, w_head = 0;
  std::vector<Block> blocks;

  static Layout of(const ModelShape& shape);
};

// Deterministic initialization from the seed (the same on every rank).
void init_params(const Layout& layout, std::uint64_t seed, std::vector<float>& params);

// Everything planted kernels on one rank draw from.
struct PlantedState {
  Plants planted;
  bool fast_kernels = false;  // --fast-kernels: splitk and atomic-bias-grad in every layer
  std::uint64_t chaos_base = 0;
  int rank = 0;
  Chaos chaos;
  int autotune_pick = -1;  // -1: not tuned yet in this process (or repetition)
  int autotune_generation = 0;

  // Keys the chaos for one step, so a replay of the step draws what the run drew.
  void begin_step(std::int64_t step);
  void begin_repetition(int k);
  // autotune: which of the two lm-head configurations "timed faster" (0 or 1).
  int autotune_config();
};

// One rank's copy of the model: parameters, gradients and activations.
class Model {
 public:
  // Tensors are allocated in the tensor memory `backend` installed; every op runs on it.
  Model(const ModelShape& shape, const Layout& layout, Backend& backend = cpu_backend());

  // Forward and backward of one batch; writes `grads` (this rank's, before any
  // all-reduce) and returns the mean token loss.
  float forward_backward(Trace& trace, PlantedState& planted, Xoshiro& rng,
                         std::span<float> params, std::span<float> grads);

  Tokens& inputs() { return inputs_; }
  Tokens& targets() { return targets_; }

 private:
  struct AttnActs {
    Tensor ln_out, ln_mean, ln_rstd, qkv, scores, probs, attn, proj, mask, drop;
  };
  struct MlpActs {
    Tensor ln_out, ln_mean, ln_rstd, h_pre, h_act, fc2, mask, drop;
  };

  void forward(Trace& trace, PlantedState& planted, Xoshiro& rng, std::span<float> params);
  void backward(Trace& trace, PlantedState& planted, std::span<float> params,
                std::span<float> grads);
  void attn_forward(Trace& trace, PlantedState& planted, Xoshiro& rng, std::span<float> p,
                    int l);
  void mlp_forward(Trace& trace, PlantedState& planted, Xoshiro& rng, std::span<float> p, int l);
  void attn_backward(Trace& trace, PlantedState& planted, std::span<float> p,
                     std::span<float> g, int l);
  void mlp_backward(Trace& trace, PlantedState& planted, std::span<float> p,
                    std::span<float> g, int l);
  Arg param(std::string_view name, std::span<float> flat, int index) const;

  ModelShape shape_;
  Layout layout_;
  Backend* backend_;
  Tokens inputs_, targets_;
  std::vector<Tensor> resid_;    // 2L+1 residual stream states [rows, D]
  std::vector<Tensor> d_resid_;  // their gradients
  std::vector<AttnActs> attn_;
  std::vector<MlpActs> mlp_;
  Tensor lnf_out_, lnf_mean_, lnf_rstd_, logits_, token_loss_, loss_;
  // Backward scratch.
  Tensor d_logits_, d_ln_out_, d_ln_in_, d_proj_, d_attn_, d_qkv_, d_probs_, d_scores_, d_h_act_,
      d_h_pre_;
};

}  // namespace minitrain
