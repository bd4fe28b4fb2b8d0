#include "planner/core/flops.hpp"

namespace planner {
namespace {

// Weight matrices of an MLP: two (up, down) for GeLU, three (gate, up, down) for gated units.
std::int64_t mlp_matrices(MlpKind mlp) {
  return mlp == MlpKind::kGelu ? 2 : 3;
}

double mask_factor(AttentionMask mask) {
  return mask == AttentionMask::kCausal ? 0.5 : 1.0;
}

// Megatron-LM's gated_linear_multiplier: a gated MLP has 3/2 the GEMMs of a GeLU one.
constexpr double kGatedLinearMultiplier = 1.5;

}  // namespace

std::int64_t gemm_params_per_token(const ModelSpec& m) {
  const std::int64_t attention = m.hidden * (m.q_dim() + 2 * m.kv_dim()) + m.q_dim() * m.hidden;
  std::int64_t total = m.vocab * m.hidden;
  for (int layer = 0; layer < m.num_layers; ++layer) {
    total += attention;
    if (m.is_moe_layer(layer)) {
      total += m.moe->top_k * mlp_matrices(m.mlp) * m.hidden * m.moe->expert_ffn_hidden +
               m.hidden * m.moe->num_experts;
    } else {
      total += mlp_matrices(m.mlp) * m.hidden * m.ffn_hidden;
    }
  }
  return total;
}

double attention_core_flops_per_token(const ModelSpec& m, std::int64_t seq, AttentionMask mask) {
  // QKᵀ and PV: 2·s·q_dim each per token and layer over the full mask.
  return static_cast<double>(m.num_layers) * 4.0 * static_cast<double>(seq) *
         static_cast<double>(m.q_dim()) * mask_factor(mask);
}

double forward_flops_per_token(const ModelSpec& m, std::int64_t seq, AttentionMask mask) {
  return 2.0 * static_cast<double>(gemm_params_per_token(m)) +
         attention_core_flops_per_token(m, seq, mask);
}

Flops model_flops_per_step(const ModelSpec& m, const TrainingSpec& t) {
  return Flops(3.0 * forward_flops_per_token(m, t.seq_length, AttentionMask::kCausal) *
               static_cast<double>(t.tokens_per_step()));
}

Flops hardware_flops_per_step(const ModelSpec& m, const TrainingSpec& t, Recompute recompute) {
  const double tokens = static_cast<double>(t.tokens_per_step());
  double extra = 0;
  if (recompute == Recompute::kSelective) {
    extra = attention_core_flops_per_token(m, t.seq_length, AttentionMask::kCausal);
  } else if (recompute == Recompute::kFull) {
    // Every layer's forward again; the LM head is not recomputed.
    extra = forward_flops_per_token(m, t.seq_length, AttentionMask::kCausal) -
            2.0 * static_cast<double>(m.vocab * m.hidden);
  }
  return model_flops_per_step(m, t) + Flops(extra * tokens);
}

namespace {

// Megatron's per-step count split into the transformer layers and the logit layer.
struct MegatronTerms {
  double layers = 0;
  double logits = 0;
  double attention_core_forward = 0;
};

MegatronTerms megatron_terms(const ModelSpec& m, std::int64_t batch, std::int64_t seq) {
  // 12 = 3 (forward, dgrad, wgrad) × 2 (FLOPs per multiply-add) × 2 (GEMMs stacked in pairs).
  constexpr double kExpansion = 12.0;
  const double b = static_cast<double>(batch);
  const double s = static_cast<double>(seq);
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.q_dim());
  const double group_ratio = static_cast<double>(m.kv_heads) / static_cast<double>(m.heads);
  const double gated = m.mlp == MlpKind::kGelu ? 1.0 : kGatedLinearMultiplier;
  MegatronTerms t;
  for (int layer = 0; layer < m.num_layers; ++layer) {
    const bool moe = m.is_moe_layer(layer);
    const double ffn = static_cast<double>(moe ? m.moe->expert_ffn_hidden : m.ffn_hidden);
    const double routed = moe ? static_cast<double>(m.moe->top_k) : 1.0;
    t.layers +=
        kExpansion * b * s * (h * q * (1.0 + group_ratio) + s * q + h * ffn * routed * gated);
    t.attention_core_forward += 4.0 * b * s * s * q;
  }
  t.logits = kExpansion * b * s * h * static_cast<double>(m.vocab) / 2.0;
  return t;
}

}  // namespace

Flops megatron_model_flops(const ModelSpec& m, std::int64_t batch, std::int64_t seq) {
  const MegatronTerms t = megatron_terms(m, batch, seq);
  return Flops(t.layers + t.logits);
}

Flops megatron_hardware_flops(const ModelSpec& m, std::int64_t batch, std::int64_t seq,
                              Recompute recompute) {
  const MegatronTerms t = megatron_terms(m, batch, seq);
  switch (recompute) {
    case Recompute::kNone:
      return Flops(t.layers + t.logits);
    case Recompute::kSelective:
      return Flops(t.layers + t.logits + t.attention_core_forward);
    case Recompute::kFull:
      // One more forward of every layer: forward is a third of forward + backward.
      return Flops(t.layers * 4.0 / 3.0 + t.logits);
  }
  return Flops(t.layers + t.logits);
}

Flops megatron_eq3_flops(std::int64_t batch, std::int64_t seq, std::int64_t layers,
                         std::int64_t hidden, std::int64_t vocab) {
  const double b = static_cast<double>(batch);
  const double s = static_cast<double>(seq);
  const double l = static_cast<double>(layers);
  const double h = static_cast<double>(hidden);
  const double v = static_cast<double>(vocab);
  return Flops(96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h)));
}

Flops mosaicml_flops(double params, std::int64_t batch, std::int64_t seq, std::int64_t layers,
                     std::int64_t hidden, bool recompute) {
  // llm-foundry: params_flops_per_seq = 2·N·s, attn_flops_per_seq = L·2·2·(d·s²), times 3
  // (forward + backward) for MFU and 4 for HFU with activation checkpointing.
  const double passes = recompute ? 4.0 : 3.0;
  const double s = static_cast<double>(seq);
  const double per_seq =
      2.0 * params * s + 4.0 * static_cast<double>(layers) * static_cast<double>(hidden) * s * s;
  return Flops(passes * static_cast<double>(batch) * per_seq);
}

double flops_utilization(Flops flops, double step_seconds, std::int64_t gpus, FlopRate peak) {
  return flops.raw() / (step_seconds * static_cast<double>(gpus) * peak.raw());
}

double step_seconds_from_rate(Flops flops, FlopRate per_gpu, std::int64_t gpus) {
  return flops.raw() / (per_gpu.raw() * static_cast<double>(gpus));
}

}  // namespace planner
