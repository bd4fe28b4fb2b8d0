#include "planner/core/loaders.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "planner/core/rank_grid.hpp"
#include "support/command.hpp"

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

// A plan that parse_plan() refuses (exit code 2) with `message` at `field`.
void expect_plan_error(const std::string& text, const std::string& field,
                       const std::string& message) {
  auto bad = parse_plan(text, "plan.json", builtin_catalog());
  ASSERT_FALSE(bad) << message;
  EXPECT_NE(bad.status().message().find(field + ": " + message), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(bad.status().exit_code(), 2);
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

// An fp8 plan states its scaling recipe (default delayed) and writes it back; an unknown recipe,
// or MXFP8 on a GPU before Blackwell, is named with its field.
TEST(Loaders, Fp8RecipeIsATrainingField) {
  ASSERT_NE(std::string(kPlan).find("\"precision\": \"bf16\""), std::string::npos);
  const std::string h100 =
      replaced(replaced(kPlan, "\"A100-80GB\", \"topology\": \"dgx-a100-superpod\"",
                        "\"H100\", \"topology\": \"dgx-h100-superpod\""),
               "\"precision\": \"bf16\"", "\"precision\": \"fp8\"");
  const std::string current = replaced(h100, "\"precision\": \"fp8\"",
                                       "\"precision\": \"fp8\", \"fp8_recipe\": \"current\"");
  auto plan = parse_plan(current, "plan.json", builtin_catalog());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(plan->training.fp8_recipe, Fp8Recipe::kCurrent);
  EXPECT_NE(to_json_text(*plan).find("\"fp8_recipe\": \"current\""), std::string::npos);
  auto defaulted = parse_plan(h100, "plan.json", builtin_catalog());
  ASSERT_TRUE(defaulted) << defaulted.status().message();
  EXPECT_EQ(defaulted->training.fp8_recipe, Fp8Recipe::kDelayed);
  EXPECT_NE(to_json_text(*defaulted).find("\"fp8_recipe\": \"delayed\""), std::string::npos);
  auto bad =
      parse_plan(replaced(current, "\"current\"", "\"nvfp4\""), "plan.json", builtin_catalog());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("plan.json: /training/fp8_recipe"), std::string::npos)
      << bad.status().message();
  auto hopper =
      parse_plan(replaced(current, "\"current\"", "\"mxfp8\""), "plan.json", builtin_catalog());
  ASSERT_FALSE(hopper);
  EXPECT_NE(hopper.status().message().find(
                "/training/fp8_recipe: mxfp8 needs a Blackwell GPU; H100-SXM5-80GB is Hopper"),
            std::string::npos)
      << hopper.status().message();
}

// Chunks of unequal size: Megatron-core's layout string, or the layers of each virtual stage, as
// the plan's "layout"; written back as the layers, and refused at its field when it does not fit.
TEST(Loaders, PipelineLayoutIsAPlanField) {
  const std::string with = replaced(kPlan, "\"virtual_stages\": 3",
                                    "\"virtual_stages\": 3, \"layout\": \"Et*3|(t*4|)*22t*5L\"");
  auto plan = parse_plan(with, "plan.json", builtin_catalog());
  ASSERT_TRUE(plan) << plan.status().message();
  ASSERT_EQ(plan->parallel.layout.size(), 24u);
  EXPECT_EQ(layout_text(plan->parallel.layout), "3,4x22,5");
  EXPECT_EQ(short_label(plan->parallel),
            "tp8 pp8 dp16 sp mb1 interleaved/v3 layout3,4x22,5 rc-selective");
  const std::string text = to_json_text(*plan);
  auto again = parse_plan(text, "again.json", builtin_catalog());
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(again->parallel.layout, plan->parallel.layout);
  EXPECT_EQ(to_json_text(*again), text);
  expect_plan_error(replaced(with, "t*5L", "t*4L"), "/parallel/layout",
                    "the layout holds 95 decoder layers, the model has 96");
  expect_plan_error(replaced(with, "\"virtual_stages\": 3", "\"virtual_stages\": 2"),
                    "/parallel/layout", "the layout has 24 virtual stages");
  expect_plan_error(replaced(with, "t*5L", "t*4L|t"), "/parallel/layout",
                    "pipeline layout \"Et*3|(t*4|)*22t*4L|t\": 'L' (the loss)");
  expect_plan_error(replaced(with, "\"Et*3|(t*4|)*22t*5L\"", "[3, \"4\"]"), "/parallel/layout",
                    "expected Megatron-core's layout string");
}

// A plan may ask for Megatron-LM's tensor-parallel all-reduce after the weight gradient; a value
// that is not a boolean is named.
TEST(Loaders, AsyncTensorParallelAllReduceIsAPlanField) {
  auto plan = parse_plan(replaced(kPlan, "\"micro_batch_size\"",
                                  "\"async_tp_allreduce\": false, \"micro_batch_size\""),
                         "plan.json", builtin_catalog());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_FALSE(plan->parallel.async_tp_allreduce);
  EXPECT_NE(to_json_text(*plan).find("\"async_tp_allreduce\": false"), std::string::npos);
  // Transformer Engine's tensor-parallel overlap is a plan field too (the plan has sp).
  auto overlap = parse_plan(
      replaced(kPlan, "\"micro_batch_size\"", "\"tp_comm_overlap\": true, \"micro_batch_size\""),
      "plan.json", builtin_catalog());
  ASSERT_TRUE(overlap) << overlap.status().message();
  EXPECT_TRUE(overlap->parallel.tp_comm_overlap);
  EXPECT_NE(to_json_text(*overlap).find("\"tp_comm_overlap\": true"), std::string::npos);
  auto defaulted = parse_plan(kPlan, "plan.json", builtin_catalog());
  ASSERT_TRUE(defaulted);
  EXPECT_TRUE(defaulted->parallel.async_tp_allreduce);
  auto bad = parse_plan(replaced(kPlan, "\"micro_batch_size\"",
                                 "\"async_tp_allreduce\": \"no\", \"micro_batch_size\""),
                        "plan.json", builtin_catalog());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("plan.json: /parallel/async_tp_allreduce"),
            std::string::npos)
      << bad.status().message();
}

// The MoE all-to-all: the dispatchers' names read as the forms they implement, the canonical name
// is written back, a wrong one names the choices, and a dense model has no all-to-all to set.
TEST(Loaders, MoeAllToAllReadsTheDispatchersNames) {
  const std::string moe = replaced(replaced(replaced(kPlan, "\"gpt3-175b\"", "\"mixtral-8x7b\""),
                                            "\"virtual_stages\": 3", "\"virtual_stages\": 2"),
                                   "\"tp\": 8, \"pp\": 8,", "\"tp\": 8, \"pp\": 8, \"ep\": 8,");
  for (const char* name : {"hierarchical", "deepep", "hybridep"}) {
    auto plan =
        parse_plan(replaced(moe, "\"micro_batch_size\"",
                            std::string("\"moe_a2a\": \"") + name + "\", \"micro_batch_size\""),
                   "plan.json", builtin_catalog());
    ASSERT_TRUE(plan) << name << ": " << plan.status().message();
    EXPECT_EQ(plan->parallel.moe_a2a, MoeA2a::kHierarchical) << name;
    EXPECT_NE(to_json_text(*plan).find("\"moe_a2a\": \"hierarchical\""), std::string::npos);
  }
  auto flat = parse_plan(moe, "plan.json", builtin_catalog());
  ASSERT_TRUE(flat) << flat.status().message();
  EXPECT_EQ(flat->parallel.moe_a2a, MoeA2a::kNccl);
  EXPECT_EQ(to_json_text(*flat).find("moe_a2a"), std::string::npos);
  auto bad = parse_plan(
      replaced(moe, "\"micro_batch_size\"", "\"moe_a2a\": \"ring\", \"micro_batch_size\""),
      "plan.json", builtin_catalog());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("plan.json: /parallel/moe_a2a"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("hierarchical"), std::string::npos)
      << bad.status().message();
  auto dense = parse_plan(replaced(kPlan, "\"micro_batch_size\"",
                                   "\"moe_a2a\": \"hierarchical\", \"micro_batch_size\""),
                          "plan.json", builtin_catalog());
  ASSERT_FALSE(dense);
  EXPECT_NE(dense.status().message().find("moe_a2a and moe_a2a_overlap need an MoE model"),
            std::string::npos)
      << dense.status().message();
}

// Megatron-core's --recompute-modules as "recompute_modules": read with selective recompute,
// written back when not the default (core_attn), refused with another recompute or an unknown
// name.
TEST(Loaders, RecomputeModulesNeedSelectiveRecompute) {
  const std::string with = replaced(kPlan, "\"recompute\": \"selective\",",
                                    "\"recompute\": \"selective\", \"recompute_modules\": "
                                    "[\"layernorm\", \"moe\", \"core_attn\"],");
  auto plan = parse_plan(with, "plan.json", builtin_catalog());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_TRUE(recomputes(plan->parallel, RecomputeModule::kMoe));
  EXPECT_TRUE(recomputes(plan->parallel, RecomputeModule::kLayernorm));
  EXPECT_FALSE(recomputes(plan->parallel, RecomputeModule::kMoeAct));
  auto again = parse_plan(to_json_text(*plan), "plan.json", builtin_catalog());
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(again->parallel.recompute_modules, plan->parallel.recompute_modules);
  EXPECT_NE(short_label(plan->parallel).find("rc-selective:core_attn,layernorm,moe"),
            std::string::npos)
      << short_label(plan->parallel);
  auto plain = parse_plan(kPlan, "plan.json", builtin_catalog());
  ASSERT_TRUE(plain);
  EXPECT_TRUE(recomputes(plain->parallel, RecomputeModule::kCoreAttn));
  EXPECT_EQ(to_json_text(*plain).find("recompute_modules"), std::string::npos);
  auto check = [&](const std::string& text, const std::string& message) {
    auto bad = parse_plan(text, "plan.json", builtin_catalog());
    ASSERT_FALSE(bad) << message;
    EXPECT_NE(bad.status().message().find("plan.json: /parallel/recompute_modules"),
              std::string::npos)
        << bad.status().message();
    EXPECT_NE(bad.status().message().find(message), std::string::npos) << bad.status().message();
  };
  check(replaced(with, "\"recompute\": \"selective\"", "\"recompute\": \"full\""),
        "need recompute \"selective\", got \"full\"");
  check(replaced(with, "\"moe\"", "\"experts\""), "unknown recompute module \"experts\"");
}

// The EP all-to-all overlap (Megatron-core's --overlap-moe-expert-parallel-comm): written back
// when set, and refused without expert parallelism or on a schedule whose passes it cannot merge.
TEST(Loaders, MoeAllToAllOverlapNeedsExpertParallelismAndAMergeableSchedule) {
  const std::string moe = replaced(replaced(replaced(kPlan, "\"gpt3-175b\"", "\"mixtral-8x7b\""),
                                            "\"virtual_stages\": 3", "\"virtual_stages\": 2"),
                                   "\"tp\": 8, \"pp\": 8,", "\"tp\": 8, \"pp\": 8, \"ep\": 8,");
  const std::string overlap =
      replaced(moe, "\"micro_batch_size\"", "\"moe_a2a_overlap\": true, \"micro_batch_size\"");
  auto plan = parse_plan(overlap, "plan.json", builtin_catalog());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_TRUE(plan->parallel.moe_a2a_overlap);
  EXPECT_NE(to_json_text(*plan).find("\"moe_a2a_overlap\": true"), std::string::npos);
  EXPECT_NE(short_label(plan->parallel).find("a2a-overlap"), std::string::npos);
  auto check = [&](const std::string& text, const std::string& message) {
    auto bad = parse_plan(text, "plan.json", builtin_catalog());
    ASSERT_FALSE(bad) << message;
    EXPECT_NE(bad.status().message().find("/parallel/moe_a2a_overlap"), std::string::npos)
        << bad.status().message();
    EXPECT_NE(bad.status().message().find(message), std::string::npos) << bad.status().message();
  };
  check(replaced(overlap, "\"ep\": 8,", "\"ep\": 1,"), "needs ep > 1, got ep 1");
  check(replaced(replaced(overlap, "\"schedule\": \"interleaved\", \"virtual_stages\": 2",
                          "\"schedule\": \"1f1b\""),
                 "\"ep\": 8,", "\"ep\": 8,"),
        "got 1f1b with pp 8");
}

// DeepSeek's DualPipeV: "schedule": "dualpipev" alone means two chunks a stage; other counts, too
// few micro-batches and the EP overlap flag (it merges its chunks itself) are errors with their
// fields.
TEST(Loaders, DualPipeVTakesTwoChunksAndTwicePpMicroBatches) {
  const std::string v = replaced(kPlan, "\"schedule\": \"interleaved\", \"virtual_stages\": 3",
                                 "\"schedule\": \"dualpipev\"");
  auto plan = parse_plan(v, "plan.json", builtin_catalog());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(plan->parallel.schedule, Schedule::kDualPipeV);
  EXPECT_EQ(plan->parallel.virtual_stages, 2);
  EXPECT_EQ(plan->parallel.lm_head_stage(), 0);
  EXPECT_EQ(short_label(plan->parallel), "tp8 pp8 dp16 sp mb1 dualpipev rc-selective");
  auto again = parse_plan(to_json_text(*plan), "again.json", builtin_catalog());
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(again->parallel.schedule, Schedule::kDualPipeV);
  expect_plan_error(replaced(kPlan, "\"schedule\": \"interleaved\"", "\"schedule\": \"dualpipev\""),
                    "/parallel/virtual_stages",
                    "the dualpipev schedule runs 2 model chunks per stage");
  expect_plan_error(
      replaced(v, "\"global_batch_size\": 1536", "\"global_batch_size\": 224"),
      "/parallel/schedule",
      "the dualpipev schedule needs num_microbatches (14) to be at least 2 x pp (16)");
  const std::string moe = replaced(replaced(v, "\"gpt3-175b\"", "\"mixtral-8x7b\""),
                                   "\"tp\": 8, \"pp\": 8,", "\"tp\": 8, \"pp\": 4, \"ep\": 8,");
  expect_plan_error(
      replaced(replaced(moe, "\"nodes\": 128", "\"nodes\": 64"), "\"micro_batch_size\"",
               "\"moe_a2a_overlap\": true, \"micro_batch_size\""),
      "/parallel/moe_a2a_overlap", "the dualpipev schedule merges its forward and backward");
}

// "schedule": "dualpipe" (DeepSeek's DualPipe) is kept in its cut-in-half form, dualpipev on pp / 2
// stages with twice the replicas, and written back as the user wrote it; an odd pp, a batch that
// does not split between the two ends and too few micro-batches are errors in DualPipe's numbers.
TEST(Loaders, DualPipeIsKeptInItsCutInHalfForm) {
  const std::string d = replaced(kPlan, "\"schedule\": \"interleaved\", \"virtual_stages\": 3",
                                 "\"schedule\": \"dualpipe\"");
  auto plan = parse_plan(d, "plan.json", builtin_catalog());
  ASSERT_TRUE(plan) << plan.status().message();
  const ParallelConfig& p = plan->parallel;
  EXPECT_TRUE(p.dualpipe);
  EXPECT_EQ(p.schedule, Schedule::kDualPipeV);
  EXPECT_EQ(p.pp, 4);
  EXPECT_EQ(p.dp, 32);
  EXPECT_EQ(p.virtual_stages, 2);
  EXPECT_EQ(p.world_size(), 1024);
  EXPECT_EQ(plan->num_microbatches(), 48);  // 96 written, half from each end
  EXPECT_EQ(short_label(p), "tp8 pp8 dp16 sp mb1 dualpipe rc-selective");
  const std::string written = to_json_text(*plan);
  EXPECT_NE(written.find("\"schedule\": \"dualpipe\""), std::string::npos) << written;
  EXPECT_NE(written.find("\"pp\": 8,"), std::string::npos) << written;
  auto again = parse_plan(written, "again.json", builtin_catalog());
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(again->parallel, p);
  // dp as written: DualPipe's; without it (above), the GPUs over tp x cp x the written pp.
  auto with_dp = parse_plan(replaced(d, "\"pp\": 8,", "\"pp\": 8, \"dp\": 16,"), "plan.json",
                            builtin_catalog());
  ASSERT_TRUE(with_dp) << with_dp.status().message();
  EXPECT_EQ(with_dp->parallel, p);
  expect_plan_error(
      replaced(replaced(d, "\"pp\": 8,", "\"pp\": 3,"), "\"nodes\": 128", "\"nodes\": 96"),
      "/parallel/pp", "the dualpipe schedule needs an even pp");
  expect_plan_error(replaced(d, "\"global_batch_size\": 1536", "\"global_batch_size\": 1552"),
                    "/training/global_batch_size",
                    "must be a multiple of 2 x dp x micro_batch_size (2 x 16");
  expect_plan_error(replaced(d, "\"global_batch_size\": 1536", "\"global_batch_size\": 224"),
                    "/parallel/schedule",
                    "the dualpipe schedule needs num_microbatches (14) to be at least 2 x pp (16)");
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

TEST(Loaders, AWorldSizeBeyond64BitsIsNamedNotWrapped) {
  // Each axis within its limit (2^20), the product 2^80: it used to wrap to 0.
  auto plan = parse_plan(replaced(kPlan, R"("tp": 8, "pp": 8,)",
                                  R"("tp": 1048576, "pp": 1048576, "dp": 1048576, "cp": 1048576,)"),
                         "p.json", builtin_catalog());
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.status().message().find(
                "p.json: /parallel: tp x cp x dp x pp = 1048576 x 1048576 x 1048576 x 1048576 = "
                "more than 2^63, but the cluster has 1024 GPUs"),
            std::string::npos)
      << plan.status().message();
}

// Special files are refused from their type, before anything is read: a FIFO would block the
// reader forever and /dev/zero never ends.
TEST(Loaders, AFifoIsRefusedWithoutBlocking) {
  testing::TempDir dir;
  const std::string fifo = dir.file("f.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto text = read_text_file(fifo);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(text.status().message(), fifo + ": is a FIFO (named pipe), expected a regular file");
}

TEST(Loaders, DevicesAreRefused) {
  const auto zero = read_text_file("/dev/zero");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(zero.status().message(), "/dev/zero: is a character device, expected a regular file");
  EXPECT_EQ(read_text_file("/dev/null").status().code(), StatusCode::kInvalidInput);
}

TEST(Loaders, DirectoriesAndLinksSayWhatTheyAre) {
  testing::TempDir dir;
  const auto d = read_text_file(dir.path());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(d.status().message(), dir.path() + ": is a directory, expected a file");

  const std::string a = dir.file("a.json");
  const std::string b = dir.file("b.json");
  ASSERT_EQ(::symlink(b.c_str(), a.c_str()), 0);
  // A link to a missing file.
  const auto dangling = read_text_file(a);
  EXPECT_EQ(dangling.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(dangling.status().message(), a + ": a symbolic link to a file that does not exist");
  // A loop: a -> b -> a (it used to say "no such file").
  ASSERT_EQ(::symlink(a.c_str(), b.c_str()), 0);
  const auto loop = read_text_file(a);
  EXPECT_EQ(loop.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(loop.status().message(),
            a + ": a symbolic link loop (too many levels of symbolic links)");

  const auto not_dir = read_text_file(dir.file("x.json") + "/y.json");
  EXPECT_EQ(not_dir.status().code(), StatusCode::kNotFound);
  testing::write_file(dir.file("x.json"), "{}");
  const auto through_file = read_text_file(dir.file("x.json") + "/y.json");
  EXPECT_EQ(through_file.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(through_file.status().message(),
            dir.file("x.json") + "/y.json: a component of the path is not a directory");
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
