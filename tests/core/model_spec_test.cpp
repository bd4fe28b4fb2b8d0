#include "planner/core/model_spec.hpp"

#include <gtest/gtest.h>

#include "planner/core/catalog.hpp"

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

}  // namespace
}  // namespace planner
