// The published-runs reader: the reference data reads, nulls stay "not published", and bad input is
// an error naming the file, the JSON pointer and the run.
#include "planner/core/published_run.hpp"

#include <gtest/gtest.h>

#include <string>

namespace planner {
namespace {

const std::string kReference =
    std::string(PLANNER_TEST_DATA_DIR) + "/reference/published_runs.json";

// A minimal valid record with `extra` spliced into its parallel section.
std::string record(const std::string& id, const std::string& parallel_extra = "",
                   const std::string& top_extra = "") {
  return R"({"id": ")" + id + R"(", "source": "s", "model": {"layers": 2, "hidden": 64,
    "heads": 4, "kv_heads": null, "ffn_hidden": 256, "seq_len": 128, "vocab": 1000},
    "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 8, "gpus_per_node": 8},
    "parallel": {"tp": 2, "pp": 1, "global_batch": 16, "micro_batch": null)" +
         parallel_extra + R"(},
    "precision": "bf16", "measured": {"step_time_s": 1.5, "mfu": null},
    "derived": {"tflops_per_gpu": 300, "how": "x"},
    "flops_convention": "NeMo model TFLOP/s", "reliability": "A")" +
         top_extra + "}";
}

TEST(PublishedRuns, ReferenceDataReads) {
  auto runs = load_published_runs_file(kReference);
  ASSERT_TRUE(runs) << runs.status().message();
  ASSERT_GE(runs->size(), 40u);
  const PublishedRun& first = runs->front();
  EXPECT_EQ(first.id, "narayanan21_t1_1p7B");
  EXPECT_EQ(first.model.layers, 24);
  EXPECT_EQ(first.hardware.num_gpus, 32);
  EXPECT_EQ(first.parallel.recompute, Recompute::kFull);
  EXPECT_FALSE(first.parallel.micro_batch.has_value());
  EXPECT_EQ(first.reliability, Reliability::kA);
  EXPECT_EQ(flop_convention_of(first.flops_convention), FlopConvention::kMegatronEq3);
  // Published as derived only.
  EXPECT_FALSE(first.measured.step_time_s.has_value());
  ASSERT_TRUE(first.step_time_s().has_value());
  EXPECT_DOUBLE_EQ(*first.step_time_s(), 3.53);
  for (const PublishedRun& r : *runs)
    EXPECT_TRUE(r.unknown_keys.empty()) << r.id << ": " << r.unknown_keys.front();
}

TEST(PublishedRuns, NullsAreNotPublished) {
  auto runs = parse_published_runs("[" + record("a") + "]", "runs.json");
  ASSERT_TRUE(runs) << runs.status().message();
  const PublishedRun& r = runs->at(0);
  EXPECT_FALSE(r.model.kv_heads.has_value());
  EXPECT_FALSE(r.parallel.micro_batch.has_value());
  EXPECT_FALSE(r.parallel.dp.has_value());
  EXPECT_FALSE(r.measured.mfu.has_value());
  EXPECT_EQ(r.step_time_s(), 1.5);
  EXPECT_EQ(r.tflops_per_gpu(), 300);
  EXPECT_EQ(r.derived_how, "x");
  EXPECT_EQ(flop_convention_of(r.flops_convention), FlopConvention::kMegatronModel);
}

TEST(PublishedRuns, UnknownKeysAreListedNotFatal) {
  auto runs = parse_published_runs("[" + record("a", R"(, "experts": 8)", R"(, "extra": 1)") + "]",
                                   "runs.json");
  ASSERT_TRUE(runs) << runs.status().message();
  EXPECT_EQ(runs->at(0).unknown_keys, (std::vector<std::string>{"/extra", "/parallel/experts"}));
}

TEST(PublishedRuns, BadValuesNameFilePointerAndRun) {
  auto runs = parse_published_runs("[" + record("a") + "," + record("b", R"(, "dp": "8")") + "]",
                                   "runs.json");
  ASSERT_FALSE(runs);
  EXPECT_EQ(runs.status().code(), StatusCode::kInvalidInput);
  const std::string msg = runs.status().message();
  EXPECT_NE(msg.find("runs.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/1/parallel/dp"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run b"), std::string::npos) << msg;
}

TEST(PublishedRuns, ImpossibleValuesAndDuplicatesAreErrors) {
  auto runs = parse_published_runs("[" + record("a", R"(, "zero_stage": 7)") + "," +
                                       record("a", R"(, "recompute": "most")") + "]",
                                   "runs.json");
  ASSERT_FALSE(runs);
  const std::string msg = runs.status().message();
  EXPECT_NE(msg.find("/0/parallel/zero_stage"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/1/parallel/recompute"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/1/id: duplicate run id"), std::string::npos) << msg;
}

TEST(PublishedRuns, NotAnArrayOrNotJson) {
  auto obj = parse_published_runs(R"({"runs": []})", "runs.json");
  ASSERT_FALSE(obj);
  EXPECT_NE(obj.status().message().find("expected an array"), std::string::npos);
  auto broken = parse_published_runs("[{", "runs.json");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidInput);
  auto missing = load_published_runs_file(std::string(PLANNER_TEST_DATA_DIR) + "/no-such.json");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("no-such.json"), std::string::npos);
}

TEST(PublishedRuns, FlopConventions) {
  EXPECT_EQ(flop_convention_of("Megatron 2019 accounting (same as eq.(3))"),
            FlopConvention::kMegatronEq3);
  EXPECT_EQ(flop_convention_of("MosaicML llm-foundry MFU"), FlopConvention::kMosaicMl);
  EXPECT_EQ(flop_convention_of("something else"), FlopConvention::kUnknown);
  EXPECT_TRUE(counts_recompute(FlopConvention::kMegatronEq3));
  EXPECT_FALSE(counts_recompute(FlopConvention::kMosaicMl));
}

}  // namespace
}  // namespace planner
