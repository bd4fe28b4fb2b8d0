// A decoder-only language model: dense GPT/Llama families, mixtures of experts (MoE) as trained in
// 2026 (DeepSeek-V3, Qwen3-MoE, GPT-OSS, Llama 4) and hybrid attention/Mamba-2 models (Nemotron-H).
//
// JSON document (kind "model"): layers, hidden, heads, kv_heads (GQA/MQA; default = heads),
// head_dim (default hidden / heads), ffn_hidden, mlp (gelu | swiglu | geglu | relu2), norm
// (layernorm | rmsnorm), position_embedding (learned | rope | alibi | none), vocab,
// tied_embeddings, max_seq_len, pretrain_seq_len (the sequence length it was pre-trained at,
// where known: the default a plan trains at), bias, and optionally:
//   moe             {experts, top_k, expert_ffn_hidden, capacity_factor, layer_freq,
//                    first_dense_layers, shared_experts, shared_expert_ffn_hidden,
//                    shared_expert_gate, scoring (softmax | sigmoid), expert_groups, group_top_k}
//   mla             multi-head latent attention (DeepSeek-V2/V3): {q_lora_rank (0: no query
//                    compression), kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim}
//   mamba           Mamba-2 mixer of hybrid models: {heads, head_dim, state_dim, groups,
//                    conv_kernel, chunk}
//   gated_deltanet  Gated DeltaNet mixer of hybrid models (Qwen3-Next): {key_heads, key_head_dim,
//                    value_heads, value_head_dim, conv_kernel, chunk}; excludes `mamba`
//   layer_pattern   hybrid models: one character per layer in Nemotron-H's alphabet
//                    (hybrid_override_pattern): M Mamba-2 mixer, * attention, - dense MLP,
//                    E MoE MLP, and G a Gated DeltaNet mixer; each layer is one pre-norm
//                    residual block (a Qwen3-Next layer, mixer and MoE, is two: "GE")
//   attention_output_gate
//                   gated attention (Qwen3-Next): queries and a gate of the same width
//                    from the query projection; output × sigmoid(gate)
//   sliding_window, full_attention_every
//                   local attention over the last `sliding_window` tokens in every layer except
//                   every full_attention_every-th (GPT-OSS: 128 and 2; 0: every layer local)
//   mtp_layers      multi-token-prediction modules (DeepSeek-V3 §2.2)
//
// Layers. Without a layer_pattern every layer is attention (or MLA) followed by an MLP: MoE when
// `moe` is given, the layer index l >= first_dense_layers and (l + 1) % layer_freq == 0 (Hugging
// Face's decoder_sparse_step / interleave_moe_layer_step; DeepSeek's first_k_dense_replace), dense
// otherwise. With a pattern each layer is a single block (mixer or MLP), as in Nemotron-H.
//
// Parameter counts follow the Hugging Face / Megatron-LM module structure:
//   attention  hidden × (heads + 2 kv_heads) × head_dim (QKV; + heads × head_dim for the output
//               gate) + heads × head_dim × hidden (output)
//   MLA        (q_lora_rank > 0: hidden × q_lora + q_lora (norm) + q_lora × heads × qk_head;
//               else hidden × heads × qk_head) + hidden × (kv_lora + qk_rope) + kv_lora (norm)
//               + kv_lora × heads × (qk_nope + v_head) + heads × v_head × hidden,
//               with qk_head = qk_nope + qk_rope (DeepseekV3Attention)
//   Mamba-2    in_proj hidden × (2·d_inner + 2·groups·state + heads), conv1d (d_inner +
//               2·groups·state) × (kernel + 1), A_log, D and dt_bias (heads each), gated norm
//               d_inner, out_proj d_inner × hidden; d_inner = heads × head_dim (Mamba2Mixer)
//   GatedDeltaNet in_proj hidden × (2·d_inner + 2·groups·state + 2·heads), conv1d (d_inner +
//               2·groups·state) × kernel (no bias), A_log and dt_bias (heads each), gated norm
//               head_dim, out_proj d_inner × hidden (Qwen3NextGatedDeltaNet)
//   MLP        2 × hidden × ffn (gelu, relu2) or 3 × hidden × ffn (swiglu, geglu)
//   MoE        router hidden × experts, experts × the expert MLP (expert_ffn_hidden), the shared
//               experts as one MLP of shared_experts × shared_expert_ffn_hidden (+ hidden for
//               Qwen2-MoE's sigmoid shared-expert gate)
//   MTP        per module: two norms and a final norm (hidden each), the projection 2·hidden ×
//               hidden and one layer like the model's last; embedding and LM head are shared
//   norms      one per block (two per attention + MLP layer) + 1 final; layernorm has weight
//               and bias, rmsnorm a weight only
//   embedding  vocab × hidden (+ max_seq_len × hidden when learned), LM head unless tied
//   biases     when `bias` is set, on every linear layer (experts included)
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
  std::int64_t expert_ffn_hidden = 0;  // one routed expert's MLP width (fine-grained experts)
  double capacity_factor = 1.0;        // tokens per expert = capacity_factor x mean (0: dropless)
  int layer_freq = 1;                  // every layer_freq-th layer is an MoE layer (1 = all)
  int first_dense_layers = 0;          // the first k layers keep a dense MLP (DeepSeek: 3)
  int shared_experts = 0;              // experts every token goes through (DeepSeek, Llama 4)
  std::int64_t shared_expert_ffn_hidden = 0;  // width of one shared expert
  bool shared_expert_gate = false;            // a sigmoid gate on the shared experts (Qwen2-MoE)
  RouterScoring scoring = RouterScoring::kSoftmax;
  int expert_groups = 1;  // group-limited routing: experts in groups, a token picks group_top_k
  int group_top_k = 1;    // groups and its top_k experts among them (DeepSeek-V3: 8 and 4)

  std::int64_t shared_ffn() const { return shared_experts * shared_expert_ffn_hidden; }
};

// Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 §2.1): queries and keys/values are
// projected through low-rank latents; keys carry a decoupled RoPE part shared across heads.
struct MlaSpec {
  int q_lora_rank = 0;  // 0: queries projected directly (DeepSeek-V2-Lite)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

// The linear-time recurrent mixer of hybrid models: Mamba-2 (Dao & Gu 2024, arXiv:2405.21060;
// Nemotron-H) or Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, arXiv:2412.06464; Qwen3-Next).
// Both project the input to a convolved x | B | C stream (Gated DeltaNet: v | k | q) plus a gate z
// and per-head scalars, scan it chunk by chunk with a state of state_dim × head_dim per head, and
// project back through a gated norm. For Gated DeltaNet: heads = value heads, head_dim = value
// head dim, state_dim = key head dim, groups = key heads (queries and keys are shared by
// heads / groups value heads, as B and C are by Mamba's groups).
enum class RecurrentMixer : std::uint8_t { kMamba2, kGatedDeltaNet };
struct MambaSpec {
  int heads = 0;
  int head_dim = 0;
  int state_dim = 0;  // N
  int groups = 1;     // B and C groups (like GQA's kv heads)
  int conv_kernel = 4;
  int chunk = 128;  // scan chunk length
  RecurrentMixer kind = RecurrentMixer::kMamba2;
  bool delta() const { return kind == RecurrentMixer::kGatedDeltaNet; }
  std::int64_t d_inner() const { return static_cast<std::int64_t>(heads) * head_dim; }
  // Width of the convolved x | B | C stream.
  std::int64_t conv_dim() const {
    return d_inner() + 2 * static_cast<std::int64_t>(groups) * state_dim;
  }
  // Output width of in_proj: z | x | B | C | dt (Gated DeltaNet: in_proj_qkvz and in_proj_ba,
  // q | k | v | z | beta | a).
  std::int64_t in_proj_dim() const { return d_inner() + conv_dim() + (delta() ? 2 : 1) * heads; }
  // Per-head parameters: Mamba-2's A_log, D and dt_bias; Gated DeltaNet's A_log and dt_bias.
  std::int64_t head_params() const { return (delta() ? 2 : 3) * static_cast<std::int64_t>(heads); }
  // The gated RMSNorm's weight: over d_inner (Mamba-2), over one head, shared (Gated DeltaNet).
  std::int64_t gated_norm_params() const { return delta() ? head_dim : d_inner(); }
  // The depthwise convolution's bias (Mamba-2 has one, Qwen3-Next's Gated DeltaNet none).
  bool conv_bias() const { return !delta(); }
};

// The two parts of a layer.
enum class Mixer : std::uint8_t { kAttention, kMamba, kNone };
enum class FfnKind : std::uint8_t { kDense, kMoe, kNone };
struct LayerKind {
  Mixer mixer = Mixer::kAttention;
  FfnKind ffn = FfnKind::kDense;
  bool operator==(const LayerKind&) const = default;
};

// The characters of ModelSpec::layer_pattern.
inline constexpr char kPatternMamba = 'M';
inline constexpr char kPatternDeltaNet = 'G';  // Gated DeltaNet mixer (planner's letter)
inline constexpr char kPatternAttention = '*';
inline constexpr char kPatternDense = '-';
inline constexpr char kPatternMoe = 'E';

struct ModelSpec {
  std::string name;
  std::vector<std::string> aliases;
  std::string family;  // gpt, llama, mixtral, ... (informational)
  std::string source;  // where the architecture numbers come from

  int num_layers = 0;
  std::int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // query groups; == heads for multi-head attention, 1 for MQA
  int head_dim = 0;  // usually hidden / heads; MLA: qk_nope + qk_rope
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
  std::optional<MlaSpec> mla;
  std::optional<MambaSpec> mamba;
  std::string layer_pattern;  // empty: every layer attention + MLP
  int sliding_window = 0;     // tokens; 0: full attention everywhere
  int full_attention_every = 0;
  int mtp_layers = 0;
  // Gated attention (Qwen3-Next): the query projection also yields a gate, and the attention
  // output is multiplied by its sigmoid before the output projection.
  bool attention_output_gate = false;

  // True when `query` equals the name or an alias, ignoring case.
  bool matches(std::string_view query) const;
  bool is_moe() const { return moe.has_value() && moe->num_experts > 1; }
  bool is_hybrid() const { return !layer_pattern.empty(); }
  // What layer `layer` (0-based) holds. Layers num_layers .. num_layers + mtp_layers − 1 are the
  // multi-token-prediction modules' blocks, shaped like the last layer.
  LayerKind layer_kind(int layer) const;
  // Number of layers whose MLP is a mixture of experts (not counting MTP blocks).
  int moe_layers() const;
  // True when layer `layer` has an MoE MLP (see the header for the rule).
  bool is_moe_layer(int layer) const;
  // Layers of each mixer kind (not counting MTP blocks).
  int attention_layers() const;
  int mamba_layers() const;
  // Local attention window of layer `layer`: 0 for full (causal) attention.
  int attention_window(int layer) const;

  // Attention widths: queries and keys (qk_head_dim per head) and values / attention output
  // (v_head_dim per head). Equal to head_dim without MLA.
  int qk_head_dim() const;
  int v_head_dim() const;
  std::int64_t q_dim() const { return static_cast<std::int64_t>(heads) * head_dim; }
  std::int64_t kv_dim() const { return static_cast<std::int64_t>(kv_heads) * head_dim; }
  std::int64_t v_dim() const { return static_cast<std::int64_t>(heads) * v_head_dim(); }
  // What inference caches per token and attention layer (elements): 2 × kv_dim, or MLA's
  // compressed latent and shared rope key, kv_lora_rank + qk_rope_head_dim (DeepSeek-V2 §2.1.2).
  std::int64_t kv_cache_per_token() const;

  // Parameter counts (elements).
  std::int64_t attention_params() const;      // one layer's attention (or MLA) block incl. its norm
  std::int64_t mamba_params() const;          // one Mamba-2 / Gated DeltaNet block incl. its norm
  std::int64_t dense_mlp_params() const;      // one dense MLP block incl. its norm
  std::int64_t expert_params() const;         // one routed expert's MLP weights
  std::int64_t shared_expert_params() const;  // the shared experts of one MoE layer (+ gate)
  // One MoE block: router + all routed experts + shared experts + norm.
  std::int64_t moe_mlp_params() const;
  std::int64_t layer_params(int layer) const;  // any layer, MTP blocks included
  std::int64_t mtp_params() const;             // every MTP module (norms, projection, block)
  std::int64_t embedding_params() const;       // token (+ learned position) embedding
  std::int64_t lm_head_params() const;         // 0 when tied
  std::int64_t final_norm_params() const;
  std::int64_t norm_params() const;  // one norm over hidden
  // Every trained parameter, MTP modules included.
  std::int64_t total_params() const;
  // Parameters touched per token: MoE layers count top_k experts instead of all of them. Counts
  // the embedding table, as Mixtral's, Llama 4's and Qwen's model cards do; DeepSeek and OpenAI
  // quote it without (active_params() − embedding_params()).
  std::int64_t active_params() const;
  // Parameters excluding embeddings and LM head (the N of Kaplan et al.).
  std::int64_t non_embedding_params() const;
};

}  // namespace planner
