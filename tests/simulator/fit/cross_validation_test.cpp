// Leave-one-source-out cross-validation on a few reference records from three sources: one fold per
// source, a parameter no training record uses keeps its built-in value, a source whose parameters
// are all its own is predicted with the built-in values when left out, and the summaries are the
// means of the per-record errors.
#include "planner/fit/cross_validation.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "planner/core/published_run.hpp"

namespace planner::fit {
namespace {

const std::string kReference =
    std::string(PLANNER_TEST_DATA_DIR) + "/reference/published_runs.json";

// Small single-node and few-node runs of three sources on three GPU types: Megatron's README
// (V100 DGX-2), llm-foundry's benchmarks (A100-80GB and H100) and NeMo's performance summary
// (H100, FP8).
CrossValidationOptions small_options() {
  CrossValidationOptions o;
  o.accuracy.only = {"megatron_readme20_dgx2_v100_1B",   "megatron_readme20_dgx2_v100_2B",
                     "mpt_7b_a100_8gpu_seq2048",         "mpt_7b_h100_8gpu_seq2048",
                     "nemo2407_h100_fp8_llama3_8b_8gpu", "nemo2407_h100_fp8_llama2_7b_8gpu"};
  o.accuracy.threads = 2;
  return o;
}

std::vector<PublishedRun> reference() {
  auto runs = load_published_runs_file(kReference);
  EXPECT_TRUE(runs) << runs.status().message();
  return runs ? *runs : std::vector<PublishedRun>{};
}

double mean_abs(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += std::abs(x);
  return s / static_cast<double>(v.size());
}

TEST(CrossValidation, OneFoldPerSourceAndUnusedParametersStayBuiltIn) {
  const std::vector<PublishedRun> runs = reference();
  auto rep = cross_validate(runs, small_options());
  ASSERT_TRUE(rep) << rep.status().message();
  ASSERT_EQ(rep->runs.size(), 6u);
  ASSERT_EQ(rep->by_source.size(), 3u);
  ASSERT_EQ(rep->folds.size(), 3u);
  std::set<std::string> sources;
  for (const SourceErrors& e : rep->by_source) {
    sources.insert(e.source);
    EXPECT_EQ(e.runs, 2) << e.source;
  }
  for (const FoldFit& f : rep->folds)
    EXPECT_TRUE(sources.count(f.held_out)) << f.held_out;

  // The fit never makes the objective worse than the built-in values, and moves something.
  EXPECT_LE(rep->insample.objective, rep->insample.objective_initial);
  bool moved = false;
  for (const FittedParameter& p : rep->insample.parameters) {
    EXPECT_GT(p.runs, 0) << p.family << "[" << p.key << "]";
    moved = moved || std::abs(p.value - 1) > 1e-3;
  }
  EXPECT_TRUE(moved);

  // The V100 runs are the only ones on V100 and the only Megatron-LM ones: with them left out,
  // their GEMM rate and kernel overhead have no training record and stay at 1.
  for (const FoldFit& f : rep->folds) {
    if (f.held_out.find("Megatron-LM") == std::string::npos) continue;
    int held_out_only = 0;
    for (const FittedParameter& p : f.fit.parameters) {
      if (p.key.find("V100") != std::string::npos || p.key == "megatron-lm") {
        EXPECT_EQ(p.runs, 0) << p.family << "[" << p.key << "]";
        EXPECT_DOUBLE_EQ(p.value, 1.0) << p.family << "[" << p.key << "]";
        ++held_out_only;
      }
    }
    EXPECT_GE(held_out_only, 1);
  }

  // Summaries are the means of the per-record errors.
  std::vector<double> builtin, insample, loso;
  for (const CrossValidatedRun& r : rep->runs) {
    EXPECT_DOUBLE_EQ(r.builtin_error_percent, rep->builtin.runs[r.run].error_percent);
    builtin.push_back(r.builtin_error_percent);
    insample.push_back(r.insample_error_percent);
    loso.push_back(r.loso_error_percent);
  }
  EXPECT_NEAR(rep->overall.builtin_mape, mean_abs(builtin), 1e-9);
  EXPECT_NEAR(rep->overall.insample_mape, mean_abs(insample), 1e-9);
  EXPECT_NEAR(rep->overall.loso_mape, mean_abs(loso), 1e-9);
  EXPECT_NEAR(rep->overall.builtin_mape, rep->builtin.mape_percent, 1e-9);
}

TEST(CrossValidation, ASourceWithOnlyItsOwnParametersIsPredictedWithTheBuiltInOnes) {
  // Only the GEMM rate per GPU type: the V100 source shares no GPU with the others, so left out
  // it is predicted exactly as with the built-in parameters, while in-sample it is fitted.
  const std::vector<PublishedRun> runs = reference();
  CrossValidationOptions o = small_options();
  for (ParameterFamily& f : builtin_families()) {
    if (f.name == "gemm_rate") o.families.push_back(f);
  }
  ASSERT_EQ(o.families.size(), 1u);
  auto rep = cross_validate(runs, o);
  ASSERT_TRUE(rep) << rep.status().message();
  int v100 = 0;
  for (const CrossValidatedRun& r : rep->runs) {
    const RunAccuracy& a = rep->builtin.runs[r.run];
    if (a.gpu_type.find("V100") == std::string::npos) continue;
    ++v100;
    EXPECT_NEAR(r.loso_error_percent, r.builtin_error_percent, 1e-9) << a.id;
  }
  EXPECT_EQ(v100, 2);
  for (const FittedParameter& p : rep->insample.parameters)
    EXPECT_EQ(p.family, "gemm_rate");
  // In-sample the fit reduces the robust objective.
  EXPECT_LT(rep->insample.objective, rep->insample.objective_initial);
}

TEST(CrossValidation, LeaveOneModelOutFoldsByTheSimulatedModel) {
  const std::vector<PublishedRun> runs = reference();
  CrossValidationOptions o = small_options();
  for (ParameterFamily& f : builtin_families()) {
    if (f.name == "gemm_rate") o.families.push_back(f);
  }
  o.leave_out = LeaveOut::kModel;
  auto rep = cross_validate(runs, o);
  ASSERT_TRUE(rep) << rep.status().message();
  std::set<std::string> models;
  for (const CrossValidatedRun& r : rep->runs)
    models.insert(rep->builtin.runs[r.run].plan.model.name);
  ASSERT_GT(models.size(), 3u);  // more models than the 3 sources
  ASSERT_EQ(rep->folds.size(), models.size());
  int runs_in_folds = 0;
  for (const SourceErrors& e : rep->by_source) {
    EXPECT_TRUE(models.count(e.source)) << e.source;
    runs_in_folds += e.runs;
  }
  EXPECT_EQ(runs_in_folds, 6);
  // Each fold trains on every record but its model's.
  for (const FoldFit& f : rep->folds) {
    int trained = 0;
    for (const FittedParameter& p : f.fit.parameters)
      trained += p.runs;
    int held_out = 0;
    for (const SourceErrors& e : rep->by_source) {
      if (e.source == f.held_out) held_out = e.runs;
    }
    EXPECT_EQ(trained, 6 - held_out) << f.held_out;  // one GEMM rate per record
  }
}

TEST(CrossValidation, FailsLikeAccuracyOnUnknownIds) {
  const std::vector<PublishedRun> runs = reference();
  CrossValidationOptions o;
  o.accuracy.only = {"no-such-run"};
  auto rep = cross_validate(runs, o);
  ASSERT_FALSE(rep);
  EXPECT_EQ(rep.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(rep.status().message().find("no-such-run"), std::string::npos);
}

}  // namespace
}  // namespace planner::fit
