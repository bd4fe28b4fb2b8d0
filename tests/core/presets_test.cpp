#include <gtest/gtest.h>

#include "planner/core/catalog.hpp"
#include "planner/core/loaders.hpp"

namespace planner {
namespace {

TEST(Presets, EveryBuiltinPresetLoads) {
  auto catalog = Catalog::load_builtin();
  ASSERT_TRUE(catalog) << catalog.status().message();
  EXPECT_GE(catalog->gpus().size(), 8u);
  EXPECT_GE(catalog->models().size(), 12u);
  for (const GpuSpec& g : catalog->gpus()) {
    EXPECT_FALSE(g.source.empty()) << g.name;
    EXPECT_GT(g.hbm.raw(), 0) << g.name;
    // GPUs train in 16 bits; the cpu-host pseudo-GPU (planner exec's cpu backend) in fp32 only.
    EXPECT_TRUE(g.supports(Precision::kFp16) || g.supports(Precision::kBf16) ||
                g.name == "cpu-host")
        << g.name;
    for (const PriceEntry& p : g.prices) {
      EXPECT_FALSE(p.date.empty()) << g.name;
      EXPECT_FALSE(p.source.empty()) << g.name;
    }
  }
}

TEST(Presets, RequiredPresetsArePresent) {
  const Catalog& c = builtin_catalog();
  for (const char* gpu :
       {"V100", "A100-40GB", "A100-80GB", "H100", "H200", "B200", "MI300X", "L40S"}) {
    EXPECT_NE(c.find_gpu(gpu), nullptr) << gpu;
  }
  for (const char* model : {"gpt3-175b", "megatron-1.7b", "megatron-1t", "llama3-8b", "llama3-70b",
                            "llama3-405b", "mixtral-8x7b", "gpt-neox-20b", "bloom-176b"}) {
    EXPECT_NE(c.find_model(model), nullptr) << model;
  }
}

TEST(Presets, LookupIgnoresCaseAndAcceptsAliases) {
  const Catalog& c = builtin_catalog();
  ASSERT_NE(c.find_gpu("h100"), nullptr);
  EXPECT_EQ(c.find_gpu("h100")->name, "H100-SXM5-80GB");
  EXPECT_EQ(c.find_model("Turing-NLG-530B")->name, "megatron-529.6b");
  auto missing = c.gpu("H900");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("known GPUs: "), std::string::npos);
}

TEST(Presets, SerialisedPresetsLoadBackUnchanged) {
  for (const ModelSpec& m : builtin_catalog().models()) {
    auto again = parse_model(to_json_text(m), m.name);
    ASSERT_TRUE(again) << again.status().message();
    EXPECT_EQ(to_json_text(*again), to_json_text(m));
    EXPECT_EQ(again->total_params(), m.total_params());
  }
  for (const GpuSpec& g : builtin_catalog().gpus()) {
    auto again = parse_gpu(to_json_text(g), g.name);
    ASSERT_TRUE(again) << again.status().message();
    EXPECT_EQ(to_json_text(*again), to_json_text(g));
  }
}

}  // namespace
}  // namespace planner
