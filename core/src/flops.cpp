#include "planner/core/flops.hpp"

#include <algorithm>

namespace planner {
namespace {

// Weight matrices of an MLP: two (up, down) for GeLU and squared ReLU, three (gate, up, down) for
// gated units.
std::int64_t mlp_matrices(MlpKind mlp) {
  return is_gated(mlp) ? 3 : 2;
}

double mask_factor(AttentionMask mask) {
  return mask == AttentionMask::kCausal ? 0.5 : 1.0;
}

// Megatron-LM's gated_linear_multiplier: a gated MLP has 3/2 the GEMMs of a GeLU one.
constexpr double kGatedLinearMultiplier = 1.5;

// GEMM weights of one layer's mixer and MLP that a token touches.
std::int64_t mixer_gemm_params(const ModelSpec& m, Mixer mixer) {
  switch (mixer) {
    case Mixer::kAttention:
      if (m.mla) {
        const std::int64_t h = m.hidden, H = m.heads, qk = m.qk_head_dim();
        const std::int64_t ql = m.mla->q_lora_rank, kvl = m.mla->kv_lora_rank;
        const std::int64_t q = ql > 0 ? h * ql + ql * H * qk : h * H * qk;
        return q + h * (kvl + m.mla->qk_rope_head_dim) +
               kvl * H * (m.mla->qk_nope_head_dim + m.mla->v_head_dim) + m.v_dim() * h;
      }
      return m.hidden * ((m.attention_output_gate ? 2 : 1) * m.q_dim() + 2 * m.kv_dim()) +
             m.q_dim() * m.hidden;
    case Mixer::kMamba:
      return m.hidden * m.mamba->in_proj_dim() + m.mamba->d_inner() * m.hidden;
    case Mixer::kNone:
      return 0;
  }
  return 0;
}

std::int64_t ffn_gemm_params(const ModelSpec& m, FfnKind ffn) {
  switch (ffn) {
    case FfnKind::kDense:
      return mlp_matrices(m.mlp) * m.hidden * m.ffn_hidden;
    case FfnKind::kMoe:
      return m.moe->top_k * mlp_matrices(m.mlp) * m.hidden * m.moe->expert_ffn_hidden +
             m.hidden * m.moe->num_experts + mlp_matrices(m.mlp) * m.hidden * m.moe->shared_ffn() +
             (m.moe->shared_expert_gate ? m.hidden : 0);
    case FfnKind::kNone:
      return 0;
  }
  return 0;
}

std::int64_t layer_gemm_params(const ModelSpec& m, int layer) {
  const LayerKind k = m.layer_kind(layer);
  return mixer_gemm_params(m, k.mixer) + ffn_gemm_params(m, k.ffn);
}

// Keys a query attends to on average in a layer with local window `window` (0: all earlier).
double attended_keys(std::int64_t seq, int window, AttentionMask mask) {
  const double s = static_cast<double>(seq);
  if (window <= 0 || window >= seq) return s * mask_factor(mask);
  const double w = window;
  // Causal: the first w queries see 1..w keys, the others w: (s·w − w²/2) / s (w²/2 with the
  // diagonal counted as half, as for full causal attention).
  return mask == AttentionMask::kCausal ? w - w * w / (2.0 * s) : w;
}

}  // namespace

std::int64_t gemm_params_per_token(const ModelSpec& m) {
  std::int64_t total = m.vocab * m.hidden;
  for (int layer = 0; layer < m.num_layers; ++layer)
    total += layer_gemm_params(m, layer);
  if (m.mtp_layers > 0) {
    // Each module: the projection of [norm(h); norm(embedding)] (2·hidden → hidden), its block
    // and its own pass through the shared LM head.
    total += m.mtp_layers *
             (2 * m.hidden * m.hidden + layer_gemm_params(m, m.num_layers) + m.vocab * m.hidden);
  }
  return total;
}

double attention_core_flops_per_token(const ModelSpec& m, std::int64_t seq, AttentionMask mask) {
  // QKᵀ and PV: 2·keys·(heads × qk_head_dim) and 2·keys·(heads × v_head_dim) per token and
  // layer, keys = s over the full mask.
  const bool mtp_attention =
      m.mtp_layers > 0 && m.layer_kind(m.num_layers).mixer == Mixer::kAttention;
  if (!m.mla && m.sliding_window <= 0 && !m.is_hybrid() && !mtp_attention) {
    return static_cast<double>(m.num_layers) * 4.0 * static_cast<double>(seq) *
           static_cast<double>(m.q_dim()) * mask_factor(mask);
  }
  const double widths = 2.0 * static_cast<double>(static_cast<std::int64_t>(m.heads) *
                                                  (m.qk_head_dim() + m.v_head_dim()));
  double total = 0;
  const int layers = m.num_layers + (mtp_attention ? m.mtp_layers : 0);
  for (int layer = 0; layer < layers; ++layer) {
    if (m.layer_kind(layer).mixer != Mixer::kAttention) continue;
    const int window = layer < m.num_layers ? m.attention_window(layer) : 0;
    total += widths * attended_keys(seq, window, mask);
  }
  return total;
}

namespace {

// One recurrent mixer layer's chunked-scan forward FLOPs per token.
double scan_flops_per_token(const MambaSpec& s, std::int64_t seq) {
  const double q = static_cast<double>(std::min<std::int64_t>(s.chunk, seq));
  const double n = s.state_dim, p = s.head_dim, heads = s.heads, groups = s.groups;
  // SSD per chunk of q tokens (Dao & Gu 2024 §6): C·Bᵀ per group (2·q²·N), its masked product
  // with X per head (2·q²·P), the chunk states Bᵀ·X and the output C·state per head (2·q·N·P
  // each); per token divide by q.
  // The chunked gated delta rule (Yang et al. 2024 §3.3, the fla kernels) per value head, its
  // queries and keys repeated to every value head: K·Kᵀ, the triangular inverse T (counted as a
  // q×q×q product), W = T·K and U = T·V, the state's correction W·S, its update Kᵀ·(U − W·S),
  // Q·Kᵀ and the output Q·S + (Q·Kᵀ)·(U − W·S): 2·(3·q·N + q² + 2·q·P + 3·N·P) per token.
  return s.delta() ? 2.0 * heads * (3.0 * q * n + q * q + 2.0 * q * p + 3.0 * n * p)
                   : 2.0 * q * n * groups + 2.0 * q * p * heads + 4.0 * n * p * heads;
}

}  // namespace

double mamba_core_flops_per_token(const ModelSpec& m, std::int64_t seq) {
  if (!m.mamba) return 0;
  const double per_layer = scan_flops_per_token(*m.mamba, seq);
  int layers = m.mamba_layers();
  if (m.mtp_layers > 0 && m.layer_kind(m.num_layers).mixer == Mixer::kMamba) {
    layers += m.mtp_layers;
  }
  return per_layer * layers;
}

double forward_flops_per_token(const ModelSpec& m, std::int64_t seq, AttentionMask mask) {
  return 2.0 * static_cast<double>(gemm_params_per_token(m)) +
         attention_core_flops_per_token(m, seq, mask) + mamba_core_flops_per_token(m, seq);
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
            2.0 * static_cast<double>(m.vocab * m.hidden) * (1 + m.mtp_layers);
    // Nor are the MTP modules' projections (only transformer layers are recomputed).
    if (m.mtp_layers > 0)
      extra -= 2.0 * static_cast<double>(2 * m.hidden * m.hidden) * m.mtp_layers;
  }
  return model_flops_per_step(m, t) + Flops(extra * tokens);
}

Flops hardware_flops_per_step(const ModelSpec& m, const TrainingSpec& t, const ParallelConfig& p) {
  if (p.recompute != Recompute::kSelective) return hardware_flops_per_step(m, t, p.recompute);
  double extra = 0;  // per token
  if (recomputes(p, RecomputeModule::kCoreAttn)) {
    extra += attention_core_flops_per_token(m, t.seq_length, AttentionMask::kCausal);
  }
  const double h = static_cast<double>(m.hidden);
  const double matrices = static_cast<double>(mlp_matrices(m.mlp));
  for (int layer = 0; layer < m.num_layers + m.mtp_layers; ++layer) {
    const LayerKind k = m.layer_kind(layer);
    if (k.ffn == FfnKind::kDense && recomputes(p, RecomputeModule::kMlp)) {
      extra += 2.0 * static_cast<double>(ffn_gemm_params(m, FfnKind::kDense));
    }
    if (k.ffn == FfnKind::kMoe) {
      if (recomputes(p, RecomputeModule::kMoe)) {
        extra += 2.0 * static_cast<double>(ffn_gemm_params(m, FfnKind::kMoe));
      } else if (recomputes(p, RecomputeModule::kSharedExperts)) {
        extra += 2.0 * (matrices * h * static_cast<double>(m.moe->shared_ffn()) +
                        (m.moe->shared_expert_gate ? h : 0.0));
      }
    }
    if (k.mixer == Mixer::kAttention && m.mla && recomputes(p, RecomputeModule::kMlaUpProj)) {
      const double H = m.heads, qk = static_cast<double>(m.qk_head_dim());
      const double ql = static_cast<double>(m.mla->q_lora_rank);
      const double kvl = static_cast<double>(m.mla->kv_lora_rank);
      extra += 2.0 * ((ql > 0 ? ql : h) * H * qk +
                      kvl * H * static_cast<double>(m.mla->qk_nope_head_dim + m.mla->v_head_dim));
    }
  }
  return model_flops_per_step(m, t) + Flops(extra * static_cast<double>(t.tokens_per_step()));
}

namespace {

// Megatron's per-step count split into the transformer layers and the logit layer.
struct MegatronTerms {
  double layers = 0;
  double logits = 0;
  double attention_core_forward = 0;
};

// Which Megatron-LM num_floating_point_operations(): core_r0.9 counts the full s×s attention
// matrix; later releases (the Megatron-Bridge and NeMo 2 performance tables) count half of it
// (causal), multi-latent attention, shared experts, Mamba layers and the MTP modules.
enum class MegatronEra { kCoreR09, kCore };

MegatronTerms megatron_terms(const ModelSpec& m, std::int64_t batch, std::int64_t seq,
                             MegatronEra era = MegatronEra::kCoreR09) {
  // 12 = 3 (forward, dgrad, wgrad) × 2 (FLOPs per multiply-add) × 2 (GEMMs stacked in pairs).
  constexpr double kExpansion = 12.0;
  const double b = static_cast<double>(batch);
  const double s = static_cast<double>(seq);
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.q_dim());
  const double group_ratio = static_cast<double>(m.kv_heads) / static_cast<double>(m.heads);
  const double gated = is_gated(m.mlp) ? kGatedLinearMultiplier : 1.0;
  const double core = era == MegatronEra::kCore ? 0.5 : 1.0;  // share of the s×s matrix counted
  MegatronTerms t;
  const int mtp = era == MegatronEra::kCore ? m.mtp_layers : 0;
  for (int layer = 0; layer < m.num_layers + mtp; ++layer) {
    const LayerKind kind = m.layer_kind(layer);
    double per_token = 0;  // layer FLOPs per token / 12
    if (kind.mixer == Mixer::kAttention && m.mla) {
      // 6·(q term + kv term + rope key + output + core) in Megatron's MLA branch.
      const MlaSpec& a = *m.mla;
      const double H = m.heads, qk = m.qk_head_dim(), v = a.v_head_dim, ql = a.q_lora_rank;
      const double kvl = a.kv_lora_rank, rope = a.qk_rope_head_dim, nope = a.qk_nope_head_dim;
      const double q_term = ql > 0 ? ql * (h + H * qk + 1.0) : h * H * qk;
      per_token += (q_term + kvl * (h + H * (nope + v) + 1.0) + h * rope + H * v * h +
                    s * H * qk * core + s * H * v * core) /
                   2.0;
      t.attention_core_forward += 2.0 * b * s * s * H * (qk + v);
    } else if (kind.mixer == Mixer::kAttention) {
      per_token += h * q * ((m.attention_output_gate ? 1.5 : 1.0) + group_ratio) + s * q * core;
      t.attention_core_forward += 4.0 * b * s * s * q;
    } else if (kind.mixer == Mixer::kMamba && m.mamba->delta()) {
      // No Megatron formula for Gated DeltaNet: its projections and planner's chunked-scan count
      // (mamba_core_flops_per_token), forward.
      const double d_in = static_cast<double>(m.mamba->d_inner());
      const double in = static_cast<double>(m.mamba->in_proj_dim());
      const double scan = scan_flops_per_token(*m.mamba, static_cast<std::int64_t>(s));
      per_token += (2.0 * h * in + scan + 2.0 * d_in * h) * 3.0 / 12.0;
    } else if (kind.mixer == Mixer::kMamba) {
      // mamba_layer_flops(): in_proj, the scan (7·d_inner·N) and out_proj, forward.
      const double d_in = static_cast<double>(m.mamba->d_inner());
      const double in = static_cast<double>(m.mamba->in_proj_dim());
      per_token += (2.0 * h * in + 7.0 * d_in * m.mamba->state_dim + 2.0 * d_in * h) * 3.0 / 12.0;
    }
    if (kind.ffn == FfnKind::kDense) {
      per_token += h * static_cast<double>(m.ffn_hidden) * 1.0 * gated;
    } else if (kind.ffn == FfnKind::kMoe) {
      per_token += h * static_cast<double>(m.moe->expert_ffn_hidden) *
                       static_cast<double>(m.moe->top_k) * gated +
                   h * static_cast<double>(m.moe->shared_ffn()) * gated;
    }
    t.layers += kExpansion * b * s * per_token;
  }
  // The MTP modules' norms and projection (6·(3h + 2h²) per token), and their logits.
  t.layers += 6.0 * b * s * mtp * (3.0 * h + 2.0 * h * h);
  t.logits = kExpansion * b * s * h * static_cast<double>(m.vocab) / 2.0 * (1 + mtp);
  return t;
}

}  // namespace

Flops megatron_model_flops(const ModelSpec& m, std::int64_t batch, std::int64_t seq) {
  const MegatronTerms t = megatron_terms(m, batch, seq);
  return Flops(t.layers + t.logits);
}

Flops megatron_core_model_flops(const ModelSpec& m, std::int64_t batch, std::int64_t seq) {
  const MegatronTerms t = megatron_terms(m, batch, seq, MegatronEra::kCore);
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
