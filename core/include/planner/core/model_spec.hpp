// A decoder-only transformer: dense GPT/Llama families and mixture-of-experts (MoE) variants.
//
// JSON document (kind "model"): layers, hidden, heads, kv_heads (GQA/MQA; default = heads),
// head_dim (default hidden / heads), ffn_hidden, mlp (gelu | swiglu | geglu), norm (layernorm |
// rmsnorm), position_embedding (learned | rope | alibi | none), vocab, tied_embeddings,
// max_seq_len, pretrain_seq_len (the sequence length it was pre-trained at, where known: the
// default a plan trains at), bias, and an optional moe object {experts, top_k, expert_ffn_hidden,
// capacity_factor, layer_freq}.
//
// Parameter counts follow the layer structure of Megatron-LM / Hugging Face implementations:
//   attention  hidden x (heads + 2 kv_heads) x head_dim  (QKV)  +  heads x head_dim x hidden
//   (output) MLP        2 x hidden x ffn (gelu) or 3 x hidden x ffn (swiglu, geglu) norms      2
//   per layer + 1 final; layernorm has weight and bias, rmsnorm a weight only embedding  vocab x
//   hidden (+ max_seq_len x hidden when learned), LM head unless tied biases     when `bias` is
//   set, on every linear layer
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/enums.hpp"

namespace planner {

struct MoeSpec {
  int num_experts = 0;
  int top_k = 0;
  std::int64_t expert_ffn_hidden = 0;
  double capacity_factor = 1.0;  // tokens per expert = capacity_factor x tokens x top_k / experts
  int layer_freq = 1;            // every layer_freq-th layer is an MoE layer (1 = all)
};

struct ModelSpec {
  std::string name;
  std::vector<std::string> aliases;
  std::string family;  // gpt, llama, mixtral, ... (informational)
  std::string source;  // where the architecture numbers come from

  int num_layers = 0;
  std::int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // query groups; == heads for multi-head attention, 1 for MQA
  int head_dim = 0;  // usually hidden / heads
  std::int64_t ffn_hidden = 0;
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionEmbedding position_embedding = PositionEmbedding::kLearned;
  std::int64_t vocab = 0;
  bool tied_embeddings = false;
  std::int64_t max_seq_len = 0;
  // The sequence length the model was pre-trained at, where its source states it (0: unknown). A
  // config's maximum (max_position_embeddings) is often a long-context extension's, not this.
  std::int64_t pretrain_seq_len = 0;
  bool bias = false;
  std::optional<MoeSpec> moe;

  // True when `query` equals the name or an alias, ignoring case.
  bool matches(std::string_view query) const;
  bool is_moe() const { return moe.has_value() && moe->num_experts > 1; }
  // Number of layers whose MLP is a mixture of experts.
  int moe_layers() const;
  // True when layer `layer` (0-based) has an MoE MLP: every layer_freq-th layer, counting from 1
  // (layers layer_freq-1, 2·layer_freq-1, ...), so that moe_layers() of them exist.
  bool is_moe_layer(int layer) const;
  std::int64_t q_dim() const { return static_cast<std::int64_t>(heads) * head_dim; }
  std::int64_t kv_dim() const { return static_cast<std::int64_t>(kv_heads) * head_dim; }

  // Parameter counts (elements).
  std::int64_t attention_params() const;  // one layer's attention block incl. its norm
  std::int64_t dense_mlp_params() const;  // one dense MLP block incl. its norm
  std::int64_t expert_params() const;     // one expert's MLP weights
  std::int64_t moe_mlp_params() const;    // one MoE block: router + all experts + norm
  std::int64_t embedding_params() const;  // token (+ learned position) embedding
  std::int64_t lm_head_params() const;    // 0 when tied
  std::int64_t final_norm_params() const;
  std::int64_t total_params() const;
  // Parameters touched per token: MoE layers count top_k experts instead of all of them.
  std::int64_t active_params() const;
  // Parameters excluding embeddings and LM head (the N of Kaplan et al.).
  std::int64_t non_embedding_params() const;
};

}  // namespace planner
