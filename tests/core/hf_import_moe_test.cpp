// Mixture-of-experts and hybrid Hugging Face configs: shapes, and parameter counts against the
// totals their publishers state (tests/data/hf/PROVENANCE.md says where each config comes from).
#include <gtest/gtest.h>

#include <cmath>

#include "planner/core/catalog.hpp"
#include "planner/core/flops.hpp"
#include "planner/core/hf_import.hpp"
#include "planner/core/loaders.hpp"
#include "support/command.hpp"

namespace planner {
namespace {

Result<ModelSpec> import_fixture(const std::string& name) {
  const std::string path = std::string(PLANNER_TEST_DATA_DIR) + "/hf/" + name;
  return import_hf_config(testing::slurp(path), name);
}

// How a publisher counts active parameters.
enum class Active {
  kWithEmbedding,            // Mistral, Meta, Qwen, Databricks, AllenAI: everything a token touches
  kWithoutEmbedding,         // DeepSeek, OpenAI, NVIDIA: the input embedding table left out
  kWithoutEmbeddingAndHead,  // Zhipu (GLM-4.5): the embedding table and the output layer left out
};

struct Published {
  const char* file;
  double total;   // parameters as published
  double active;  // active parameters per token as published
  Active convention;
  double unit;         // the published figures' last digit (they are rounded to it)
  double not_modeled;  // published parameters planner does not model (a vision encoder)
  const char* source;
};

// |got − published| within 1% of the published figure, widened by its rounding (half a unit of
// its last digit: "3.3B" stands for anything from 3.25B to 3.35B).
void expect_matches(double got, double published, double unit, const std::string& what) {
  const double allowed = 0.01 * published + unit / 2.0;
  EXPECT_LE(std::abs(got - published), allowed)
      << what << ": planner " << got / 1e9 << "B, published " << published / 1e9 << "B ("
      << 100.0 * (got - published) / published << " %)";
}

// Llama 4's vision encoder (Llama4VisionModel + pixel-shuffle adapter + projector, from the
// fixture's vision_config): patch embedding 3·14²→1408, class and 577 position embeddings, pre and
// post LayerNorms, 34 ViT layers (4 biased 1408² projections, a 1408→5632→1408 biased MLP, two
// LayerNorms), adapter 5632→4096→4096 and projector 4096→5120 (text hidden), no biases.
double llama4_vision_params() {
  const double h = 1408, f = 5632, layers = 34, patches = (336.0 / 14) * (336.0 / 14);
  const double per_layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 2 * (2 * h);
  return 3 * 14 * 14 * h + h + (patches + 1) * h + 2 * (2 * h) + layers * per_layer +
         (4 * h) * 4096 + 4096.0 * 4096 + 4096.0 * 5120;
}

class HfImportMoe : public ::testing::TestWithParam<Published> {};

TEST_P(HfImportMoe, ParameterCountsMatchThePublishedTotals) {
  const Published& p = GetParam();
  auto m = import_fixture(p.file);
  ASSERT_TRUE(m) << m.status().message();
  ASSERT_TRUE(m->is_moe()) << p.file;
  // Published totals leave out DeepSeek-V3's MTP module (671B + 14B MTP on the hub).
  const double total = static_cast<double>(m->total_params() - m->mtp_params());
  double active = static_cast<double>(m->active_params());
  if (m->mtp_layers > 0) {
    active -= static_cast<double>(m->mtp_params() - (m->moe->num_experts - m->moe->top_k) *
                                                        m->expert_params() * m->mtp_layers);
  }
  if (p.convention != Active::kWithEmbedding) active -= static_cast<double>(m->embedding_params());
  if (p.convention == Active::kWithoutEmbeddingAndHead) {
    active -= static_cast<double>(m->lm_head_params());
  }
  expect_matches(total + p.not_modeled, p.total, p.unit, std::string(p.file) + " total");
  expect_matches(active, p.active, p.unit, std::string(p.file) + " active");
  // The imported model is a valid planner document that loads back unchanged.
  auto again = parse_model(to_json_text(*m), p.file);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(to_json_text(*again), to_json_text(*m));
  EXPECT_EQ(again->total_params(), m->total_params());
  EXPECT_EQ(again->active_params(), m->active_params());
}

INSTANTIATE_TEST_SUITE_P(
    Published, HfImportMoe,
    ::testing::Values(
        Published{"deepseek-v3.config.json", 671e9, 37e9, Active::kWithoutEmbedding, 1e9, 0,
                  "deepseek-ai/DeepSeek-V3 README: 671B total, 37B activated"},
        Published{"deepseek-v2.config.json", 236e9, 21e9, Active::kWithoutEmbedding, 1e9, 0,
                  "DeepSeek-V2 paper (arXiv:2405.04434): 236B total, 21B activated"},
        Published{"deepseek-v2-lite.config.json", 15.7e9, 2.4e9, Active::kWithoutEmbedding, 0.1e9,
                  0, "deepseek-ai/DeepSeek-V2-Lite README: 15.7B total, 2.4B activated"},
        Published{"qwen3-235b-a22b.config.json", 235e9, 22e9, Active::kWithEmbedding, 1e9, 0,
                  "Qwen/Qwen3-235B-A22B model card: 235B in total, 22B activated"},
        Published{"qwen3-30b-a3b.config.json", 30.5e9, 3.3e9, Active::kWithEmbedding, 0.1e9, 0,
                  "Qwen/Qwen3-30B-A3B model card: 30.5B in total, 3.3B activated"},
        Published{"qwen1.5-moe-a2.7b.config.json", 14.3e9, 2.7e9, Active::kWithEmbedding, 0.1e9, 0,
                  "Qwen blog 2024-03-28 (Qwen1.5-MoE): 14.3B total, 2.7B activated"},
        Published{"gpt-oss-120b.config.json", 116.83e9, 5.13e9, Active::kWithoutEmbedding, 0.01e9,
                  0, "OpenAI gpt-oss model card, Table 1: 116.83B total, 5.13B active"},
        Published{"llama4-scout-17b-16e.config.json", 109e9, 17e9, Active::kWithEmbedding, 1e9,
                  llama4_vision_params(),
                  "Meta Llama 4 model card: 17B activated, 109B total (vision encoder included)"},
        Published{"llama4-maverick-17b-128e.config.json", 400e9, 17e9, Active::kWithEmbedding, 1e9,
                  llama4_vision_params(),
                  "Meta Llama 4 model card: 17B activated, 400B total (vision encoder included)"},
        Published{"mixtral-8x22b.config.json", 141e9, 39e9, Active::kWithEmbedding, 1e9, 0,
                  "Mistral AI 2024-04-17: 141B parameters, 39B active"},
        Published{"dbrx.config.json", 132e9, 36e9, Active::kWithEmbedding, 1e9, 0,
                  "Databricks 2024-03-27: 132B total parameters, 36B active"},
        Published{"olmoe-1b-7b.config.json", 6.9e9, 1.3e9, Active::kWithEmbedding, 0.1e9, 0,
                  "OLMoE paper (arXiv:2409.02060): 6.9B total, 1.3B active"},
        Published{"glm-4.5.config.json", 355e9, 32e9, Active::kWithoutEmbeddingAndHead, 1e9, 0,
                  "zai-org/GLM-4.5 model card: 355 billion total parameters, 32 billion active"},
        Published{"glm-4.5-air.config.json", 106e9, 12e9, Active::kWithoutEmbeddingAndHead, 1e9, 0,
                  "zai-org/GLM-4.5 model card: GLM-4.5-Air, 106 billion total, 12 billion active"},
        // Qwen3-Next's card rounds to the billion and states no convention: 3.25B without the
        // embedding table and output layer (3.87B with them, as Qwen3-30B-A3B's 3.3B counts).
        Published{"qwen3-next-80b-a3b.config.json", 80e9, 3e9, Active::kWithoutEmbeddingAndHead,
                  1e9, 0, "Qwen/Qwen3-Next-80B-A3B model card: 80B in total and 3B activated"},
        Published{"nemotron-3-nano-30b-a3b.config.json", 31.6e9, 3.2e9, Active::kWithoutEmbedding,
                  0.1e9, 0,
                  "NVIDIA Nemotron 3 Nano model card: 31.6B total, 3.2B active (3.6B with "
                  "embeddings)"}),
    [](const auto& p) {
      std::string name = p.param.file;
      name = name.substr(0, name.find(".config"));
      for (char& c : name) {
        if (c == '-' || c == '.') c = '_';
      }
      return name;
    });

TEST(HfImportMoeDetails, DeepSeekV3) {
  auto m = import_fixture("deepseek-v3.config.json");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->family, "deepseek-v3");
  ASSERT_TRUE(m->mla);
  EXPECT_EQ(m->mla->q_lora_rank, 1536);
  EXPECT_EQ(m->mla->kv_lora_rank, 512);
  EXPECT_EQ(m->qk_head_dim(), 192);
  EXPECT_EQ(m->v_head_dim(), 128);
  EXPECT_EQ(m->kv_cache_per_token(), 576);  // 512 latent + 64 rope key per token and layer
  EXPECT_EQ(m->moe->num_experts, 256);
  EXPECT_EQ(m->moe->top_k, 8);
  EXPECT_EQ(m->moe->shared_experts, 1);
  EXPECT_EQ(m->moe->shared_expert_ffn_hidden, 2048);
  EXPECT_EQ(m->moe->first_dense_layers, 3);
  EXPECT_EQ(m->moe->scoring, RouterScoring::kSigmoid);
  EXPECT_EQ(m->moe->expert_groups, 8);
  EXPECT_EQ(m->moe->group_top_k, 4);
  EXPECT_EQ(m->mtp_layers, 1);
  EXPECT_EQ(m->moe_layers(), 58);
  EXPECT_FALSE(m->is_moe_layer(2));
  EXPECT_TRUE(m->is_moe_layer(3));
  EXPECT_TRUE(m->is_moe_layer(61));  // the MTP block is shaped like the last layer
  // DeepSeek-V3's hub checkpoint: 685B = 671B + 14B of MTP module, which there includes its own
  // copies of the embedding and output head (2 x 0.93B).
  const double hub =
      static_cast<double>(m->total_params() + m->embedding_params() + m->lm_head_params());
  EXPECT_NEAR(hub / 685e9, 1.0, 0.01);
}

// GLM-4.5: DeepSeek-V3's MoE block (sigmoid router, one shared expert, the first 3 layers dense,
// one MTP layer) behind grouped-query attention, and dropless as a config.json import always is.
TEST(HfImportMoeDetails, Glm45) {
  auto m = import_fixture("glm-4.5.config.json");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->family, "glm4-moe");
  EXPECT_FALSE(m->mla);
  EXPECT_EQ(m->heads, 96);
  EXPECT_EQ(m->kv_heads, 8);
  EXPECT_EQ(m->head_dim, 128);  // 96 x 128 = 12,288 query width on a 5,120 hidden
  EXPECT_EQ(m->q_dim(), 12288);
  EXPECT_EQ(m->moe->num_experts, 160);
  EXPECT_EQ(m->moe->shared_experts, 1);
  EXPECT_EQ(m->moe->shared_expert_ffn_hidden, 1536);
  EXPECT_EQ(m->moe->first_dense_layers, 3);
  EXPECT_EQ(m->moe->scoring, RouterScoring::kSigmoid);  // no scoring_func key: GLM's router
  EXPECT_EQ(m->moe->capacity_factor, 0);
  EXPECT_EQ(m->moe_layers(), 89);
  EXPECT_EQ(m->mtp_layers, 1);
  EXPECT_FALSE(m->bias);  // q/k/v biases only
  // The same model as the preset.
  const ModelSpec* preset = builtin_catalog().find_model("glm-4.5");
  ASSERT_NE(preset, nullptr);
  EXPECT_EQ(preset->total_params(), m->total_params());
  EXPECT_EQ(preset->active_params(), m->active_params());
}

TEST(HfImportMoeDetails, DeepSeekV2LiteHasNoQueryLatent) {
  auto m = import_fixture("deepseek-v2-lite.config.json");
  ASSERT_TRUE(m) << m.status().message();
  ASSERT_TRUE(m->mla);
  EXPECT_EQ(m->mla->q_lora_rank, 0);
  EXPECT_EQ(m->moe->scoring, RouterScoring::kSoftmax);
  EXPECT_EQ(m->moe->shared_experts, 2);
  EXPECT_EQ(m->mtp_layers, 0);
}

// Issue 19 item 3: the shared expert (and its gate) were dropped, giving 13.49B / 1.86B.
TEST(HfImportMoeDetails, Qwen2MoeKeepsItsGatedSharedExpert) {
  auto m = import_fixture("qwen1.5-moe-a2.7b.config.json");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->family, "qwen2-moe");
  EXPECT_EQ(m->moe->shared_experts, 1);
  EXPECT_EQ(m->moe->shared_expert_ffn_hidden, 5632);
  EXPECT_TRUE(m->moe->shared_expert_gate);
  EXPECT_NEAR(static_cast<double>(m->total_params()) / 14.3e9, 1.0, 0.005);
  EXPECT_NEAR(static_cast<double>(m->active_params()) / 2.7e9, 1.0, 0.005);
}

TEST(HfImportMoeDetails, GptOssAlternatesSlidingAndFullAttention) {
  auto m = import_fixture("gpt-oss-120b.config.json");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_TRUE(m->bias);
  EXPECT_EQ(m->moe->expert_ffn_hidden, 2880);
  EXPECT_EQ(m->head_dim, 64);
  EXPECT_EQ(m->sliding_window, 128);
  EXPECT_EQ(m->full_attention_every, 2);
  EXPECT_EQ(m->attention_window(0), 128);
  EXPECT_EQ(m->attention_window(1), 0);
  // Half the layers attend to 128 keys: the attention core shrinks to a bit over half.
  ModelSpec full = *m;
  full.sliding_window = 0;
  const double local = attention_core_flops_per_token(*m, 4096, AttentionMask::kCausal);
  const double global = attention_core_flops_per_token(full, 4096, AttentionMask::kCausal);
  EXPECT_NEAR(local / global, 0.5 + 0.5 * (128.0 - 128.0 * 128.0 / 8192.0) / 2048.0, 1e-12);
}

TEST(HfImportMoeDetails, Llama4InterleavesDenseAndMoeLayersWithASharedExpert) {
  auto scout = import_fixture("llama4-scout-17b-16e.config.json");
  auto maverick = import_fixture("llama4-maverick-17b-128e.config.json");
  ASSERT_TRUE(scout) << scout.status().message();
  ASSERT_TRUE(maverick) << maverick.status().message();
  EXPECT_EQ(scout->moe_layers(), 48);
  EXPECT_EQ(maverick->moe_layers(), 24);
  EXPECT_FALSE(maverick->is_moe_layer(0));
  EXPECT_TRUE(maverick->is_moe_layer(1));
  EXPECT_EQ(maverick->ffn_hidden, 16384);  // dense layers: intermediate_size_mlp
  EXPECT_EQ(maverick->moe->expert_ffn_hidden, 8192);
  EXPECT_EQ(maverick->moe->shared_experts, 1);
  EXPECT_EQ(maverick->moe->scoring, RouterScoring::kSigmoid);
  EXPECT_EQ(maverick->vocab, 202048);
}

TEST(HfImportMoeDetails, NemotronHIsAHybridOfMambaAttentionAndMoe) {
  auto m = import_fixture("nemotron-3-nano-30b-a3b.config.json");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->family, "nemotron-h");
  EXPECT_TRUE(m->is_hybrid());
  EXPECT_EQ(m->mlp, MlpKind::kSquaredRelu);
  EXPECT_EQ(m->mamba_layers(), 23);
  EXPECT_EQ(m->attention_layers(), 6);
  EXPECT_EQ(m->moe_layers(), 23);
  EXPECT_EQ(m->layer_kind(0), (LayerKind{Mixer::kMamba, FfnKind::kNone}));
  EXPECT_EQ(m->layer_kind(1), (LayerKind{Mixer::kNone, FfnKind::kMoe}));
  EXPECT_EQ(m->layer_kind(5), (LayerKind{Mixer::kAttention, FfnKind::kNone}));
  ASSERT_TRUE(m->mamba);
  EXPECT_EQ(m->mamba->d_inner(), 4096);
  EXPECT_EQ(m->mamba->in_proj_dim(), 2 * 4096 + 2 * 8 * 128 + 64);
  EXPECT_EQ(m->moe->shared_ffn(), 3712);
}

// Qwen3-Next: Gated DeltaNet in three of every four layers, gated attention in the fourth, each
// followed by the MoE; planner's pattern has a block per mixer and per MLP. Module shapes as in
// transformers' Qwen3NextGatedDeltaNet and Qwen3NextAttention.
TEST(HfImportMoeDetails, Qwen3NextIsAHybridOfGatedDeltaNetAndGatedAttention) {
  auto m = import_fixture("qwen3-next-80b-a3b.config.json");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->family, "qwen3-next");
  EXPECT_EQ(m->num_layers, 96);
  std::string pattern;
  for (int i = 0; i < 12; ++i)
    pattern += "GEGEGE*E";
  EXPECT_EQ(m->layer_pattern, pattern);
  EXPECT_EQ(m->mamba_layers(), 36);
  EXPECT_EQ(m->attention_layers(), 12);
  EXPECT_EQ(m->moe_layers(), 48);
  EXPECT_TRUE(m->attention_output_gate);
  ASSERT_TRUE(m->mamba);
  EXPECT_TRUE(m->mamba->delta());
  EXPECT_EQ(m->mamba->conv_dim(), 2 * 16 * 128 + 32 * 128);                  // q | k | v
  EXPECT_EQ(m->mamba->in_proj_dim(), 2 * 16 * 128 + 2 * 32 * 128 + 2 * 32);  // qkvz | ba
  // in_proj_qkvz + in_proj_ba, conv1d (no bias), A_log and dt_bias, the norm over one head,
  // out_proj, the block's input norm.
  EXPECT_EQ(m->mamba_params(), 2048 * 12352 + 8192 * 4 + 2 * 32 + 128 + 4096 * 2048 + 2048);
  // q_proj with its gate (16·256·2), k and v (2·256 each), o_proj, the input norm.
  EXPECT_EQ(m->attention_params(), 2048 * (8192 + 1024) + 4096 * 2048 + 2048);
  EXPECT_EQ(m->moe->num_experts, 512);
  EXPECT_EQ(m->moe->top_k, 10);
  EXPECT_EQ(m->moe->shared_ffn(), 512);
  EXPECT_TRUE(m->moe->shared_expert_gate);
  // The preset is this import.
  const ModelSpec* preset = builtin_catalog().find_model("qwen3-next-80b-a3b");
  ASSERT_NE(preset, nullptr);
  EXPECT_EQ(preset->total_params(), m->total_params());
  EXPECT_EQ(preset->active_params(), m->active_params());
  EXPECT_EQ(preset->layer_pattern, m->layer_pattern);
  // layer_types, where a config lists them, say the same as full_attention_interval.
  auto text =
      testing::slurp(std::string(PLANNER_TEST_DATA_DIR) + "/hf/qwen3-next-80b-a3b.config.json");
  std::string types = "\"layer_types\": [";
  for (int l = 0; l < 48; ++l) {
    types += std::string(l > 0 ? ", " : "") +
             ((l + 1) % 4 == 0 ? "\"full_attention\"" : "\"linear_attention\"");
  }
  types += "],";
  auto listed = import_hf_config(std::string(text).insert(text.find('{') + 1, types), "l.json");
  ASSERT_TRUE(listed) << listed.status().message();
  EXPECT_EQ(listed->layer_pattern, m->layer_pattern);
}

TEST(HfImportMoeDetails, Qwen3NextKeysAreChecked) {
  auto r = import_hf_config(
      R"({"architectures": ["Qwen3NextForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
          "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100, "head_dim": 16,
          "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
          "linear_num_key_heads": 3, "linear_key_head_dim": 16, "linear_num_value_heads": 4,
          "linear_value_head_dim": 16, "layer_types": ["linear_attention", "sliding_attention"]})",
      "n.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().exit_code(), 2);
  EXPECT_EQ(r.status().message(),
            "n.json: /layer_types: layer 1 is \"sliding_attention\"; expected "
            "\"linear_attention\" or \"full_attention\"");
  auto keys = import_hf_config(
      R"({"architectures": ["Qwen3NextForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
          "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100, "head_dim": 16,
          "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
          "linear_num_key_heads": 3, "linear_key_head_dim": 16, "linear_num_value_heads": 4})",
      "k.json");
  ASSERT_FALSE(keys);
  EXPECT_EQ(keys.status().message(),
            "k.json: /linear_value_head_dim: missing required key\n"
            "k.json: /linear_num_key_heads: must divide linear_num_value_heads (4), got 3");
}

TEST(HfImportMoeDetails, DbrxAndOlmoeReadTheirOwnKeys) {
  auto dbrx = import_fixture("dbrx.config.json");
  ASSERT_TRUE(dbrx) << dbrx.status().message();
  EXPECT_EQ(dbrx->kv_heads, 8);
  EXPECT_EQ(dbrx->moe->num_experts, 16);
  EXPECT_EQ(dbrx->moe->top_k, 4);
  auto olmoe = import_fixture("olmoe-1b-7b.config.json");
  ASSERT_TRUE(olmoe) << olmoe.status().message();
  EXPECT_EQ(olmoe->moe->expert_ffn_hidden, 1024);
  EXPECT_EQ(olmoe->moe->num_experts, 64);
}

TEST(HfImportMoeDetails, BadMoeKeysAreNamedWithTheirPointers) {
  auto r = import_hf_config(
      R"({"architectures": ["DbrxForCausalLM"], "d_model": 64, "n_heads": 4, "n_layers": 2,
          "vocab_size": 100, "attn_config": 3, "ffn_config": {"moe_num_experts": 4}})",
      "d.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().exit_code(), 2);
  EXPECT_EQ(r.status().message(),
            "d.json: /attn_config: expected an object, got 3\n"
            "d.json: /ffn_config/ffn_hidden_size: missing required key\n"
            "d.json: /ffn_config/moe_top_k: missing required key");
  auto qwen = import_hf_config(
      R"({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
          "num_hidden_layers": 4, "intermediate_size": 128, "vocab_size": 100,
          "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
          "mlp_only_layers": [0, 2]})",
      "q.json");
  ASSERT_FALSE(qwen);
  EXPECT_EQ(qwen.status().message(),
            "q.json: /mlp_only_layers: planner keeps dense MLPs only in the first layers (0, 1, "
            "..., k-1); got layer 2 at position 1");
}

TEST(HfImportMoeDetails, QwenDenseLayersFirstBecomeFirstDenseLayers) {
  auto qwen = import_hf_config(
      R"({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
          "num_hidden_layers": 4, "intermediate_size": 128, "vocab_size": 100,
          "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
          "mlp_only_layers": [0, 1]})",
      "q.json");
  ASSERT_TRUE(qwen) << qwen.status().message();
  EXPECT_EQ(qwen->moe->first_dense_layers, 2);
  EXPECT_EQ(qwen->moe_layers(), 2);
}

}  // namespace
}  // namespace planner
