#include "planner/core/model_spec.hpp"

namespace planner {
namespace {

std::int64_t norm_params(NormKind norm, std::int64_t hidden) {
  return norm == NormKind::kLayerNorm ? 2 * hidden : hidden;
}

std::int64_t mlp_weight_params(MlpKind mlp, std::int64_t hidden, std::int64_t ffn, bool bias) {
  const bool gated = mlp != MlpKind::kGelu;
  const std::int64_t up = (gated ? 2 : 1) * hidden * ffn + (bias ? (gated ? 2 : 1) * ffn : 0);
  const std::int64_t down = ffn * hidden + (bias ? hidden : 0);
  return up + down;
}

}  // namespace

int ModelSpec::moe_layers() const {
  if (!is_moe()) return 0;
  const int freq = moe->layer_freq < 1 ? 1 : moe->layer_freq;
  return num_layers / freq;
}

bool ModelSpec::is_moe_layer(int layer) const {
  if (!is_moe()) return false;
  const int freq = moe->layer_freq < 1 ? 1 : moe->layer_freq;
  return (layer + 1) % freq == 0;
}

std::int64_t ModelSpec::attention_params() const {
  const std::int64_t qkv = hidden * (q_dim() + 2 * kv_dim()) + (bias ? q_dim() + 2 * kv_dim() : 0);
  const std::int64_t out = q_dim() * hidden + (bias ? hidden : 0);
  return qkv + out + norm_params(norm, hidden);
}

std::int64_t ModelSpec::dense_mlp_params() const {
  return mlp_weight_params(mlp, hidden, ffn_hidden, bias) + norm_params(norm, hidden);
}

std::int64_t ModelSpec::expert_params() const {
  if (!is_moe()) return 0;
  return mlp_weight_params(mlp, hidden, moe->expert_ffn_hidden, bias);
}

std::int64_t ModelSpec::moe_mlp_params() const {
  if (!is_moe()) return dense_mlp_params();
  const std::int64_t router = hidden * moe->num_experts;
  return router + moe->num_experts * expert_params() + norm_params(norm, hidden);
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
  return norm_params(norm, hidden);
}

std::int64_t ModelSpec::non_embedding_params() const {
  const std::int64_t n_moe = moe_layers();
  const std::int64_t n_dense = num_layers - n_moe;
  return num_layers * attention_params() + n_dense * dense_mlp_params() + n_moe * moe_mlp_params() +
         final_norm_params();
}

std::int64_t ModelSpec::total_params() const {
  return non_embedding_params() + embedding_params() + lm_head_params();
}

std::int64_t ModelSpec::active_params() const {
  if (!is_moe()) return total_params();
  const std::int64_t inactive_per_layer =
      static_cast<std::int64_t>(moe->num_experts - moe->top_k) * expert_params();
  return total_params() - moe_layers() * inactive_per_layer;
}

}  // namespace planner
