// Row counts and the JSON export of runs and hardware profiles.
#include "planner/core/version.hpp"
#include "store_test_support.hpp"

namespace planner::store {
namespace {

using testing::take;

TEST(FormatUtc, IsoWithMilliseconds) {
  EXPECT_EQ(format_utc(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_utc(1714564803250), "2024-05-01T12:00:03.250Z");
}

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim_ = take(create_run(db_, {.kind = RunKind::kSimulate,
                                 .label = "sim",
                                 .inputs_json = R"({"plan": "p.json"})",
                                 .hosts = {"box"}}));
    plan_ = take(put_plan_text(db_, testing::plan_text(2), "tp2"));
    PLANNER_ASSERT_OK(put_metrics(db_, sim_, plan_, MetricSource::kSimulated,
                                  std::vector<Metric>{{"step_time", 0.5, "s"}}));
    PLANNER_ASSERT_OK(add_predicted_ops(db_, sim_, plan_, testing::sample_predictions(2, 3)));
    PLANNER_ASSERT_OK(finish_run(db_, sim_));

    exec_ = take(create_run(db_, {.kind = RunKind::kExec, .hosts = {"n0", "n1"}}));
    PLANNER_ASSERT_OK(link_plan(db_, exec_, plan_));
    PLANNER_ASSERT_OK(add_measured_steps(
        db_, exec_,
        std::vector<StepMeasurement>{
            {.step = 0, .step_time = seconds(0.6), .tokens_per_s = 100, .loss = 9.5}}));
    PLANNER_ASSERT_OK(add_measured_ops(db_, exec_,
                                       std::vector<OpMeasurement>{{.rank = 1,
                                                                   .step = 0,
                                                                   .op_id = "op1",
                                                                   .op_kind = "all_reduce",
                                                                   .phase = "backward",
                                                                   .wall = microseconds(3),
                                                                   .bytes = Bytes(2048),
                                                                   .algbw = GBps(0.5)}}));
    PLANNER_ASSERT_OK(fail_run(db_, exec_, "rank 1 died", 1));

    calib_ = take(create_run(db_, {.kind = RunKind::kCalibrate}));
    PLANNER_ASSERT_OK(put_profile(db_,
                                  {.name = "cpu",
                                   .description = "2-core VM",
                                   .parameters_json = R"({"gemm_tflops": 0.1})",
                                   .provenance = "test",
                                   .run = calib_},
                                  std::vector<CalibrationSample>{{.benchmark = "gemm",
                                                                  .shape = "64x64x64",
                                                                  .precision = "fp32",
                                                                  .time = microseconds(20)}})
                          .status());
    PLANNER_ASSERT_OK(put_profile(db_, {.name = "imported", .parameters_json = "{}"}, {}).status());
  }

  planner::testing::TempDir dir_;
  Database db_ = take(Database::open(dir_.file("planner.db")));
  RunId sim_, exec_, calib_;
  PlanId plan_;
};

TEST_F(ExportTest, CountsRowsPerRun) {
  const RunCounts sim = take(count_rows(db_, sim_));
  EXPECT_EQ(sim.plans, 1);
  EXPECT_EQ(sim.metrics, 1);
  EXPECT_EQ(sim.predicted_ops, 6);
  EXPECT_EQ(sim.measured_ops, 0);
  const RunCounts exec = take(count_rows(db_, exec_));
  EXPECT_EQ(exec.measured_ops, 1);
  EXPECT_EQ(exec.measured_steps, 1);
  EXPECT_EQ(take(count_rows(db_, calib_)).profiles, 1);
  EXPECT_EQ(count_rows(db_, RunId{99}).status().code(), StatusCode::kNotFound);
}

TEST_F(ExportTest, OneRun) {
  const std::vector<RunId> runs = {sim_};
  const Json doc = take(export_runs(db_, runs));
  EXPECT_EQ(doc["kind"], "planner_db_export");
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["database_schema_version"], kSchemaVersion);
  EXPECT_EQ(doc["planner_version"], build::kVersion);
  ASSERT_EQ(doc["runs"].size(), 1u);
  const Json& run = doc["runs"][0];
  EXPECT_EQ(run["id"], sim_.value);
  EXPECT_EQ(run["kind"], "simulate");
  EXPECT_EQ(run["status"], "ok");
  EXPECT_EQ(run["label"], "sim");
  EXPECT_EQ(run["hosts"], Json::array({"box"}));
  EXPECT_EQ(run["inputs"]["plan"], "p.json");
  EXPECT_FALSE(run.contains("failure"));
  ASSERT_EQ(run["plans"].size(), 1u);
  EXPECT_EQ(run["plans"][0]["label"], "tp2");
  EXPECT_EQ(run["plans"][0]["plan"]["parallel"]["tp"], 2);
  EXPECT_EQ(run["metrics"][0]["name"], "step_time");
  EXPECT_EQ(run["metrics"][0]["value"], 0.5);
  const Json& ops = run["predicted_ops"];
  EXPECT_EQ(ops["columns"], Json::array({"plan_id", "rank", "op_id", "op_kind", "micro_batch",
                                         "start_ps", "duration_ps", "bytes"}));
  ASSERT_EQ(ops["rows"].size(), 6u);
  EXPECT_EQ(ops["rows"][1],
            Json::array({plan_.value, 0, "op1", "all_reduce", nullptr, 1000000, 2000000, 2048}));
  EXPECT_TRUE(run["measured_ops"]["rows"].empty());
  EXPECT_TRUE(doc["hardware_profiles"].empty()) << "the simulation made no profile";
}

TEST_F(ExportTest, FailedRunAndEverything) {
  const Json doc = take(export_runs(db_, {}));
  ASSERT_EQ(doc["runs"].size(), 3u);
  EXPECT_EQ(doc["runs"][0]["id"], sim_.value) << "oldest first";
  const Json& exec = doc["runs"][1];
  EXPECT_EQ(exec["status"], "failed");
  EXPECT_EQ(exec["failure"]["reason"], "rank 1 died");
  EXPECT_EQ(exec["failure"]["rank"], 1);
  EXPECT_EQ(exec["measured_steps"][0]["loss"], 9.5);
  EXPECT_EQ(exec["measured_steps"][0]["step_time_ps"], 600000000000);
  EXPECT_EQ(exec["measured_ops"]["rows"][0], Json::array({1, 0, "op1", "all_reduce", "backward",
                                                          nullptr, 3000000, 2048, 0.5, nullptr}));
  ASSERT_EQ(doc["hardware_profiles"].size(), 2u);
  const Json& cpu = doc["hardware_profiles"][0];
  EXPECT_EQ(cpu["name"], "cpu");
  EXPECT_EQ(cpu["run_id"], calib_.value);
  EXPECT_EQ(cpu["parameters"]["gemm_tflops"], 0.1);
  EXPECT_EQ(cpu["samples"]["rows"][0][0], "gemm");
  EXPECT_EQ(doc["hardware_profiles"][1]["run_id"], nullptr);

  const std::vector<RunId> calib = {calib_};
  const Json only = take(export_runs(db_, calib));
  ASSERT_EQ(only["hardware_profiles"].size(), 1u);
  EXPECT_EQ(only["hardware_profiles"][0]["name"], "cpu");
  const std::vector<RunId> missing = {RunId{42}};
  EXPECT_EQ(export_runs(db_, missing).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace planner::store
