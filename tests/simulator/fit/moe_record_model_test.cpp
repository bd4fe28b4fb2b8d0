// MoE records of models no preset has (moe_record_model.hpp): built from the record's fields and
// the config keys its notes quote, checked against the presets (the reference sample's records
// built as if no preset existed) and against Hugging Face configs the importer reads (records
// written as the reference data's curators write them).
#include "planner/fit/moe_record_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "planner/core/hf_import.hpp"
#include "planner/core/published_run.hpp"

namespace planner::fit {
namespace {

const std::string kData = std::string(PLANNER_TEST_DATA_DIR);

std::vector<PublishedRun> sample() {
  auto runs = load_published_runs_file(kData + "/reference/moe_runs_sample.json");
  EXPECT_TRUE(runs) << runs.status().message();
  return runs ? *runs : std::vector<PublishedRun>{};
}

ModelSpec hf(const std::string& file) {
  std::ifstream in(kData + "/hf/" + file);
  std::stringstream text;
  text << in.rdbuf();
  auto m = import_hf_config(text.str(), file);
  EXPECT_TRUE(m) << file << ": " << m.status().message();
  return m ? *m : ModelSpec{};
}

double relative(std::int64_t a, std::int64_t b) {
  return std::abs(static_cast<double>(a - b)) / static_cast<double>(b);
}

// The same model: structure and parameter counts within `tolerance`.
void expect_same_model(const ModelSpec& built, const ModelSpec& want, double tolerance) {
  SCOPED_TRACE(want.name);
  EXPECT_EQ(built.num_layers, want.num_layers);
  EXPECT_EQ(built.heads, want.heads);
  EXPECT_EQ(built.kv_heads, want.kv_heads);
  EXPECT_EQ(built.head_dim, want.head_dim);
  EXPECT_EQ(built.mla.has_value(), want.mla.has_value());
  EXPECT_EQ(built.mlp, want.mlp);
  EXPECT_EQ(built.norm, want.norm);
  EXPECT_EQ(built.bias, want.bias);
  EXPECT_EQ(built.vocab, want.vocab);
  EXPECT_EQ(built.tied_embeddings, want.tied_embeddings);
  EXPECT_EQ(built.moe_layers(), want.moe_layers());
  EXPECT_EQ(built.attention_layers(), want.attention_layers());
  EXPECT_EQ(built.mamba_layers(), want.mamba_layers());
  EXPECT_EQ(built.mtp_layers, want.mtp_layers);
  EXPECT_EQ(built.sliding_window, want.sliding_window);
  EXPECT_EQ(built.full_attention_every, want.full_attention_every);
  ASSERT_TRUE(built.moe && want.moe);
  EXPECT_EQ(built.moe->shared_ffn(), want.moe->shared_ffn());
  EXPECT_EQ(built.moe->first_dense_layers, want.moe->first_dense_layers);
  EXPECT_EQ(built.moe->layer_freq, want.moe->layer_freq);
  EXPECT_EQ(built.moe->expert_groups, want.moe->expert_groups);
  EXPECT_LT(relative(built.total_params(), want.total_params()), tolerance)
      << built.total_params() << " vs " << want.total_params();
  EXPECT_LT(relative(built.active_params(), want.active_params()), tolerance)
      << built.active_params() << " vs " << want.active_params();
}

const ChosenField* note(const std::vector<ChosenField>& notes, const std::string& field) {
  for (const ChosenField& n : notes) {
    if (n.field == field) return &n;
  }
  return nullptr;
}

// Every model of the reference sample, built from its record as if no preset existed, is its
// preset: MLA, dense first layers, group-limited routing and MTP (DeepSeek-V3), head_dim apart
// from hidden / heads (Qwen3), alternating sliding windows and biases (GPT-OSS), the hybrid
// pattern and Mamba-2 mixer (Nemotron 3 Nano), the family's vocabulary (Mixtral).
TEST(MoeRecordModel, RecordsOfThePresetsModelsBuildThePresets) {
  const auto runs = sample();
  ASSERT_FALSE(runs.empty());
  std::set<std::string> seen;
  for (const PublishedRun& run : runs) {
    if (!seen.insert(run.model.name).second) continue;
    std::vector<ChosenField> notes;
    auto built = moe_model_from_record(run, builtin_catalog(), notes);
    ASSERT_TRUE(built) << run.id << ": " << built.status().message();
    const ModelSpec* preset = builtin_catalog().find_model(run.model.name);
    ASSERT_NE(preset, nullptr) << run.model.name;
    if (preset->mamba) {
      // Nemotron's notes do not give its Mamba-2 groups (8): one group, 3 % fewer active
      // parameters, until they do.
      ASSERT_TRUE(built->mamba);
      EXPECT_EQ(built->mamba->groups, 1);
      built->mamba->groups = preset->mamba->groups;
    }
    expect_same_model(*built, *preset, 0.005);
    const ChosenField* structure = note(notes, "model structure");
    ASSERT_NE(structure, nullptr) << run.id;
    EXPECT_EQ(structure->value, "from the record");
  }
  EXPECT_GE(seen.size(), 5u);
}

PublishedRun record(const std::string& name, int layers, std::int64_t hidden, int heads,
                    std::optional<int> kv_heads, std::optional<std::int64_t> ffn, int experts,
                    int top_k, int shared, std::int64_t expert_ffn, std::int64_t vocab,
                    const std::string& arch_notes) {
  PublishedRun run;
  run.id = name + "_record";
  run.source = "test";
  run.model.name = name;
  run.model.layers = layers;
  run.model.hidden = hidden;
  run.model.heads = heads;
  run.model.kv_heads = kv_heads;
  run.model.ffn_hidden = ffn;
  run.model.experts = experts;
  run.model.top_k = top_k;
  run.model.shared_experts = shared;
  run.model.expert_ffn_hidden = expert_ffn;
  run.model.vocab = vocab;
  run.model.seq_len = 4096;
  run.model.arch_notes = arch_notes;
  return run;
}

// Models no preset has, written as the reference data's records are (fields, and the config keys
// the fields cannot hold in the notes), match what the Hugging Face importer reads from their
// config.json within 1 %.
TEST(MoeRecordModel, ModelsWithoutAPresetMatchTheirConfigs) {
  struct Case {
    PublishedRun run;
    std::string config;
  };
  const Case cases[] = {
      {record("DeepSeek-V2-Lite", 27, 2048, 16, 16, 10944, 64, 6, 2, 1408, 102400,
              "MLA: q_lora_rank null, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim "
              "64, v_head_dim 128; first_k_dense_replace 1, moe_layer_freq 1; softmax routing"),
       "deepseek-v2-lite.config.json"},
      {record("OLMoE-1B-7B", 16, 2048, 16, 16, std::nullopt, 64, 8, 0, 1024, 50304,
              "every layer MoE; tie_word_embeddings false"),
       "olmoe-1b-7b.config.json"},
      {record("Qwen1.5-MoE-A2.7B", 24, 2048, 16, 16, 5632, 60, 4, 1, 1408, 151936,
              "shared_expert_intermediate_size 5632 (one gated shared expert); "
              "decoder_sparse_step 1"),
       "qwen1.5-moe-a2.7b.config.json"},
      {record("Llama-4-Scout-17B-16E", 48, 5120, 40, 8, 16384, 16, 1, 1, 8192, 202048,
              "head_dim 128; interleave_moe_layer_step 1; one shared expert; sigmoid routing"),
       "llama4-scout-17b-16e.config.json"},
      {record("Llama-4-Maverick-17B-128E", 48, 5120, 40, 8, 16384, 128, 1, 1, 8192, 202048,
              "head_dim 128; interleave_moe_layer_step 2 (dense and MoE layers alternate, the "
              "dense ones intermediate_size_mlp 16384)"),
       "llama4-maverick-17b-128e.config.json"},
      {record("GLM-4.5-Air", 46, 4096, 96, 8, 10944, 128, 8, 1, 1408, 151552,
              "head_dim 128; first_k_dense_replace 1; n_group 1, topk_group 1; sigmoid; "
              "num_nextn_predict_layers 1"),
       "glm-4.5-air.config.json"},
      {record("Qwen3-Next-80B-A3B", 48, 2048, 16, 2, 5120, 512, 10, 1, 512, 151936,
              "hybrid: Gated DeltaNet in three of four layers, full_attention_interval 4 (gated "
              "attention, head_dim 256); linear_num_key_heads 16, linear_key_head_dim 128, "
              "linear_num_value_heads 32, linear_value_head_dim 128, linear_conv_kernel_dim 4; "
              "shared_expert_intermediate_size 512"),
       "qwen3-next-80b-a3b.config.json"},
  };
  for (const Case& c : cases) {
    std::vector<ChosenField> notes;
    auto built = moe_model_from_record(c.run, builtin_catalog(), notes);
    ASSERT_TRUE(built) << c.run.id << ": " << built.status().message();
    ModelSpec want = hf(c.config);
    expect_same_model(*built, want, 0.01);
  }
}

// What the fields and notes cannot give is an error naming the field, never a guess: no
// vocabulary and no preset of the family, MLA without all its dimensions, dense layers without
// their width, a pattern without its mixer.
TEST(MoeRecordModel, MissingFieldsAreErrorsThatNameThem) {
  std::vector<ChosenField> notes;
  PublishedRun run = record("Acme-MoE", 24, 2048, 16, 4, 5632, 64, 4, 0, 1024, 32000, "");
  auto ok = moe_model_from_record(run, builtin_catalog(), notes);
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_EQ(ok->kv_heads, 4);
  EXPECT_EQ(ok->head_dim, 128);
  EXPECT_EQ(ok->moe_layers(), 24);

  auto fails_with = [&](PublishedRun r, const std::string& what) {
    auto m = moe_model_from_record(r, builtin_catalog(), notes);
    ASSERT_FALSE(m) << r.id;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(m.status().message().find(what), std::string::npos) << m.status().message();
  };
  PublishedRun no_vocab = run;
  no_vocab.model.vocab.reset();
  fails_with(no_vocab, "model.vocab is not published");
  PublishedRun half_mla = run;
  half_mla.model.arch_notes = "kv_lora_rank 512, qk_rope_head_dim 64";
  fails_with(half_mla, "qk_nope_head_dim");
  PublishedRun dense = run;
  dense.model.ffn_hidden.reset();
  dense.model.arch_notes = "first_k_dense_replace 2";
  fails_with(dense, "model.ffn_hidden is not published");
  PublishedRun hybrid = run;
  hybrid.model.arch_notes = "hybrid_override_pattern \"MEME*E\"";
  fails_with(hybrid, "mamba_num_heads");
  PublishedRun deltanet = run;
  deltanet.model.arch_notes = "Gated DeltaNet, linear_num_value_heads 32";
  fails_with(deltanet, "linear_key_head_dim");
  PublishedRun scattered = run;
  scattered.model.arch_notes = "mlp_only_layers [0, 5]";
  fails_with(scattered, "mlp_only_layers");

  // A structure the notes leave out shows in the parameter count: Llama 4 Maverick without its
  // interleaving is twice its 400 B.
  PublishedRun maverick = record("Llama-4-Maverick-Untold", 48, 5120, 40, 8, 16384, 128, 1, 1, 8192,
                                 202048, "head_dim 128");
  maverick.model.params_billion = 400;
  notes.clear();
  auto untold = moe_model_from_record(maverick, builtin_catalog(), notes);
  ASSERT_TRUE(untold) << untold.status().message();
  ASSERT_NE(note(notes, "model structure"), nullptr);
  EXPECT_NE(note(notes, "model structure")->reason.find("may leave out part of the structure"),
            std::string::npos)
      << note(notes, "model structure")->reason;
  maverick.model.arch_notes = "head_dim 128; interleave_moe_layer_step 2";
  notes.clear();
  ASSERT_TRUE(moe_model_from_record(maverick, builtin_catalog(), notes));
  EXPECT_EQ(note(notes, "model structure")->reason.find("may leave out"), std::string::npos)
      << note(notes, "model structure")->reason;

  // The family's vocabulary, noted, where the record gives none.
  PublishedRun mixtral =
      record("Mixtral-8x7B-Instruct", 32, 4096, 32, 8, std::nullopt, 8, 2, 0, 14336, 0, "");
  mixtral.model.vocab.reset();
  notes.clear();
  auto m = moe_model_from_record(mixtral, builtin_catalog(), notes);
  ASSERT_TRUE(m) << m.status().message();
  const ChosenField* vocab = note(notes, "/model/vocab");
  ASSERT_NE(vocab, nullptr);
  EXPECT_NE(vocab->reason.find("mixtral"), std::string::npos) << vocab->reason;
}

}  // namespace
}  // namespace planner::fit
