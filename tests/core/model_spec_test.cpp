#include "planner/core/model_spec.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "planner/core/catalog.hpp"
#include "planner/core/loaders.hpp"

namespace planner {
namespace {

const ModelSpec& preset(std::string_view name) {
  const ModelSpec* m = builtin_catalog().find_model(name);
  EXPECT_NE(m, nullptr) << name;
  return *m;
}

// Exact counts of the Hugging Face checkpoints (model.num_parameters()).
TEST(ModelSpec, Llama3_8bMatchesTheCheckpointExactly) {
  EXPECT_EQ(preset("llama3-8b").total_params(), 8'030'261'248);
}

TEST(ModelSpec, MixtralTotalAndActiveParameters) {
  const ModelSpec& m = preset("mixtral-8x7b");
  EXPECT_EQ(m.total_params(), 46'702'792'704);
  // Two of eight experts per token: 12.9B active, as Mistral AI states.
  EXPECT_EQ(m.active_params(), 12'879'925'248);
  EXPECT_EQ(m.moe_layers(), 32);
}

TEST(ModelSpec, PublishedSizesWithinHalfAPercent) {
  struct Case {
    const char* name;
    double billions;
  };
  // GPT-3 is 174.6B with a 50257 vocab (Brown et al.); Megatron's padded 51200 vocab adds 12M.
  for (const Case& c :
       {Case{"gpt3-175b", 174.6}, Case{"llama3-70b", 70.55}, Case{"llama3-405b", 405.85},
        Case{"llama2-7b", 6.74}, Case{"llama2-70b", 68.98}, Case{"gpt-neox-20b", 20.55},
        Case{"bloom-176b", 176.25}, Case{"megatron-529.6b", 529.6}, Case{"megatron-1t", 1008.0},
        Case{"megatron-145.6b", 145.6}}) {
    const double got = static_cast<double>(preset(c.name).total_params()) / 1e9;
    EXPECT_NEAR(got, c.billions, c.billions * 0.005) << c.name;
  }
}

TEST(ModelSpec, Gpt3LayerStructure) {
  const ModelSpec& m = preset("gpt3-175b");
  const std::int64_t h = 12288;
  // QKV + output projection with biases, and one LayerNorm (weight + bias).
  EXPECT_EQ(m.attention_params(), 4 * h * h + 4 * h + 2 * h);
  // Two GEMMs 4h wide with biases, and one LayerNorm.
  EXPECT_EQ(m.dense_mlp_params(), 8 * h * h + 4 * h + h + 2 * h);
  EXPECT_EQ(m.embedding_params(), 51200 * h + 2048 * h);
  EXPECT_EQ(m.lm_head_params(), 0);  // tied
}

TEST(ModelSpec, GqaShrinksOnlyKeyValueProjections) {
  ModelSpec m = preset("llama3-70b");
  const std::int64_t gqa = m.attention_params();
  m.kv_heads = m.heads;
  const std::int64_t mha = m.attention_params();
  // K and V grow from 8 to 64 heads of 128.
  EXPECT_EQ(mha - gqa, 2 * m.hidden * (64 - 8) * 128);
}

// Every MoE preset against its publisher's totals (the preset's source says which). Active counts
// follow each publisher's convention: DeepSeek, OpenAI and NVIDIA leave the embedding table out,
// Zhipu (GLM-4.5) the embedding table and the output layer.
// Published figures are rounded: within 1% of the figure widened by half its last digit.
TEST(ModelSpec, MoePresetsMatchThePublishedTotals) {
  enum class Active { kAll, kWithoutEmbedding, kWithoutEmbeddingAndHead };
  struct Case {
    const char* name;
    double total, active, unit;
    Active convention;
    double not_modeled;  // Llama 4: the 0.87B vision encoder in Meta's totals
  };
  for (const Case& c :
       {Case{"deepseek-v3", 671e9, 37e9, 1e9, Active::kWithoutEmbedding, 0},
        Case{"qwen3-235b-a22b", 235e9, 22e9, 1e9, Active::kAll, 0},
        Case{"qwen3-30b-a3b", 30.5e9, 3.3e9, 0.1e9, Active::kAll, 0},
        Case{"gpt-oss-120b", 116.83e9, 5.13e9, 0.01e9, Active::kWithoutEmbedding, 0},
        Case{"llama4-scout", 109e9, 17e9, 1e9, Active::kAll, 0.872e9},
        Case{"llama4-maverick", 400e9, 17e9, 1e9, Active::kAll, 0.872e9},
        Case{"mixtral-8x22b", 141e9, 39e9, 1e9, Active::kAll, 0},
        Case{"nemotron-3-nano", 31.6e9, 3.2e9, 0.1e9, Active::kWithoutEmbedding, 0},
        Case{"glm-4.5", 355e9, 32e9, 1e9, Active::kWithoutEmbeddingAndHead, 0},
        Case{"glm-4.5-air", 106e9, 12e9, 1e9, Active::kWithoutEmbeddingAndHead, 0},
        // Qwen3-Next's "3B activated" is rounded and states no convention (3.25B here).
        Case{"qwen3-next-80b-a3b", 80e9, 3e9, 1e9, Active::kWithoutEmbeddingAndHead, 0}}) {
    const ModelSpec& m = preset(c.name);
    const double mtp_inactive = m.mtp_layers > 0 && m.is_moe_layer(m.num_layers)
                                    ? static_cast<double>(m.mtp_layers) *
                                          (m.moe->num_experts - m.moe->top_k) *
                                          static_cast<double>(m.expert_params())
                                    : 0.0;
    const double mtp = static_cast<double>(m.mtp_params());
    const double total = static_cast<double>(m.total_params()) - mtp + c.not_modeled;
    double active = static_cast<double>(m.active_params()) - (mtp - mtp_inactive);
    if (c.convention != Active::kAll) active -= static_cast<double>(m.embedding_params());
    if (c.convention == Active::kWithoutEmbeddingAndHead) {
      active -= static_cast<double>(m.lm_head_params());
    }
    EXPECT_LE(std::abs(total - c.total), 0.01 * c.total + c.unit / 2) << c.name << " " << total;
    EXPECT_LE(std::abs(active - c.active), 0.01 * c.active + c.unit / 2) << c.name << " " << active;
  }
}

// The pre-training sequence length where the publisher states it (DeepSeek-V3 report §4.2, Qwen3
// report §3.2: 4K before the long-context extension); unstated elsewhere, so 0.
TEST(ModelSpec, MoePresetsPretrainingSequenceLength) {
  EXPECT_EQ(preset("deepseek-v3").pretrain_seq_len, 4096);
  EXPECT_EQ(preset("qwen3-235b-a22b").pretrain_seq_len, 4096);
  EXPECT_EQ(preset("qwen3-30b-a3b").pretrain_seq_len, 4096);
  EXPECT_EQ(preset("glm-4.5").pretrain_seq_len, 4096);  // GLM-4.5 report: 4K, then 32K and 128K
  for (const char* name : {"gpt-oss-120b", "llama4-scout", "llama4-maverick", "mixtral-8x22b",
                           "nemotron-3-nano", "qwen3-next-80b-a3b"}) {
    EXPECT_EQ(preset(name).pretrain_seq_len, 0) << name;
  }
}

// Hand counts of the new layer parts on small shapes.
TEST(ModelSpec, MultiHeadLatentAttentionByHand) {
  ModelSpec m;
  m.num_layers = 1;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.norm = NormKind::kRmsNorm;
  m.mla = MlaSpec{32, 16, 8, 4, 6};
  m.head_dim = 12;
  // q: 64·32 + 32 (norm) + 32·4·12; kv: 64·(16 + 4) + 16 (norm) + 16·4·(8 + 6); out 4·6·64;
  // input norm 64.
  EXPECT_EQ(m.attention_params(), 64 * 32 + 32 + 32 * 48 + 64 * 20 + 16 + 16 * 56 + 24 * 64 + 64);
  EXPECT_EQ(m.qk_head_dim(), 12);
  EXPECT_EQ(m.v_dim(), 24);
  EXPECT_EQ(m.kv_cache_per_token(), 20);
  m.mla->q_lora_rank = 0;  // queries straight from the hidden state
  EXPECT_EQ(m.attention_params(), 64 * 48 + 64 * 20 + 16 + 16 * 56 + 24 * 64 + 64);
}

TEST(ModelSpec, Mamba2MixerByHand) {
  ModelSpec m;
  m.hidden = 64;
  m.norm = NormKind::kRmsNorm;
  m.mamba = MambaSpec{8, 16, 32, 2, 4, 64};
  // d_inner 128, conv_dim 128 + 2·2·32 = 256, in_proj 128 + 256 + 8 = 392.
  EXPECT_EQ(m.mamba->in_proj_dim(), 392);
  EXPECT_EQ(m.mamba_params(), 64 * 392 + 256 * 5 + 3 * 8 + 128 + 128 * 64 + 64);
}

// Gated DeltaNet (Qwen3NextGatedDeltaNet) in the Mamba-2 roles: 8 value heads of 16, 2 key heads
// of 32, conv 4. d_inner 128, conv_dim 128 + 2·2·32 = 256, in_proj q | k | v | z | beta | a =
// 256 + 128 + 16 = 400; no conv bias, A_log and dt_bias, the gated norm over one head (16).
TEST(ModelSpec, GatedDeltaNetMixerByHand) {
  ModelSpec m;
  m.hidden = 64;
  m.norm = NormKind::kRmsNorm;
  m.mamba = MambaSpec{8, 16, 32, 2, 4, 64, RecurrentMixer::kGatedDeltaNet};
  EXPECT_EQ(m.mamba->in_proj_dim(), 400);
  EXPECT_EQ(m.mamba_params(), 64 * 400 + 256 * 4 + 2 * 8 + 16 + 128 * 64 + 64);
  m.layer_pattern = "GE*-";
  m.num_layers = 4;
  EXPECT_EQ(m.layer_kind(0), (LayerKind{Mixer::kMamba, FfnKind::kNone}));
  EXPECT_EQ(m.mamba_layers(), 1);
}

// Gated attention: the query projection doubles (queries and their gate).
TEST(ModelSpec, AttentionOutputGateByHand) {
  ModelSpec m;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.norm = NormKind::kRmsNorm;
  const std::int64_t plain = m.attention_params();
  EXPECT_EQ(plain, 64 * (64 + 2 * 32) + 64 * 64 + 64);
  m.attention_output_gate = true;
  EXPECT_EQ(m.attention_params() - plain, 64 * 64);
}

TEST(ModelSpec, LayerKindsFromTheMoeRuleAndFromAPattern) {
  ModelSpec m;
  m.num_layers = 8;
  m.moe = MoeSpec{};
  m.moe->num_experts = 4;
  m.moe->top_k = 2;
  m.moe->first_dense_layers = 3;
  m.moe->layer_freq = 2;
  // MoE where l >= 3 and (l + 1) % 2 == 0: layers 3, 5, 7.
  std::vector<int> moe;
  for (int l = 0; l < 8; ++l) {
    if (m.is_moe_layer(l)) moe.push_back(l);
  }
  EXPECT_EQ(moe, (std::vector<int>{3, 5, 7}));
  EXPECT_EQ(m.moe_layers(), 3);
  m.moe->first_dense_layers = 0;
  m.moe->layer_freq = 1;
  m.layer_pattern = "M*-E";
  m.num_layers = 4;
  EXPECT_EQ(m.layer_kind(0), (LayerKind{Mixer::kMamba, FfnKind::kNone}));
  EXPECT_EQ(m.layer_kind(1), (LayerKind{Mixer::kAttention, FfnKind::kNone}));
  EXPECT_EQ(m.layer_kind(2), (LayerKind{Mixer::kNone, FfnKind::kDense}));
  EXPECT_EQ(m.layer_kind(3), (LayerKind{Mixer::kNone, FfnKind::kMoe}));
  EXPECT_EQ(m.moe_layers(), 1);
  EXPECT_EQ(m.attention_layers(), 1);
}

// The new model fields are checked strictly, at their JSON pointers.
TEST(ModelSpec, MoeAndHybridFieldsAreChecked) {
  auto bad = parse_model(R"({"schema_version": 1, "kind": "model", "name": "x", "layers": 4,
      "hidden": 64, "heads": 4, "kv_heads": 2, "ffn_hidden": 128, "vocab": 100,
      "moe": {"experts": 6, "top_k": 4, "expert_groups": 4, "group_top_k": 1,
              "shared_expert_gate": true, "router": "softmax"},
      "mla": {"q_lora_rank": 8, "kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4},
      "layer_pattern": "M*xE", "full_attention_every": 2})",
                         "m.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(
      bad.status().message(),
      "m.json: /moe/shared_experts: must be >= 1 when shared_expert_ffn_hidden or "
      "shared_expert_gate is given\n"
      "m.json: /moe/expert_groups: must divide experts (6), got 4\n"
      "m.json: /moe/router: unknown key; expected one of: capacity_factor, "
      "expert_ffn_hidden, expert_groups, experts, first_dense_layers, group_top_k, layer_freq, "
      "scoring, shared_expert_ffn_hidden, shared_expert_gate, shared_experts, top_k\n"
      "m.json: /mla/v_head_dim: missing required key\n"
      "m.json: /kv_heads: multi-head latent attention has one key/value head per query "
      "head (4), got 2\n"
      "m.json: /layer_pattern: character 2 is 'x'; expected M (Mamba-2), G (Gated DeltaNet), * "
      "(attention), - (MLP) or E (MoE)\n"
      "m.json: /full_attention_every: only used with sliding_window");
  auto pattern = parse_model(R"({"schema_version": 1, "kind": "model", "name": "x", "layers": 3,
      "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 100, "layer_pattern": "M*"})",
                             "p.json");
  ASSERT_FALSE(pattern);
  EXPECT_EQ(pattern.status().message(),
            "p.json: /layer_pattern: must have one character per layer (3), got 2");
  auto no_mamba = parse_model(R"({"schema_version": 1, "kind": "model", "name": "x",
      "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 100,
      "layer_pattern": "M-"})",
                              "n.json");
  ASSERT_FALSE(no_mamba);
  EXPECT_EQ(no_mamba.status().message(),
            "n.json: /layer_pattern: has Mamba-2 layers (M) but the model gives no \"mamba\" "
            "object");
}

TEST(ModelSpec, GatedDeltaNetFieldsAreChecked) {
  auto bad = parse_model(R"({"schema_version": 1, "kind": "model", "name": "x", "layers": 2,
      "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 100, "layer_pattern": "G-",
      "gated_deltanet": {"key_heads": 3, "key_head_dim": 16, "value_heads": 4,
                         "value_head_dim": 16, "state": 2}})",
                         "g.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(),
            "g.json: /gated_deltanet/key_heads: must divide value_heads (4), got 3\n"
            "g.json: /gated_deltanet/state: unknown key; expected one of: chunk, conv_kernel, "
            "key_head_dim, key_heads, value_head_dim, value_heads");
  auto missing = parse_model(R"({"schema_version": 1, "kind": "model", "name": "x", "layers": 2,
      "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 100, "layer_pattern": "GM",
      "mamba": {"heads": 4, "head_dim": 16, "state_dim": 16},
      "gated_deltanet": {"key_heads": 2, "key_head_dim": 16, "value_heads": 4,
                         "value_head_dim": 16}})",
                             "b.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(),
            "b.json: /gated_deltanet: a model has one recurrent mixer: give \"mamba\" or "
            "\"gated_deltanet\", not both\n"
            "b.json: /layer_pattern: has Gated DeltaNet layers (G) but the model gives no "
            "\"gated_deltanet\" object");
  auto gate = parse_model(R"({"schema_version": 1, "kind": "model", "name": "x", "layers": 2,
      "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 100, "attention_output_gate": true,
      "mla": {"q_lora_rank": 8, "kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
              "v_head_dim": 8}})",
                          "a.json");
  ASSERT_FALSE(gate);
  EXPECT_EQ(gate.status().message(),
            "a.json: /attention_output_gate: is not defined for multi-head latent attention (mla)");
  // The preset round-trips through its document.
  const ModelSpec& next = preset("qwen3-next-80b-a3b");
  auto again = parse_model(to_json_text(next), "q.json");
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(to_json_text(*again), to_json_text(next));
  EXPECT_TRUE(again->mamba->delta());
  EXPECT_TRUE(again->attention_output_gate);
}

TEST(ModelSpec, DroplessRoundTrips) {
  const ModelSpec& m = preset("deepseek-v3");
  EXPECT_EQ(m.moe->capacity_factor, 0.0);
  auto again = parse_model(to_json_text(m), "again");
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(again->moe->capacity_factor, 0.0);
  EXPECT_NE(to_json_text(m).find("\"capacity_factor\": \"dropless\""), std::string::npos);
}

}  // namespace
}  // namespace planner
