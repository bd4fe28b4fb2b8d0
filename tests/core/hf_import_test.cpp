#include "planner/core/hf_import.hpp"

#include <gtest/gtest.h>

#include "planner/core/loaders.hpp"
#include "support/command.hpp"

namespace planner {
namespace {

Result<ModelSpec> import_fixture(const std::string& name) {
  const std::string path = std::string(PLANNER_TEST_DATA_DIR) + "/hf/" + name;
  return import_hf_config(testing::slurp(path), name);
}

struct Fixture {
  const char* file;
  const char* family;
  std::int64_t params;  // Hugging Face model.num_parameters()
  double tolerance;     // relative
};

class HfImport : public ::testing::TestWithParam<Fixture> {};

TEST_P(HfImport, ParameterCountMatchesTheCheckpoint) {
  const Fixture& f = GetParam();
  auto m = import_fixture(f.file);
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->family, f.family);
  const double got = static_cast<double>(m->total_params());
  EXPECT_NEAR(got, static_cast<double>(f.params), static_cast<double>(f.params) * f.tolerance)
      << f.file << " imported as " << m->total_params();
  // The imported spec is a valid planner document.
  auto again = parse_model(to_json_text(*m), f.file);
  EXPECT_TRUE(again) << again.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, HfImport,
    ::testing::Values(Fixture{"llama3-8b.config.json", "llama", 8'030'261'248, 0.0},
                      Fixture{"mistral-7b.config.json", "mistral", 7'241'732'096, 0.0},
                      Fixture{"mixtral-8x7b.config.json", "mixtral", 46'702'792'704, 0.0},
                      Fixture{"gemma-7b.config.json", "gemma", 8'537'680'896, 0.0},
                      Fixture{"gpt2.config.json", "gpt2", 124'439'808, 0.0},
                      // Qwen2 has q/k/v biases only (129k parameters), which planner omits.
                      Fixture{"qwen2-7b.config.json", "qwen2", 7'615'616'512, 1e-4},
                      // NeoX: 20,554,567,680 in the checkpoint.
                      Fixture{"gpt-neox-20b.config.json", "gpt-neox", 20'554'567'680, 1e-3},
                      // Falcon-7B: parallel attention shares one LayerNorm per layer; planner
                      // counts two (4544 x 2 x 32 extra parameters).
                      Fixture{"falcon-7b.config.json", "falcon", 6'921'720'704, 1e-3},
                      // BLOOM: 176,247,271,424 (bigscience/bloom's model card); planner leaves
                      // out the LayerNorm over the embeddings (28,672).
                      Fixture{"bloom-176b.config.json", "bloom", 176'247'271'424, 1e-6},
                      // OPT-30B: "30B" (Zhang et al. 2022, arXiv:2205.01068, Table 1).
                      Fixture{"opt-30b.config.json", "opt", 30'000'000'000, 1e-2},
                      // MPT-7B: 6,649,286,656 with weight-only LayerNorms (no_bias); planner
                      // counts a bias per norm too (266,240).
                      Fixture{"mpt-7b.config.json", "mpt", 6'649'286'656, 1e-4},
                      // Phi-3-mini: "3.8 billion parameters" (arXiv:2404.14219).
                      Fixture{"phi3-mini-4k.config.json", "phi3", 3'800'000'000, 1e-2},
                      // Gemma 2 9B: 917,504,000 embedding + 8,324,201,984 other parameters
                      // (Gemma 2 report, arXiv:2408.00118, Table 2); planner counts two of
                      // the four norms of a layer (301,056 fewer).
                      Fixture{"gemma2-9b.config.json", "gemma2", 9'241'705'984, 1e-4},
                      // Gemma 3 1B: 302M embedding + 698M other parameters (Gemma 3 report,
                      // arXiv:2503.19786, Table 1).
                      Fixture{"gemma3-1b.config.json", "gemma3", 1'000'000'000, 1e-3},
                      // OLMo 2 7B: 7,298,617,344 by the modules of transformers' Olmo2 (its
                      // q/k norms and four norms a layer; planner counts two, 262,144 fewer).
                      Fixture{"olmo2-7b.config.json", "olmo2", 7'298'617'344, 1e-4},
                      // OLMo-7B: 6,888,095,744 by the modules of transformers' Olmo (LayerNorms
                      // without weights; planner counts 2 x 4096 a norm, 532,480 more).
                      Fixture{"olmo-7b.config.json", "olmo", 6'888'095'744, 1e-4}),
    [](const auto& p) {
      std::string name = p.param.file;
      name = name.substr(0, name.find('.'));
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name;
    });

TEST(HfImportDetails, ReadsTheShapes) {
  auto llama = import_fixture("llama3-8b.config.json");
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->kv_heads, 8);
  EXPECT_EQ(llama->mlp, MlpKind::kSwiglu);
  EXPECT_EQ(llama->norm, NormKind::kRmsNorm);
  EXPECT_EQ(llama->max_seq_len, 8192);
  auto falcon = import_fixture("falcon-7b.config.json");
  ASSERT_TRUE(falcon);
  EXPECT_EQ(falcon->kv_heads, 1);  // multi-query attention
  EXPECT_EQ(falcon->head_dim, 64);
  auto gemma = import_fixture("gemma-7b.config.json");
  ASSERT_TRUE(gemma);
  EXPECT_EQ(gemma->head_dim, 256);  // not hidden / heads = 192
  EXPECT_TRUE(gemma->tied_embeddings);
  auto mixtral = import_fixture("mixtral-8x7b.config.json");
  ASSERT_TRUE(mixtral);
  ASSERT_TRUE(mixtral->is_moe());
  EXPECT_EQ(mixtral->moe->top_k, 2);
}

TEST(HfImportDetails, ReadsPositionsBiasesAndLocalAttention) {
  auto bloom = import_fixture("bloom-176b.config.json");
  ASSERT_TRUE(bloom);
  EXPECT_EQ(bloom->position_embedding, PositionEmbedding::kAlibi);
  EXPECT_TRUE(bloom->bias);
  EXPECT_EQ(bloom->ffn_hidden, 4 * 14336);
  EXPECT_EQ(bloom->max_seq_len, 2048);
  auto mpt = import_fixture("mpt-7b.config.json");
  ASSERT_TRUE(mpt);
  EXPECT_EQ(mpt->position_embedding, PositionEmbedding::kAlibi);
  EXPECT_FALSE(mpt->bias);
  EXPECT_TRUE(mpt->tied_embeddings);
  EXPECT_EQ(mpt->ffn_hidden, 16384);
  auto opt = import_fixture("opt-30b.config.json");
  ASSERT_TRUE(opt);
  EXPECT_EQ(opt->position_embedding, PositionEmbedding::kLearned);
  EXPECT_TRUE(opt->bias);
  EXPECT_EQ(opt->ffn_hidden, 28672);
  // Gemma 2: local attention in the even layers (0-based), global in the odd ones.
  auto gemma2 = import_fixture("gemma2-9b.config.json");
  ASSERT_TRUE(gemma2);
  EXPECT_EQ(gemma2->attention_window(0), 4096);
  EXPECT_EQ(gemma2->attention_window(1), 0);
  // Gemma 3: five local layers, then a global one.
  auto gemma3 = import_fixture("gemma3-1b.config.json");
  ASSERT_TRUE(gemma3);
  EXPECT_EQ(gemma3->kv_heads, 1);
  EXPECT_EQ(gemma3->head_dim, 256);
  EXPECT_EQ(gemma3->attention_window(4), 512);
  EXPECT_EQ(gemma3->attention_window(5), 0);
  EXPECT_EQ(gemma3->attention_window(6), 512);
  // Gemma 1 has no local attention.
  auto gemma = import_fixture("gemma-7b.config.json");
  ASSERT_TRUE(gemma);
  EXPECT_EQ(gemma->attention_window(0), 0);
}

TEST(HfImportDetails, WhatPlannerCannotModelIsNamed) {
  // OPT-350m: 512-wide embeddings projected in and out of a 1024-wide model.
  auto opt = import_hf_config(
      R"({"architectures": ["OPTForCausalLM"], "hidden_size": 1024, "ffn_dim": 4096,
          "num_hidden_layers": 24, "num_attention_heads": 16, "vocab_size": 50272,
          "word_embed_proj_dim": 512})",
      "opt-350m.json");
  ASSERT_FALSE(opt);
  EXPECT_EQ(opt.status().exit_code(), 2);
  EXPECT_EQ(opt.status().message(),
            "opt-350m.json: /word_embed_proj_dim: embeddings of another width than hidden_size "
            "(1024, projected in and out) are not modelled, got 512");
  auto mpt = import_hf_config(
      R"({"architectures": ["MPTForCausalLM"], "d_model": 2048, "n_heads": 16, "n_layers": 24,
          "vocab_size": 50432, "ffn_config": {"ffn_type": "te_ln_mlp"},
          "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 4}})",
      "mpt.json");
  ASSERT_FALSE(mpt);
  EXPECT_EQ(mpt.status().message(),
            "mpt.json: /ffn_config/ffn_type: planner imports MPT's mptmlp feed-forward, got "
            "\"te_ln_mlp\"");
  auto gqa = import_hf_config(
      R"({"architectures": ["MPTForCausalLM"], "d_model": 2048, "n_heads": 16, "n_layers": 24,
          "vocab_size": 50432, "attn_config": {"attn_type": "grouped_query_attention",
          "kv_n_heads": 4}})",
      "mpt.json");
  ASSERT_TRUE(gqa) << gqa.status().message();
  EXPECT_EQ(gqa->kv_heads, 4);
  EXPECT_EQ(gqa->position_embedding, PositionEmbedding::kLearned);
}

TEST(HfImportDetails, UnknownArchitectureIsAClearError) {
  auto bert = import_fixture("bert.config.json");
  ASSERT_FALSE(bert);
  EXPECT_EQ(bert.status().exit_code(), 2);
  EXPECT_EQ(bert.status().message(),
            "bert.config.json: /architectures/0: unsupported architecture \"BertForMaskedLM\"; "
            "planner imports: " +
                supported_hf_architectures());
}

TEST(HfImportDetails, MissingKeysAreNamed) {
  auto r =
      import_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096})", "c.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "c.json: /num_hidden_layers: missing required key\n"
            "c.json: /num_attention_heads: missing required key\n"
            "c.json: /intermediate_size: missing required key\n"
            "c.json: /vocab_size: missing required key");
}

// A Llama config with extra keys, given as JSON members (`"key": value, ...`).
std::string llama_config(const std::string& extra) {
  std::string base = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 14336)";
  return base + (extra.empty() ? "" : ", " + extra) + "}";
}

// The Llama config with the usual heads, layers and vocabulary and `member` (`"key": value`),
// which replaces the usual member of the same key.
std::string llama_with(const std::string& member) {
  std::string members;
  bool replaced = false;
  for (const std::string usual :
       {R"("num_attention_heads": 32)", R"("num_hidden_layers": 32)", R"("vocab_size": 128256)"}) {
    const bool same = !member.empty() && member.rfind(usual.substr(0, usual.find(':')), 0) == 0;
    replaced = replaced || same;
    members += (members.empty() ? "" : ", ") + (same ? member : usual);
  }
  if (!member.empty() && !replaced) members += ", " + member;
  return llama_config(members);
}

TEST(HfImportDetails, ValuesBeyondIntAreRefusedNotTruncated) {
  struct Case {
    const char* member;
    const char* message;
  };
  for (const Case& c : {
           // 2^32 heads used to be cut to 0 in an int (then `hidden % heads` divided by zero).
           Case{R"("num_attention_heads": 4294967296)",
                "h.json: /num_attention_heads: must be <= 1000000, got 4294967296"},
           // 2^32 + 32 layers used to import as 32 layers.
           Case{R"("num_hidden_layers": 4294967328)",
                "h.json: /num_hidden_layers: must be <= 100000, got 4294967328"},
           // Beyond 64 bits.
           Case{R"("vocab_size": 18446744073709551615)",
                "h.json: /vocab_size: must be <= 100000000, got 18446744073709551615"},
       }) {
    auto imported = import_hf_config(llama_with(c.member), "h.json");
    ASSERT_FALSE(imported) << c.member;
    EXPECT_EQ(imported.status().exit_code(), 2);
    EXPECT_EQ(imported.status().message(), c.message);
  }
  EXPECT_TRUE(import_hf_config(llama_with(""), "h.json"));
}

TEST(HfImportDetails, ImportedModelsAreNamedAfterTheCheckpointOrTheFile) {
  // _name_or_path wins ("Qwen/Qwen2-7B" -> "Qwen2-7B").
  auto named = import_hf_config(llama_with(R"("_name_or_path": "meta-llama/Meta-Llama-3-8B")"),
                                "x/config.json");
  ASSERT_TRUE(named) << named.status().message();
  EXPECT_EQ(named->name, "Meta-Llama-3-8B");
  // Else the file name, without .json and .config ...
  auto file = import_hf_config(llama_with(""), "configs/qwen2-7b.config.json");
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->name, "qwen2-7b");
  // ... or, for the usual <model>/config.json, the directory's name; never model_type, so two
  // imports of the same architecture do not collide.
  auto dir = import_hf_config(llama_with(""), "downloads/Llama-3.1-8B/config.json");
  ASSERT_TRUE(dir) << dir.status().message();
  EXPECT_EQ(dir->name, "Llama-3.1-8B");
  // An explicit name wins over everything.
  auto given = import_hf_config(llama_with(""), "a/config.json", "mine");
  ASSERT_TRUE(given);
  EXPECT_EQ(given->name, "mine");
}

}  // namespace
}  // namespace planner
