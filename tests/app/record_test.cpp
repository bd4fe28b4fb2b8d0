// Recording from library types: a sweep, a simulation, an accuracy report and a fitted profile
// land in the store as runs with their plans and metrics; an executed run's measurements come back
// as calibration points joined with its step program on op id.
#include "planner/app/record.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/app/calibrate.hpp"
#include "planner/app/database.hpp"
#include "planner/app/simulate.hpp"
#include "planner/app/sweep.hpp"
#include "planner/core/catalog.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/lowering.hpp"
#include "planner/store/store.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "support/command.hpp"

namespace planner::app {
namespace {

template <class T>
T take(Result<T> r) {
  if (!r) throw std::runtime_error(r.status().message());
  return std::move(r).value();
}

class RecordTest : public ::testing::Test {
 protected:
  void SetUp() override { db_.emplace(take(store::Database::open(dir_.file("planner.db")))); }
  store::Database& db() { return *db_; }

  planner::testing::TempDir dir_;
  std::optional<store::Database> db_;
};

search::SweepRequest tiny_sweep() {
  const Catalog& c = builtin_catalog();
  search::SweepScenario sc;
  sc.model = c.model("llama3-8b").value();
  sc.gpu = c.gpu("h100").value();
  sc.topology = topo::topology_for_gpu(sc.gpu).value();
  sc.training.seq_length = 2048;
  sc.training.global_batch_size = 32;
  sc.max_gpus = 8;
  search::SweepRequest req;
  req.scenarios.push_back(sc);
  req.options.top_k = 2;
  req.options.keep = 5;
  return req;
}

TEST_F(RecordTest, SweepRunHoldsEveryRankedPlanWithItsMetrics) {
  const search::SweepRequest req = tiny_sweep();
  SweepRunOptions one;
  one.threads = 1;
  const SweepRun run = take(app::run_sweep(req, nullptr, one));
  ASSERT_TRUE(run.result);
  const store::RunId id =
      take(record_sweep(db(), *run.setup, *run.result, sweep_inputs(req, {{"command", "test"}})));
  const store::RunRecord rec = take(store::get_run(db(), id));
  EXPECT_EQ(rec.kind, store::RunKind::kSweep);
  EXPECT_EQ(rec.status, store::RunStatus::kOk);
  EXPECT_EQ(Json::parse(rec.inputs_json)["command"], "test");
  const auto entries = take(store::get_sweep_results(db(), id));
  ASSERT_EQ(entries.size(), run.result->ranking.size());
  EXPECT_EQ(entries.front().position, 1);
  EXPECT_EQ(entries.front().tier, store::MetricSource::kSimulated);
  const auto metrics = take(store::get_metrics(db(), id, entries.front().plan));
  bool tokens_per_usd = false;
  for (const store::MetricRecord& m : metrics) {
    if (m.metric.name == "tokens_per_usd") {
      tokens_per_usd = true;
      EXPECT_DOUBLE_EQ(m.metric.value, run.result->ranking.front().objective);
    }
  }
  EXPECT_TRUE(tokens_per_usd);
}

TEST_F(RecordTest, SimulationWithOpsAndAFailedOne) {
  Plan p;
  p.model = builtin_catalog().model("gpt-tiny").value();
  p.gpu = builtin_catalog().gpu("h100").value();
  p.training.seq_length = 256;
  p.training.global_batch_size = 8;
  p.parallel.tp = 2;
  p.name = "tiny tp2";
  const PlacedPlan placed = take(place_plan(p, std::nullopt, "", 0));
  sim::SimOptions o;
  o.ranks = RankSubset::kAll;
  o.run.keep_op_times = true;
  const sim::SimResult r = take(simulate_plan(placed, default_profile_for(p.gpu), o));
  const store::RunId ok = take(record_simulation(db(), placed.plan, r, Json::object(), true));
  const auto plans = take(store::run_plans(db(), ok));
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(take(store::get_predicted_ops(db(), ok, plans[0].id)).size(), predicted_ops(r).size());
  EXPECT_FALSE(predicted_ops(r).empty());
  const store::RunId failed =
      take(record_simulation(db(), placed.plan, r, Json::object(), false, "does not fit"));
  const store::RunRecord rec = take(store::get_run(db(), failed));
  EXPECT_EQ(rec.status, store::RunStatus::kFailed);
  EXPECT_EQ(take(store::get_predicted_ops(db(), failed, plans[0].id)).size(), 0u);
}

TEST_F(RecordTest, AccuracyKeepsPredictedAndPublished) {
  fit::AccuracyReport rep;
  fit::RunAccuracy run;
  run.id = "paper-run";
  run.modelled = true;
  run.metric = fit::AccuracyMetric::kStepTime;
  run.published = 10;
  run.step_time_s = 11;
  run.mfu = 0.4;
  run.error_percent = 10;
  run.plan.model = builtin_catalog().model("gpt-tiny").value();
  run.plan.gpu = builtin_catalog().gpu("h100").value();
  run.plan.cluster.gpu = run.plan.gpu.name;
  rep.runs.push_back(run);
  fit::RunAccuracy skipped;
  skipped.id = "tpu-run";
  rep.runs.push_back(skipped);
  const store::RunId id = take(record_accuracy(db(), rep, {{"file", "runs.json"}}));
  EXPECT_EQ(take(store::get_run(db(), id)).label, "runs.json");
  const auto metrics = take(store::get_metrics(db(), id));
  int measured = 0, simulated = 0;
  for (const store::MetricRecord& m : metrics) {
    if (m.source == store::MetricSource::kMeasured) ++measured;
    if (m.source == store::MetricSource::kSimulated) ++simulated;
  }
  EXPECT_EQ(measured, 1);   // the published step time
  EXPECT_EQ(simulated, 3);  // step time, MFU, error
}

TEST_F(RecordTest, ProfileThatDoesNotReadBackIsNotStored) {
  HardwareProfile good = default_profile_for(builtin_catalog().gpu("h100").value());
  good.name = "mybox";
  const store::RunId id = take(record_profile(db(), good, {}, Json::object()));
  EXPECT_EQ(take(store::get_run(db(), id)).kind, store::RunKind::kCalibrate);
  HardwareProfile bad = good;
  bad.name = "broken";
  bad.compute.kernel_overhead = Time(-1);
  auto r = record_profile(db(), bad, {}, Json::object());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), StatusCode::kRuntime);
  EXPECT_NE(r.status().message().find("nothing stored"), std::string::npos);
  EXPECT_FALSE(store::get_profile(db(), "broken"));
}

TEST_F(RecordTest, ExecutedRunJoinsWithItsProgramOnOpId) {
  Plan p;
  p.model = builtin_catalog().model("gpt-tiny").value();
  p.gpu = builtin_catalog().gpu("cpu-host").value();
  p.training.seq_length = 64;
  p.training.global_batch_size = 2;
  p.training.precision = Precision::kFp32;
  p.parallel.dp = 2;
  p.name = "tiny dp2";
  p.cluster.gpu = p.gpu.name;
  p.cluster.gpus_per_node = 2;
  const StepProgram program = take(lower(p, LowerOptions{}));
  store::NewRun nr;
  nr.kind = store::RunKind::kExec;
  nr.inputs_json = "{}";
  const store::RunId run = take(store::create_run(db(), nr));
  const store::PlanId plan = take(store::put_plan_text(db(), to_json_text(p), p.name));
  ASSERT_TRUE(store::link_plan(db(), run, plan).is_ok());
  // Two steps of rank 0: the warm-up one is left out of the mean.
  std::vector<store::OpMeasurement> ops;
  int compute = 0;
  for (const Op& op : program.ranks()[0].ops()) {
    const OpDesc& d = program.desc(op);
    for (std::int64_t step = 0; step < 2; ++step) {
      store::OpMeasurement m;
      m.step = step;
      m.op_id = to_string(op.id);
      m.op_kind = std::string(to_string(d.kind));
      m.wall = microseconds(step == 0 ? 1000 : 10);
      ops.push_back(m);
    }
    if (!is_communication(d.kind) && d.stream != Stream::kHost) ++compute;
  }
  std::vector<store::StepMeasurement> steps(2);
  steps[0].step = 0;
  steps[0].warmup = true;
  steps[1].step = 1;
  ASSERT_TRUE(store::add_measured_ops(db(), run, ops).is_ok());
  ASSERT_TRUE(store::add_measured_steps(db(), run, steps).is_ok());
  const auto points = take(run_points(db(), run, builtin_catalog(),
                                      [](const Plan&, const Json&) { return LowerOptions{}; }));
  ASSERT_EQ(static_cast<int>(points.size()), compute);
  for (const CalibrationPoint& pt : points)
    EXPECT_EQ(pt.measured, microseconds(10));
  // A run that was not executed is refused.
  store::NewRun other;
  other.kind = store::RunKind::kSweep;
  const store::RunId sweep = take(store::create_run(db(), other));
  auto refused = run_points(db(), sweep, builtin_catalog(),
                            [](const Plan&, const Json&) { return LowerOptions{}; });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidInput);
}

}  // namespace
}  // namespace planner::app
