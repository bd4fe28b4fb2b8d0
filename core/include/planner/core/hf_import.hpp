// Import of Hugging Face `config.json` files into model specs.
//
// Supported architectures (the `architectures` list, or `model_type` when that list is absent):
//   LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GemmaForCausalLM,
//   Gemma2ForCausalLM, GPT2LMHeadModel, GPTNeoXForCausalLM, FalconForCausalLM (and its older
//   RWForCausalLM name), and the mixtures of experts MixtralForCausalLM, Qwen2MoeForCausalLM (its
//   gated shared expert), Qwen3MoeForCausalLM, DeepseekV2ForCausalLM and DeepseekV3ForCausalLM
//   (multi-head latent attention, shared experts, first_k_dense_replace, group-limited routing,
//   sigmoid scoring, num_nextn_predict_layers), Glm4MoeForCausalLM (GLM-4.5: DeepSeek-V3's MoE
//   block and MTP layer behind grouped-query attention), GptOssForCausalLM (attention and expert
//   biases, alternating sliding-window attention from layer_types), Llama4ForConditionalGeneration
//   and Llama4ForCausalLM (the text model in text_config: a shared expert, MoE every
//   interleave_moe_layer_step-th layer, dense layers of intermediate_size_mlp; the vision encoder
//   is not modelled), DbrxForCausalLM, OlmoeForCausalLM and the hybrid NemotronHForCausalLM
//   (hybrid_override_pattern of Mamba-2, attention, MLP and MoE blocks).
// Keys the architecture needs are type-checked and reported at their JSON pointer; the many other
// keys a Hugging Face config carries (dropout rates, token ids, rope scaling ...) do not change the
// shapes planner models and are ignored. An unknown architecture is an error listing the supported
// ones.
#pragma once

#include <string>
#include <string_view>

#include "planner/core/model_spec.hpp"
#include "planner/core/status.hpp"

namespace planner {

// `name` becomes the model's name; when empty, it is taken from `_name_or_path` (its last path
// component), else from the file name in `source` ("qwen2-7b.config.json" -> "qwen2-7b",
// "Qwen1.5-MoE-A2.7B/config.json" -> "Qwen1.5-MoE-A2.7B"), and only as a last resort from
// `model_type`. Integer fields are read as 64-bit values and checked against limits.hpp, never
// truncated.
Result<ModelSpec> import_hf_config(std::string_view text, std::string_view source,
                                   std::string name = {});

// The architectures import_hf_config() understands, comma-separated.
std::string supported_hf_architectures();

}  // namespace planner
