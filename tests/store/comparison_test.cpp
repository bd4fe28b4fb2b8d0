// Predicted vs measured: the join on (rank, op id), per op kind and per step, with exact numbers.
#include "store_test_support.hpp"

namespace planner::store {
namespace {

using testing::take;

OpPrediction predicted(int rank, const std::string& id, const std::string& kind, double start_us,
                       double duration_us) {
  return {.op_id = id,
          .op_kind = kind,
          .rank = rank,
          .start = microseconds(start_us),
          .duration = microseconds(duration_us),
          .bytes = Bytes(4096)};
}

OpMeasurement measured(int rank, std::int64_t step, const std::string& id, const std::string& kind,
                       double wall_us) {
  return {.rank = rank,
          .step = step,
          .op_id = id,
          .op_kind = kind,
          .phase = "forward",
          .wall = microseconds(wall_us),
          .bytes = Bytes(4096)};
}

class ComparisonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = take(create_run(db_, {.kind = RunKind::kExec}));
    plan_ = take(put_plan_text(db_, testing::plan_text(2), "tp2"));
    PLANNER_ASSERT_OK(add_predicted_ops(db_, run_, plan_, predictions()));
    PLANNER_ASSERT_OK(put_metrics(db_, run_, plan_, MetricSource::kSimulated,
                                  std::vector<Metric>{{"step_time", 1.0e-3, "s"}}));
    PLANNER_ASSERT_OK(put_metrics(db_, run_, plan_, MetricSource::kAnalytic,
                                  std::vector<Metric>{{"step_time", 0.9e-3, "s"}}));
    std::vector<OpMeasurement> ops;
    const double gemm0[] = {500, 110, 120, 130};  // step 0 is a warm-up step
    const double ar0[] = {400, 40, 50, 60};
    for (std::int64_t step = 0; step < 4; ++step) {
      ops.push_back(measured(0, step, "op0", "gemm", gemm0[step]));
      ops.push_back(measured(0, step, "op1", "all_reduce", ar0[step]));
      ops.push_back(measured(1, step, "op0", "gemm", 90));
      ops.push_back(measured(1, step, "op1", "all_reduce", 45));
      ops.push_back(measured(1, step, "extra", "copy", 5));  // never predicted
    }
    PLANNER_ASSERT_OK(add_measured_ops(db_, run_, ops));
    PLANNER_ASSERT_OK(add_measured_steps(
        db_, run_,
        std::vector<StepMeasurement>{
            {.step = 0, .step_time = milliseconds(3.0), .tokens_per_s = 1, .warmup = true},
            {.step = 1, .step_time = milliseconds(1.0), .tokens_per_s = 1},
            {.step = 2, .step_time = milliseconds(1.2), .tokens_per_s = 1},
            {.step = 3, .step_time = milliseconds(1.1), .tokens_per_s = 1}}));
  }

  static std::vector<OpPrediction> predictions() {
    return {predicted(0, "op0", "gemm", 0, 100), predicted(0, "op1", "all_reduce", 100, 50),
            predicted(0, "op2", "send", 150, 10),  // never measured
            predicted(1, "op0", "gemm", 0, 100), predicted(1, "op1", "all_reduce", 100, 50)};
  }

  planner::testing::TempDir dir_;
  Database db_ = take(Database::open(dir_.file("planner.db")));
  RunId run_;
  PlanId plan_;
};

TEST_F(ComparisonTest, PerOpKindAndPerStep) {
  const RunComparison c = take(compare_run(db_, run_));
  EXPECT_EQ(c.measured_run, run_);
  EXPECT_EQ(c.prediction_run, run_);
  EXPECT_EQ(c.plan, plan_);
  EXPECT_EQ(c.predicted_step_time, milliseconds(1.0)) << "the simulated value wins";
  EXPECT_EQ(c.measured_step_time, milliseconds(1.1)) << "median of steps 1-3";
  ASSERT_EQ(c.by_op_kind.size(), 2u);
  EXPECT_EQ(c.by_op_kind[0].op_kind, "gemm");
  EXPECT_EQ(c.by_op_kind[0].ops, 2);
  EXPECT_EQ(c.by_op_kind[0].predicted, microseconds(200));
  EXPECT_EQ(c.by_op_kind[0].measured, microseconds(210));  // 120 + 90
  EXPECT_NEAR(*c.by_op_kind[0].relative_error(), -10.0 / 210.0, 1e-12);
  EXPECT_EQ(c.by_op_kind[1].op_kind, "all_reduce");
  EXPECT_EQ(c.by_op_kind[1].measured, microseconds(95));  // 50 + 45
  EXPECT_NEAR(*c.by_op_kind[1].relative_error(), 5.0 / 95.0, 1e-12);
  EXPECT_EQ(c.predicted_only, 1);  // op2 on rank 0
  EXPECT_EQ(c.measured_only, 1);   // "extra" on rank 1
  ASSERT_EQ(c.by_step.size(), 4u);
  EXPECT_TRUE(c.by_step[0].warmup);
  EXPECT_EQ(c.by_step[0].measured, milliseconds(3.0));
  EXPECT_EQ(c.by_step[2].step, 2);
  EXPECT_EQ(c.by_step[2].predicted, milliseconds(1.0));
  EXPECT_NEAR(*c.by_step[2].relative_error(), (1.0 - 1.2) / 1.2, 1e-12);
}

TEST_F(ComparisonTest, PerOpDetail) {
  const auto ops = take(compare_ops(db_, run_));
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].rank, 0);
  EXPECT_EQ(ops[0].op_id, "op0");
  EXPECT_EQ(ops[0].predicted, microseconds(100));
  EXPECT_EQ(ops[0].measured_mean, microseconds(120));
  EXPECT_EQ(ops[0].measured_min, microseconds(110));
  EXPECT_EQ(ops[0].measured_max, microseconds(130));
  EXPECT_EQ(ops[0].samples, 3);
  EXPECT_EQ(ops[1].op_kind, "all_reduce");
  EXPECT_EQ(ops[3].rank, 1);
  EXPECT_EQ(ops[3].bytes, Bytes(4096));
}

TEST_F(ComparisonTest, WarmupStepsOnRequest) {
  ComparisonOptions options;
  options.include_warmup = true;
  const RunComparison c = take(compare_run(db_, run_, options));
  EXPECT_EQ(c.by_op_kind[0].measured, microseconds(215 + 90));  // (500+110+120+130)/4 + 90
  EXPECT_EQ(c.measured_step_time, milliseconds(1.15));          // median of 1.0 1.1 1.2 3.0
  EXPECT_EQ(take(compare_ops(db_, run_, options))[0].samples, 4);
}

TEST_F(ComparisonTest, PredictionsFromAnotherRun) {
  const RunId executed = take(create_run(db_, {.kind = RunKind::kExec}));
  PLANNER_ASSERT_OK(add_measured_ops(
      db_, executed, std::vector<OpMeasurement>{measured(0, 1, "op0", "gemm", 80)}));
  EXPECT_EQ(compare_run(db_, executed).status().code(), StatusCode::kNotFound);
  ComparisonOptions options;
  options.prediction_run = run_;
  const RunComparison c = take(compare_run(db_, executed, options));
  EXPECT_EQ(c.prediction_run, run_);
  ASSERT_EQ(c.by_op_kind.size(), 1u);
  EXPECT_EQ(c.by_op_kind[0].measured, microseconds(80));
  EXPECT_EQ(c.predicted_only, 4);
  EXPECT_TRUE(c.by_step.empty());
  EXPECT_FALSE(c.measured_step_time);
}

TEST_F(ComparisonTest, SeveralPlansNeedAChoice) {
  const PlanId other = take(put_plan_text(db_, testing::plan_text(8), "tp8"));
  PLANNER_ASSERT_OK(put_metrics(db_, run_, other, MetricSource::kAnalytic,
                                std::vector<Metric>{{"step_time", 5.0, "s"}}));
  auto ambiguous = compare_run(db_, run_);
  ASSERT_FALSE(ambiguous);
  EXPECT_EQ(ambiguous.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(ambiguous.status().message().find("predictions for 2 plans"), std::string::npos)
      << ambiguous.status().message();
  ComparisonOptions options;
  options.plan = other;
  const RunComparison c = take(compare_run(db_, run_, options));
  EXPECT_EQ(c.predicted_step_time, seconds(5.0));
  EXPECT_TRUE(c.by_op_kind.empty());
  EXPECT_EQ(c.measured_only, 5);
}

TEST_F(ComparisonTest, StepTimeMustBeInSeconds) {
  PLANNER_ASSERT_OK(put_metrics(db_, run_, plan_, MetricSource::kSimulated,
                                std::vector<Metric>{{"step_time", 1.0, "ms"}}));
  auto c = compare_run(db_, run_);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(c.status().message().find("expected \"s\""), std::string::npos);
}

}  // namespace
}  // namespace planner::store
