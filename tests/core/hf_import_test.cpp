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
                      Fixture{"falcon-7b.config.json", "falcon", 6'921'720'704, 1e-3}),
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
