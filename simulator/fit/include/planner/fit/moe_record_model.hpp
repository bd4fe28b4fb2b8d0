// The model of a mixture-of-experts record whose shape no preset has: built from the record's
// fields and the Hugging Face config keys its model.arch_notes quote.
//
// The record's fields give the layers, hidden size, attention and key-value heads, the dense FFN
// width, the vocabulary, the routed experts (count, top-k, width) and the number of shared
// experts. What they cannot say, the notes say where the record quotes the model's config.json
// (the reference data's curators do: "head_dim 128", "first_k_dense_replace=3", "kv_lora_rank
// 512", "hybrid_override_pattern \"MEMEM*E...\""), read as the Hugging Face importer
// (hf_import.hpp) reads the config's keys:
//   head_dim, kv_channels              the attention head width (default hidden / heads)
//   q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
//                                      multi-head latent attention (DeepSeek-V2/V3, Kimi K2)
//   first_k_dense_replace, mlp_only_layers [0, ..., k-1]
//                                      the first k layers dense (ffn_hidden wide)
//   decoder_sparse_step, moe_layer_freq, interleave_moe_layer_step
//                                      MoE every n-th layer (Qwen, DeepSeek, Llama 4)
//   shared_expert_intermediate_size, moe_shared_expert_intermediate_size, "shared expert
//   intermediate N"                    the shared experts' total width (default shared_experts x
//                                      expert_ffn_hidden); Qwen2-MoE's is gated
//   n_group, topk_group, "sigmoid"     group-limited routing and sigmoid scoring
//   num_nextn_predict_layers, mtp_num_layers
//                                      multi-token-prediction modules
//   sliding_window or "window N", "alternate", sliding_window_pattern
//                                      local attention (every layer, or full every n-th layer)
//   hybrid_override_pattern "...", mamba_num_heads, mamba_head_dim, mamba_state_dim or
//   ssm_state_size, n_groups, conv_kernel, chunk_size
//                                      a hybrid Mamba-2 model (Nemotron-H)
//   "squared-relu" / relu2, "layernorm", attention_bias true, tie_word_embeddings true
//                                      activation, norm, biases and tied embeddings
// Everything else is the common MoE transformer of 2024-2026: SwiGLU experts, RMSNorm, rotary
// positions, untied embeddings, softmax top-k routing, no biases. A vocabulary the record does
// not publish is the one of the MoE preset of the same family (the name's first word). The
// result is validated as a model document; every value taken from the notes or assumed is noted.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/core/published_run.hpp"
#include "planner/core/status.hpp"
#include "planner/fit/accuracy.hpp"

namespace planner::fit {

// Fails (kInvalidInput) when a field the model needs is neither published nor in the notes, or
// the notes contradict the fields.
Result<ModelSpec> moe_model_from_record(const PublishedRun& run, const Catalog& catalog,
                                        std::vector<ChosenField>& notes);

// The attention head width a record's model.arch_notes quote ("head_dim 128", "kv_channels 128"),
// for models whose heads are not hidden / heads wide (Qwen3-32B, Mistral NeMo), dense ones too.
std::optional<int> head_dim_from_notes(std::string_view arch_notes);

}  // namespace planner::fit
