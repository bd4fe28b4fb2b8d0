// The published-runs reader: the reference data reads, nulls stay "not published", and bad input is
// an error naming the file, the JSON pointer and the run.
#include "planner/core/published_run.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

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
  // The repository's copy states the software of every run.
  for (const PublishedRun& r : *runs) {
    EXPECT_TRUE(r.stack.has_value()) << r.id;
    EXPECT_TRUE(r.attention.has_value()) << r.id;
    EXPECT_TRUE(r.overlap.grad_reduce.has_value()) << r.id;
    EXPECT_TRUE(r.release_date.has_value()) << r.id;
    EXPECT_FALSE(r.software_source.empty()) << r.id;
  }
  EXPECT_EQ(first.stack, SoftwareStack::kMegatronLm);
  EXPECT_EQ(first.attention, AttentionImpl::kFusedSoftmax);
  EXPECT_EQ(first.overlap.grad_reduce, false);
  EXPECT_EQ(first.release_date, (PublishedDate{2021, 4, 8}));
}

TEST(PublishedRuns, MoeRunsRead) {
  // The MoE format adds expert fields, etp and a release date; all of them are understood.
  auto runs = parse_published_runs(
      "[" +
          record("m", R"(, "etp": 1, "ep": 8)",
                 R"(, "release_date": "2025-10-10", "stack": "nemo", "attention": "cudnn",
                    "overlap": {"grad_reduce": true, "param_gather": true, "tp_comm": null,
                                "p2p": false}, "software_source": "recipe")") +
          "]",
      "runs.json");
  ASSERT_TRUE(runs) << runs.status().message();
  const PublishedRun& r = runs->at(0);
  EXPECT_EQ(r.parallel.etp, 1);
  EXPECT_EQ(r.release_date, (PublishedDate{2025, 10, 10}));
  EXPECT_EQ(r.stack, SoftwareStack::kNemo);
  EXPECT_EQ(r.attention, AttentionImpl::kCudnn);
  EXPECT_EQ(r.overlap.p2p, false);
  EXPECT_FALSE(r.overlap.tp_comm.has_value());
  EXPECT_FALSE(r.model.is_moe());
  auto moe = load_published_runs_file(std::string(PLANNER_TEST_DATA_DIR) +
                                      "/reference/moe_runs_sample.json");
  ASSERT_TRUE(moe) << moe.status().message();
  ASSERT_FALSE(moe->empty());
  EXPECT_TRUE(moe->front().model.is_moe());
  EXPECT_TRUE(moe->front().release_date.has_value());
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

TEST(PublishedRuns, UnknownKeysAreErrors) {
  auto runs = parse_published_runs(
      "[" + record("a", R"(, "experts": 8)", R"(, "extra": 1, "overlap": {"grads": true})") + "]",
      "runs.json");
  ASSERT_FALSE(runs);
  EXPECT_EQ(runs.status().code(), StatusCode::kInvalidInput);
  const std::string msg = runs.status().message();
  for (const char* where : {"/0/extra", "/0/parallel/experts", "/0/overlap/grads", "run a"})
    EXPECT_NE(msg.find(where), std::string::npos) << where << ": " << msg;
}

TEST(PublishedRuns, BadSoftwareFieldsAndDates) {
  for (const auto& [extra, where] : std::vector<std::pair<std::string, std::string>>{
           {R"(, "stack": "pytorch-lightning")", "/0/stack: expected one of"},
           {R"(, "attention": "fast")", "/0/attention: expected one of"},
           {R"(, "overlap": {"grad_reduce": "yes"})", "/0/overlap/grad_reduce"},
           {R"(, "overlap": true)", "/0/overlap"},
           {R"(, "release_date": "2021-13-01")", "/0/release_date: expected a date"},
           {R"(, "release_date": "2021-02-30")", "/0/release_date: expected a date"},
           {R"(, "release_date": "April 2021")", "/0/release_date: expected a date"}}) {
    auto runs = parse_published_runs("[" + record("a", "", extra) + "]", "runs.json");
    ASSERT_FALSE(runs) << extra;
    EXPECT_NE(runs.status().message().find(where), std::string::npos)
        << extra << ": " << runs.status().message();
  }
  {
    // A derived value that is text (the formula belongs in "how").
    std::string text = record("a");
    const std::string derived = R"("derived": {"tflops_per_gpu": 300, "how": "x"})";
    const std::size_t at = text.find(derived);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, derived.size(), R"("derived": {"note": "text"})");
    auto runs = parse_published_runs("[" + text + "]", "runs.json");
    ASSERT_FALSE(runs);
    EXPECT_NE(runs.status().message().find("/0/derived/note: expected a number"), std::string::npos)
        << runs.status().message();
  }
  for (const char* date : {"2021", "2021-04", "2024-02-29"}) {
    auto runs = parse_published_runs(
        "[" + record("a", "", std::string(R"(, "release_date": ")") + date + "\"") + "]",
        "runs.json");
    EXPECT_TRUE(runs) << date << ": " << runs.status().message();
  }
}

TEST(PublishedRuns, YearsInText) {
  EXPECT_EQ(year_in_text("Narayanan et al., SC'21, Table 1"), 2021);
  EXPECT_EQ(year_in_text("Narayanan et al., SC\u201921"), 2021);
  EXPECT_EQ(year_in_text("Rajbhandari et al., SC20 (ZeRO)"), 2020);
  EXPECT_EQ(year_in_text("Chowdhery et al., NeurIPS 2021 workshop"), 2021);
  EXPECT_EQ(year_in_text("Megatron-LM (arXiv:2104.04473)"), 2021);
  EXPECT_EQ(year_in_text("see https://arxiv.org/abs/2205.05198"), 2022);
  EXPECT_EQ(year_in_text("README (2020-09-11), MLSys'23 follow-up"), 2023);
  // Versions, decimals, hashes, model sizes and parts are not years.
  EXPECT_EQ(year_in_text("NeMo 24.07 container"), std::nullopt);
  EXPECT_EQ(year_in_text("@ 50a4b5fa0280a160cc1b03a1c15faddbc1b1da9a"), std::nullopt);
  EXPECT_EQ(year_in_text("A100 80GB, 2048 GPUs, seq 4096"), std::nullopt);
  EXPECT_EQ(year_in_text("the model's 13B variant"), std::nullopt);
  EXPECT_EQ(year_in_text("sm80 kernels, x86 hosts"), std::nullopt);
  EXPECT_EQ(year_in_text(""), std::nullopt);

  PublishedRun run;
  run.source = "Smith et al., SC'21";
  EXPECT_EQ(run_year(run), 2021);
  run.release_date = PublishedDate{2023, 1, 0};
  EXPECT_EQ(run_year(run), 2023);  // the stated date wins
}

TEST(PublishedRuns, SourceKeys) {
  auto key = [](std::string source, std::string id = "x") {
    PublishedRun r;
    r.id = std::move(id);
    r.source = std::move(source);
    return source_key(r);
  };
  EXPECT_EQ(key("Narayanan et al., 'Efficient...', SC'21 (arXiv:2104.04473), Table 1. Same "
                "numbers in NVIDIA/Megatron-LM README"),
            "arXiv:2104.04473");
  EXPECT_EQ(key("Shoeybi et al. 2019 (arXiv:1909.08053) abstract"), "arXiv:1909.08053");
  EXPECT_EQ(key("NVIDIA/NeMo docs/source/performance/performance_summary.md @ 8e3d65d (NeMo)"),
            "NVIDIA/NeMo/docs/source/performance/performance_summary.md");
  EXPECT_EQ(key("NVIDIA-NeMo/Megatron-Bridge@4ab94df:docs/performance-summary-archive.md - '25.09"),
            "NVIDIA-NeMo/Megatron-Bridge/docs/performance-summary-archive.md");
  EXPECT_EQ(key("mosaicml/llm-foundry scripts/train/benchmarking/README.md @ 4952183 (2024)"),
            "mosaicml/llm-foundry/scripts/train/benchmarking/README.md");
  // "TFLOP/s per GPU" is no repository: the text up to its first comma.
  EXPECT_EQ(key("  Vendor blog, 400 TFLOP/s per GPU"), "Vendor blog");
  EXPECT_EQ(key("", "run7"), "run7");
  PublishedRun stated;
  stated.source = "arXiv:2104.04473";
  stated.source_id = "megatron-sc21";
  EXPECT_EQ(source_key(stated), "megatron-sc21");
  // The reference data: every record of one paper or table shares its key.
  auto runs = load_published_runs_file(kReference);
  ASSERT_TRUE(runs) << runs.status().message();
  std::set<std::string> keys;
  for (const PublishedRun& r : *runs)
    keys.insert(source_key(r));
  EXPECT_EQ(keys,
            (std::set<std::string>{"arXiv:2104.04473", "arXiv:1909.08053",
                                   "NVIDIA/Megatron-LM/images/tables.tex",
                                   "mosaicml/llm-foundry/scripts/train/benchmarking/README.md",
                                   "NVIDIA/NeMo/docs/source/performance/performance_summary.md"}));
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
  EXPECT_EQ(flop_convention_of("PaLM-style MFU: 6N + 12LHQT per token"), FlopConvention::kPalm);
  EXPECT_EQ(flop_convention_of("Llama 3 paper MFU (BF16 peak)"), FlopConvention::kPalm);
  EXPECT_TRUE(counts_recompute(FlopConvention::kMegatronEq3));
  EXPECT_FALSE(counts_recompute(FlopConvention::kMosaicMl));
}

}  // namespace
}  // namespace planner
