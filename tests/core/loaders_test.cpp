#include "planner/core/loaders.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "planner/core/rank_grid.hpp"

namespace planner {
namespace {

constexpr const char* kPlan = R"({
  "schema_version": 1,
  "kind": "plan",
  "name": "gpt3 on selene",
  "model": "gpt3-175b",
  "cluster": {"nodes": 128, "gpus_per_node": 8, "gpu": "A100-80GB", "topology": "dgx-a100-superpod"},
  "training": {"global_batch_size": 1536, "seq_length": 2048, "precision": "bf16", "token_budget": 3e11},
  "parallel": {"tp": 8, "pp": 8, "micro_batch_size": 1, "sequence_parallel": true,
               "recompute": "selective", "schedule": "interleaved", "virtual_stages": 3}
})";

// `text` with the first occurrence of `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.substr(0, at) + to + text.substr(at + from.size());
}

TEST(Loaders, PlanDerivesDataParallelAndMicrobatches) {
  auto plan = parse_plan(kPlan, "plan.json", builtin_catalog());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(plan->parallel.dp, 16);
  EXPECT_EQ(plan->num_microbatches(), 96);
  EXPECT_EQ(plan->gpu.name, "A100-SXM4-80GB");
  EXPECT_EQ(plan->model.num_layers, 96);
  EXPECT_DOUBLE_EQ(plan->training.token_budget, 3e11);
  EXPECT_EQ(short_label(plan->parallel), "tp8 pp8 dp16 sp mb1 interleaved/v3 rc-selective");
}

TEST(Loaders, PlanRoundTripsThroughJson) {
  auto plan = parse_plan(kPlan, "plan.json", builtin_catalog());
  ASSERT_TRUE(plan);
  const std::string text = to_json_text(*plan);
  auto again = parse_plan(text, "again.json", builtin_catalog());
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(to_json_text(*again), text);
}

TEST(Loaders, PlanCrossChecksReportEveryViolation) {
  // 896 GPUs = 7 x 8 x 16
  const std::string text =
      replaced(replaced(kPlan, "\"tp\": 8", "\"tp\": 7"), "\"nodes\": 128", "\"nodes\": 112");
  auto plan = parse_plan(text, "plan.json", builtin_catalog());
  ASSERT_FALSE(plan);
  const std::string msg = plan.status().message();
  EXPECT_NE(msg.find("plan.json: /parallel/tp: must divide heads (96), got 7"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("plan.json: /parallel/tp: must divide vocab (51200)"), std::string::npos)
      << msg;
  EXPECT_EQ(plan.status().exit_code(), 2);
}

TEST(Loaders, WorldSizeMismatchSaysHowItIsComputed) {
  const std::string text =
      replaced(kPlan, "\"micro_batch_size\"", "\"dp\": 4, \"micro_batch_size\"");
  auto plan = parse_plan(text, "p.json", builtin_catalog());
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.status().message().find(
                "p.json: /parallel: tp x cp x dp x pp = 8 x 1 x 4 x 8 = 256, but the cluster has "
                "1024 GPUs (nodes x gpus_per_node = 128 x 8)"),
            std::string::npos)
      << plan.status().message();
}

TEST(Loaders, MissingFileIsNotFound) {
  auto r = load_plan_file("/nonexistent/plan.json", builtin_catalog());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "/nonexistent/plan.json: no such file");
}

TEST(Loaders, DocumentTypesDispatchOnKind) {
  DocumentTypes types;
  register_core_documents(types, builtin_catalog());
  Diagnostics ok("m.json");
  types.validate(R"({"schema_version": 1, "kind": "training", "global_batch_size": 8,
                     "seq_length": 128})",
                 ok);
  EXPECT_TRUE(ok.empty()) << ok.to_string();
  Diagnostics bad("m.json");
  types.validate(R"({"schema_version": 1, "kind": "modle"})", bad);
  EXPECT_EQ(bad.to_string(),
            "m.json: /kind: unknown document kind \"modle\"; expected one of: model, gpu, "
            "training, parallel, cluster, plan");
}

TEST(Loaders, AtomicWriteReplacesTheFile) {
  const std::string path = ::testing::TempDir() + "/atomic.json";
  ASSERT_TRUE(write_text_file_atomic(path, "one"));
  ASSERT_TRUE(write_text_file_atomic(path, "two"));
  auto text = read_text_file(path);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "two");
}

}  // namespace
}  // namespace planner
