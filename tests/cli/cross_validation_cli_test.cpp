// planner accuracy --cross-validate on the reference data's published runs, run the way a user
// runs it: leave-one-source-out beside in-sample and built-in errors, one fold per source,
// parameters keyed by GPU type, link kind or software stack (never by run), and bounds on the
// errors that fail when generalisation gets worse.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "support/command.hpp"

namespace planner {
namespace {

using testing::CommandResult;
using testing::run_command;
using testing::run_planner;

const std::string kReference =
    std::string(PLANNER_TEST_DATA_DIR) + "/reference/published_runs.json";

// Measured at this commit over the 44 modelled runs of 5 sources: MAPE 4.89 % with the built-in
// parameters, 4.71 % in-sample, 4.93 % leave-one-source-out; the targets are <= 5 %
// in-sample, <= 7 % leave-one-source-out and no source biased by more than 10 % on average
// (Megatron-LM's 2019 paper still is: -23.0 %, its two runs).
constexpr double kMaxInsampleMapePercent = 5.0;
constexpr double kMaxLosoMapePercent = 5.3;
constexpr double kMaxSourceBiasPercent = 10.0;
// The known exception: Megatron-LM's first paper (arXiv:1909.08053), 8.3B on 512 DGX-2H V100s and
// its 1.2B single-GPU baseline, predicted 16 % and 30 % too fast: its 2019 code ran slower than
// the model of its stack (the baseline's 39 TFLOP/s, which the 2020 code raised to 62 on the same
// GPU, where planner predicts 65 with the fused softmax of 2020 and 56 with the 2019 code's
// unfused one, FLOPs counted as the paper counts them).
const std::string kSlowerThanModelledSource = "arXiv:1909.08053";
constexpr double kMaxKnownExceptionBiasPercent = 25.0;

TEST(CrossValidationCli, LeaveOneSourceOutBesideInSampleOnTheReferenceRuns) {
  // Some 1,000 simulations: minutes on a loaded 2-core machine.
  const CommandResult r = run_command(
      {PLANNER_CLI_PATH, "accuracy", kReference, "--cross-validate", "--json", "--no-db"}, {}, {},
      /*timeout_seconds=*/900);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "cross-validation");
  const nlohmann::json& runs = j["runs"];
  ASSERT_GE(runs.size(), 35u);
  std::set<std::string> sources;
  double builtin = 0, insample = 0, loso = 0;
  for (const nlohmann::json& run : runs) {
    sources.insert(run["source"].get<std::string>());
    builtin += std::abs(run["builtin_error_percent"].get<double>());
    insample += std::abs(run["insample_error_percent"].get<double>());
    loso += std::abs(run["loso_error_percent"].get<double>());
  }
  const double n = static_cast<double>(runs.size());
  const nlohmann::json& all = j["overall"];
  EXPECT_NEAR(all["builtin_mape_percent"].get<double>(), builtin / n, 1e-6);
  EXPECT_NEAR(all["insample_mape_percent"].get<double>(), insample / n, 1e-6);
  EXPECT_NEAR(all["loso_mape_percent"].get<double>(), loso / n, 1e-6);
  // One fold per source, every source reported.
  EXPECT_GE(sources.size(), 4u);
  EXPECT_EQ(j["folds"].size(), sources.size());
  EXPECT_EQ(j["by_source"].size(), sources.size());
  // Parameters are keyed by GPU type, link kind or software stack, never by run.
  for (const nlohmann::json& p : j["insample"]["parameters"]) {
    const std::string family = p["family"];
    EXPECT_TRUE(family == "gemm_rate" || family == "scale_out_efficiency" ||
                family == "kernel_overhead")
        << family;
    for (const nlohmann::json& run : runs)
      EXPECT_NE(p["key"].get<std::string>(), run["id"].get<std::string>());
  }
  EXPECT_LE(all["insample_mape_percent"].get<double>(), kMaxInsampleMapePercent);
  EXPECT_LE(all["loso_mape_percent"].get<double>(), kMaxLosoMapePercent);
  for (const nlohmann::json& e : j["by_source"]) {
    const bool known = e["source"] == kSlowerThanModelledSource;
    EXPECT_LE(std::abs(e["loso_bias_percent"].get<double>()),
              known ? kMaxKnownExceptionBiasPercent : kMaxSourceBiasPercent)
        << e["source"];
  }
}

TEST(CrossValidationCli, TextReport) {
  // Two sources, small runs: the text report's columns and the overall line.
  const CommandResult text = run_planner(
      {"accuracy", kReference, "--cross-validate", "--no-db", "--only", "mpt_7b_a100_8gpu_seq2048",
       "mpt_7b_h100_8gpu_seq2048", "nemo2407_h100_fp8_llama3_8b_8gpu"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* what : {"LEAVE-ONE-SOURCE-OUT", "IN-SAMPLE", "BUILT-IN",
                           "leave-one-source-out MAPE", "gemm_rate"}) {
    EXPECT_NE(text.out.find(what), std::string::npos) << what << "\n" << text.out;
  }
}

}  // namespace
}  // namespace planner
