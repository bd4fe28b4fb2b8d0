#include "planner/core/model_spec.hpp"

namespace planner {
namespace {

std::int64_t norm_elements(NormKind norm, std::int64_t hidden) {
  return norm == NormKind::kLayerNorm ? 2 * hidden : hidden;
}

std::int64_t mlp_weight_params(MlpKind mlp, std::int64_t hidden, std::int64_t ffn, bool bias) {
  const bool gated = is_gated(mlp);
  const std::int64_t up = (gated ? 2 : 1) * hidden * ffn + (bias ? (gated ? 2 : 1) * ffn : 0);
  const std::int64_t down = ffn * hidden + (bias ? hidden : 0);
  return up + down;
}

}  // namespace

LayerKind ModelSpec::layer_kind(int layer) const {
  if (layer >= num_layers && num_layers > 0) layer = num_layers - 1;  // MTP blocks
  if (!layer_pattern.empty()) {
    const char c = layer >= 0 && static_cast<std::size_t>(layer) < layer_pattern.size()
                       ? layer_pattern[static_cast<std::size_t>(layer)]
                       : kPatternDense;
    switch (c) {
      case kPatternMamba:
      case kPatternDeltaNet:
        return {Mixer::kMamba, FfnKind::kNone};
      case kPatternAttention:
        return {Mixer::kAttention, FfnKind::kNone};
      case kPatternMoe:
        return {Mixer::kNone, is_moe() ? FfnKind::kMoe : FfnKind::kDense};
      default:
        return {Mixer::kNone, FfnKind::kDense};
    }
  }
  if (!is_moe()) return {Mixer::kAttention, FfnKind::kDense};
  const int freq = moe->layer_freq < 1 ? 1 : moe->layer_freq;
  const bool sparse = layer >= moe->first_dense_layers && (layer + 1) % freq == 0;
  return {Mixer::kAttention, sparse ? FfnKind::kMoe : FfnKind::kDense};
}

bool ModelSpec::is_moe_layer(int layer) const {
  if (!is_moe()) return false;
  return layer_kind(layer).ffn == FfnKind::kMoe;
}

int ModelSpec::moe_layers() const {
  if (!is_moe()) return 0;
  if (layer_pattern.empty() && moe->first_dense_layers == 0) {
    const int freq = moe->layer_freq < 1 ? 1 : moe->layer_freq;
    return num_layers / freq;
  }
  int n = 0;
  for (int l = 0; l < num_layers; ++l)
    n += is_moe_layer(l) ? 1 : 0;
  return n;
}

int ModelSpec::attention_layers() const {
  if (layer_pattern.empty()) return num_layers;
  int n = 0;
  for (int l = 0; l < num_layers; ++l)
    n += layer_kind(l).mixer == Mixer::kAttention ? 1 : 0;
  return n;
}

int ModelSpec::mamba_layers() const {
  int n = 0;
  for (int l = 0; l < num_layers && !layer_pattern.empty(); ++l)
    n += layer_kind(l).mixer == Mixer::kMamba ? 1 : 0;
  return n;
}

int ModelSpec::attention_window(int layer) const {
  if (sliding_window <= 0) return 0;
  if (full_attention_every > 0 && (layer + 1) % full_attention_every == 0) return 0;
  return sliding_window;
}

int ModelSpec::qk_head_dim() const {
  return mla ? mla->qk_nope_head_dim + mla->qk_rope_head_dim : head_dim;
}

int ModelSpec::v_head_dim() const {
  return mla ? mla->v_head_dim : head_dim;
}

std::int64_t ModelSpec::kv_cache_per_token() const {
  if (mla) return static_cast<std::int64_t>(mla->kv_lora_rank) + mla->qk_rope_head_dim;
  return 2 * kv_dim();
}

std::int64_t ModelSpec::norm_params() const {
  return norm_elements(norm, hidden);
}

std::int64_t ModelSpec::attention_params() const {
  if (mla) {
    const std::int64_t h = hidden;
    const std::int64_t H = heads;
    const std::int64_t qk = qk_head_dim();
    const std::int64_t ql = mla->q_lora_rank;
    const std::int64_t kvl = mla->kv_lora_rank;
    const std::int64_t b = bias ? 1 : 0;
    // The latent norms are RMSNorms in every MLA model (q_a_layernorm, kv_a_layernorm).
    const std::int64_t q =
        ql > 0 ? h * ql + b * ql + ql + ql * H * qk + b * H * qk : h * H * qk + b * H * qk;
    const std::int64_t kv = h * (kvl + mla->qk_rope_head_dim) + b * (kvl + mla->qk_rope_head_dim) +
                            kvl + kvl * H * (mla->qk_nope_head_dim + mla->v_head_dim) +
                            b * H * (mla->qk_nope_head_dim + mla->v_head_dim);
    const std::int64_t out = v_dim() * h + b * h;
    return q + kv + out + norm_params();
  }
  const std::int64_t q_out = (attention_output_gate ? 2 : 1) * q_dim();  // queries (and gate)
  const std::int64_t qkv = hidden * (q_out + 2 * kv_dim()) + (bias ? q_out + 2 * kv_dim() : 0);
  const std::int64_t out = q_dim() * hidden + (bias ? hidden : 0);
  return qkv + out + norm_params();
}

std::int64_t ModelSpec::mamba_params() const {
  if (!mamba) return 0;
  const MambaSpec& s = *mamba;
  const std::int64_t b = bias ? 1 : 0;
  const std::int64_t in_proj = hidden * s.in_proj_dim() + b * s.in_proj_dim();
  const std::int64_t conv = s.conv_dim() * s.conv_kernel + (s.conv_bias() ? s.conv_dim() : 0);
  const std::int64_t out_proj = s.d_inner() * hidden + b * hidden;
  return in_proj + conv + s.head_params() + s.gated_norm_params() + out_proj + norm_params();
}

std::int64_t ModelSpec::dense_mlp_params() const {
  return mlp_weight_params(mlp, hidden, ffn_hidden, bias) + norm_params();
}

std::int64_t ModelSpec::expert_params() const {
  if (!is_moe()) return 0;
  return mlp_weight_params(mlp, hidden, moe->expert_ffn_hidden, bias);
}

std::int64_t ModelSpec::shared_expert_params() const {
  if (!is_moe() || moe->shared_ffn() == 0) return 0;
  return mlp_weight_params(mlp, hidden, moe->shared_ffn(), bias) +
         (moe->shared_expert_gate ? hidden : 0);
}

std::int64_t ModelSpec::moe_mlp_params() const {
  if (!is_moe()) return dense_mlp_params();
  const std::int64_t router = hidden * moe->num_experts;
  return router + moe->num_experts * expert_params() + shared_expert_params() + norm_params();
}

std::int64_t ModelSpec::layer_params(int layer) const {
  const LayerKind k = layer_kind(layer);
  std::int64_t p = 0;
  if (k.mixer == Mixer::kAttention) p += attention_params();
  if (k.mixer == Mixer::kMamba) p += mamba_params();
  if (k.ffn == FfnKind::kDense) p += dense_mlp_params();
  if (k.ffn == FfnKind::kMoe) p += moe_mlp_params();
  return p;
}

std::int64_t ModelSpec::mtp_params() const {
  if (mtp_layers <= 0) return 0;
  // enorm, hnorm and the final norm; eh_proj (2·hidden → hidden); the block.
  const std::int64_t module =
      3 * norm_params() + 2 * hidden * hidden + (bias ? hidden : 0) + layer_params(num_layers);
  return mtp_layers * module;
}

std::int64_t ModelSpec::embedding_params() const {
  std::int64_t p = vocab * hidden;
  if (position_embedding == PositionEmbedding::kLearned) p += max_seq_len * hidden;
  return p;
}

std::int64_t ModelSpec::lm_head_params() const {
  return tied_embeddings ? 0 : vocab * hidden;
}

std::int64_t ModelSpec::final_norm_params() const {
  return norm_params();
}

std::int64_t ModelSpec::non_embedding_params() const {
  if (layer_pattern.empty() && !mla && (!is_moe() || moe->first_dense_layers == 0)) {
    const std::int64_t n_moe = moe_layers();
    const std::int64_t n_dense = num_layers - n_moe;
    return num_layers * attention_params() + n_dense * dense_mlp_params() +
           n_moe * moe_mlp_params() + final_norm_params() + mtp_params();
  }
  std::int64_t p = final_norm_params() + mtp_params();
  for (int l = 0; l < num_layers; ++l)
    p += layer_params(l);
  return p;
}

std::int64_t ModelSpec::total_params() const {
  return non_embedding_params() + embedding_params() + lm_head_params();
}

std::int64_t ModelSpec::active_params() const {
  if (!is_moe()) return total_params();
  const std::int64_t inactive_per_layer =
      static_cast<std::int64_t>(moe->num_experts - moe->top_k) * expert_params();
  const std::int64_t mtp_moe = is_moe_layer(num_layers) ? mtp_layers : 0;
  return total_params() - (moe_layers() + mtp_moe) * inactive_per_layer;
}

}  // namespace planner
