// Round trips of every record type through the database.
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "planner/core/version.hpp"
#include "store_test_support.hpp"

namespace planner::store {
namespace {

using namespace planner::literals;
using testing::take;

class RecordsTest : public ::testing::Test {
 protected:
  planner::testing::TempDir dir_;
  Database db_ = take(Database::open(dir_.file("planner.db")));
};

TEST_F(RecordsTest, RunsRoundTripWithTheirBuildAndHosts) {
  const std::int64_t before = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  const RunId id = take(create_run(db_, {.kind = RunKind::kExec,
                                         .label = "gpt dp2",
                                         .inputs_json = R"({"plan": "p.json", "ranks": 2})",
                                         .hosts = {"node-a", "node-b"}}));
  RunRecord r = take(get_run(db_, id));
  EXPECT_EQ(r.id, id);
  EXPECT_EQ(r.kind, RunKind::kExec);
  EXPECT_EQ(r.status, RunStatus::kRunning);
  EXPECT_EQ(r.label, "gpt dp2");
  EXPECT_EQ(r.inputs_json, R"({"plan": "p.json", "ranks": 2})");
  EXPECT_EQ(r.hosts, (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(r.planner_version, build::kVersion);
  EXPECT_EQ(r.git_commit, build::kGitCommit);
  EXPECT_GE(r.created_unix_ms, before);
  EXPECT_LT(r.created_unix_ms, before + 60'000);
  EXPECT_FALSE(r.finished_unix_ms);

  PLANNER_ASSERT_OK(finish_run(db_, id));
  r = take(get_run(db_, id));
  EXPECT_EQ(r.status, RunStatus::kOk);
  ASSERT_TRUE(r.finished_unix_ms);
  EXPECT_GE(*r.finished_unix_ms, r.created_unix_ms);
  EXPECT_TRUE(r.failure_reason.empty());

  const Status again = finish_run(db_, id);
  EXPECT_EQ(again.code(), StatusCode::kInvalidInput);
  EXPECT_NE(again.message().find("already ended (ok)"), std::string::npos) << again.message();
}

// A run recorded once its work is done (a sweep) dates from when the work began, so that its
// duration is the work's; nonsense figures move nothing (or at most a year).
TEST_F(RecordsTest, WorkDoneBeforeRecordingCountsInTheDuration) {
  const auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const std::int64_t before = now_ms();
  const RunId id = take(create_run(db_, {.kind = RunKind::kSweep, .seconds_before = 90.5}));
  PLANNER_ASSERT_OK(finish_run(db_, id));
  const RunRecord r = take(get_run(db_, id));
  ASSERT_TRUE(r.finished_unix_ms);
  EXPECT_GE(*r.finished_unix_ms - r.created_unix_ms, 90'500);
  EXPECT_LT(*r.finished_unix_ms - r.created_unix_ms, 90'500 + 60'000);
  EXPECT_LE(r.created_unix_ms, before - 90'000);

  for (const double bad : {-5.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    const std::int64_t t0 = now_ms();
    const RunRecord odd =
        take(get_run(db_, take(create_run(db_, {.kind = RunKind::kSweep, .seconds_before = bad}))));
    EXPECT_GE(odd.created_unix_ms, t0) << bad;
  }
  const std::int64_t t0 = now_ms();
  const RunRecord huge =
      take(get_run(db_, take(create_run(db_, {.kind = RunKind::kSweep, .seconds_before = 1e300}))));
  EXPECT_GE(huge.created_unix_ms, t0 - 32'000'000'000LL - 1000);
}

TEST_F(RecordsTest, FailedRunsKeepReasonAndRank) {
  const RunId id = take(create_run(db_, {.kind = RunKind::kExec}));
  PLANNER_ASSERT_OK(fail_run(db_, id, "rank 3 stopped answering after 60 s", 3));
  const RunRecord r = take(get_run(db_, id));
  EXPECT_EQ(r.status, RunStatus::kFailed);
  EXPECT_EQ(r.failure_reason, "rank 3 stopped answering after 60 s");
  EXPECT_EQ(r.failed_rank, 3);
  EXPECT_TRUE(r.finished_unix_ms);

  const RunId other = take(create_run(db_, {.kind = RunKind::kSweep}));
  PLANNER_ASSERT_OK(fail_run(db_, other, "out of memory"));
  EXPECT_FALSE(take(get_run(db_, other)).failed_rank);
}

TEST_F(RecordsTest, RunDefaultsAndBadInput) {
  const RunId id = take(create_run(db_, {}));
  const RunRecord r = take(get_run(db_, id));
  ASSERT_EQ(r.hosts.size(), 1u) << "this machine's host name is recorded";
  EXPECT_FALSE(r.hosts[0].empty());
  EXPECT_EQ(r.inputs_json, "{}");

  auto bad = create_run(db_, {.inputs_json = "{not json"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(bad.status().message(), "the run's inputs is not valid JSON");

  auto missing = get_run(db_, RunId{999});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "run 999 not found in " + dir_.file("planner.db"));
  EXPECT_EQ(finish_run(db_, RunId{999}).code(), StatusCode::kNotFound);
}

TEST_F(RecordsTest, ListRunsFiltersNewestFirst) {
  auto empty = latest_run(db_);
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  std::vector<RunId> ids;
  for (RunKind kind : {RunKind::kSweep, RunKind::kSimulate, RunKind::kSweep, RunKind::kCalibrate,
                       RunKind::kAccuracy}) {
    ids.push_back(take(create_run(db_, {.kind = kind})));
  }
  PLANNER_ASSERT_OK(finish_run(db_, ids[2]));
  const auto all = take(list_runs(db_));
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all.front().id, ids.back());
  EXPECT_EQ(all.back().id, ids.front());
  EXPECT_EQ(take(latest_run(db_)), ids.back());

  const auto sweeps = take(list_runs(db_, {.kind = RunKind::kSweep}));
  ASSERT_EQ(sweeps.size(), 2u);
  EXPECT_EQ(sweeps[0].id, ids[2]);
  EXPECT_EQ(sweeps[1].id, ids[0]);
  const auto ok = take(list_runs(db_, {.status = RunStatus::kOk}));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].id, ids[2]);
  const auto two = take(list_runs(db_, {.limit = 2}));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].id, ids[3]);
}

TEST_F(RecordsTest, PlansAreStoredOncePerContent) {
  const std::string a = R"({"b": [1, 2, {"y": 1, "x": 2}], "a": "text", "c": 1.5})";
  const std::string same =
      "{\n  \"c\": 1.5,\n  \"a\": \"text\",\n  \"b\": [1,2,{\"x\":2,\"y\":1}]\n}";
  EXPECT_EQ(canonical_json(Json::parse(a)), R"({"a":"text","b":[1,2,{"x":2,"y":1}],"c":1.5})");
  const PlanId p1 = take(put_plan_text(db_, a, "first label"));
  const PlanId p2 = take(put_plan_text(db_, same, "second label"));
  EXPECT_EQ(p1, p2);
  const PlanId p3 = take(put_plan(db_, Json::parse(same), "third"));
  EXPECT_EQ(p1, p3);
  const PlanId other = take(put_plan_text(db_, testing::plan_text(4), "tp4"));
  EXPECT_NE(other, p1);

  const PlanRecord rec = take(get_plan(db_, p1));
  EXPECT_EQ(rec.label, "first label");
  EXPECT_EQ(rec.canonical_json, canonical_json(Json::parse(a)));
  EXPECT_EQ(rec.hash, sha256_hex(rec.canonical_json));
  EXPECT_EQ(rec.hash.size(), 64u);
  EXPECT_EQ(take(find_plan(db_, rec.hash)), std::optional<PlanId>(p1));
  EXPECT_EQ(take(find_plan(db_, sha256_hex("nothing"))), std::nullopt);

  auto bad = put_plan_text(db_, "{\"tp\": ", "broken");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidInput);
  auto not_object = put_plan(db_, Json(a), "a string, not a plan");
  ASSERT_FALSE(not_object);
  EXPECT_EQ(not_object.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(not_object.status().message().find("must be a JSON object"), std::string::npos);
  EXPECT_EQ(get_plan(db_, PlanId{42}).status().code(), StatusCode::kNotFound);

  const RunId run = take(create_run(db_, {}));
  PLANNER_ASSERT_OK(link_plan(db_, run, other));
  PLANNER_ASSERT_OK(link_plan(db_, run, p1));
  PLANNER_ASSERT_OK(link_plan(db_, run, p1));
  const auto plans = take(run_plans(db_, run));
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].id, p1);
  EXPECT_EQ(plans[1].id, other);
  EXPECT_EQ(take(get_run(db_, run)).plan_count, 2);
  EXPECT_EQ(link_plan(db_, run, PlanId{42}).code(), StatusCode::kNotFound);
  EXPECT_EQ(link_plan(db_, RunId{42}, p1).code(), StatusCode::kNotFound);
}

TEST_F(RecordsTest, MetricsRoundTripAndReplace) {
  const RunId run = take(create_run(db_, {.kind = RunKind::kSimulate}));
  const PlanId plan = take(put_plan_text(db_, testing::plan_text(2), "tp2"));
  const std::vector<Metric> simulated = {{"step_time", 1.25, "s"},
                                         {"mfu", 0.41, "fraction"},
                                         {"exposed_comm_tp", 0.02, "s"},
                                         {"peak_memory", 6.4e10, "bytes"}};
  PLANNER_ASSERT_OK(put_metrics(db_, run, plan, MetricSource::kSimulated, simulated));
  PLANNER_ASSERT_OK(put_metrics(db_, run, plan, MetricSource::kAnalytic,
                                std::vector<Metric>{{"step_time", 1.2, "s"}}));
  PLANNER_ASSERT_OK(put_metrics(db_, run, plan, MetricSource::kSimulated,
                                std::vector<Metric>{{"mfu", 0.42, "fraction"}}));
  const auto got = take(get_metrics(db_, run, plan));
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].source, MetricSource::kAnalytic);
  EXPECT_EQ(got[0].metric.name, "step_time");
  EXPECT_EQ(got[0].metric.value, 1.2);
  // Simulated, by name: exposed_comm_tp, mfu (replaced), peak_memory, step_time.
  EXPECT_EQ(got[1].metric.name, "exposed_comm_tp");
  EXPECT_EQ(got[2].metric.name, "mfu");
  EXPECT_EQ(got[2].metric.value, 0.42);
  EXPECT_EQ(got[3].metric.value, 6.4e10);
  EXPECT_EQ(got[3].metric.unit, "bytes");
  EXPECT_EQ(take(get_run(db_, run)).plan_count, 1) << "metrics link the plan";

  const std::vector<Metric> nan = {{"mfu", std::numeric_limits<double>::quiet_NaN(), ""}};
  const Status bad = put_metrics(db_, run, plan, MetricSource::kSimulated, nan);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(bad.message(), "metric \"mfu\" is not a finite number");
  EXPECT_EQ(put_metrics(db_, RunId{77}, plan, MetricSource::kSimulated, simulated).code(),
            StatusCode::kNotFound);
}

TEST_F(RecordsTest, PredictedOpsRoundTrip) {
  const RunId run = take(create_run(db_, {}));
  const PlanId plan = take(put_plan_text(db_, testing::plan_text(2), "tp2"));
  const std::vector<OpPrediction> ops = testing::sample_predictions(3, 40);
  PLANNER_ASSERT_OK(add_predicted_ops(db_, run, plan, ops));
  const std::vector<OpPrediction> got = take(get_predicted_ops(db_, run, plan));
  ASSERT_EQ(got.size(), ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(got[i].op_id, ops[i].op_id);
    EXPECT_EQ(got[i].op_kind, ops[i].op_kind);
    EXPECT_EQ(got[i].rank, ops[i].rank);
    EXPECT_EQ(got[i].micro_batch, ops[i].micro_batch);
    EXPECT_EQ(got[i].start, ops[i].start);
    EXPECT_EQ(got[i].duration, ops[i].duration);
    EXPECT_EQ(got[i].bytes, ops[i].bytes);
  }
  // The same op ids for another plan of the same run are fine.
  const PlanId plan2 = take(put_plan_text(db_, testing::plan_text(4), "tp4"));
  PLANNER_EXPECT_OK(add_predicted_ops(db_, run, plan2, ops));
  EXPECT_EQ(take(count_rows(db_, run)).predicted_ops, 240);
}

TEST_F(RecordsTest, MeasurementsRoundTrip) {
  const RunId run = take(create_run(db_, {.kind = RunKind::kExec}));
  std::vector<OpMeasurement> ops;
  ops.push_back({.rank = 1,
                 .step = 2,
                 .op_id = "L0.fwd.allreduce",
                 .op_kind = "all_reduce",
                 .phase = "forward",
                 .start = microseconds(10.5),
                 .wall = nanoseconds(1234567.0),
                 .bytes = 64_MiB,
                 .algbw = GBps(12.5),
                 .busbw = GBps(18.75)});
  ops.push_back({.rank = 0,
                 .step = 2,
                 .op_id = "L0.fwd.gemm",
                 .op_kind = "gemm",
                 .phase = "forward",
                 .wall = microseconds(800.0),
                 .bytes = 3_MiB});
  PLANNER_ASSERT_OK(add_measured_ops(db_, run, ops));
  const auto got = take(get_measured_ops(db_, run));
  ASSERT_EQ(got.size(), 2u);
  const OpMeasurement& gemm = got[0];  // rank 0 first
  EXPECT_EQ(gemm.op_id, "L0.fwd.gemm");
  EXPECT_FALSE(gemm.start);
  EXPECT_FALSE(gemm.algbw);
  EXPECT_EQ(gemm.wall, microseconds(800.0));
  const OpMeasurement& ar = got[1];
  EXPECT_EQ(ar.rank, 1);
  EXPECT_EQ(ar.step, 2);
  EXPECT_EQ(ar.phase, "forward");
  EXPECT_EQ(ar.start, microseconds(10.5));
  EXPECT_EQ(ar.wall, nanoseconds(1234567.0));
  EXPECT_EQ(ar.bytes, 64_MiB);
  ASSERT_TRUE(ar.algbw && ar.busbw);
  EXPECT_DOUBLE_EQ(ar.algbw->raw(), 12.5e9);
  EXPECT_DOUBLE_EQ(ar.busbw->raw(), 18.75e9);
  const Status dup = add_measured_ops(db_, run, std::span(&ops[0], 1));
  EXPECT_EQ(dup.code(), StatusCode::kInvalidInput);
  EXPECT_NE(dup.message().find("in step 2"), std::string::npos) << dup.message();

  const std::vector<StepMeasurement> steps = {
      {.step = 0, .step_time = 2_s, .tokens_per_s = 1000, .loss = 10.9, .warmup = true},
      {.step = 1,
       .step_time = 1500_ms,
       .tokens_per_s = 1365.3,
       .loss = 10.7,
       .peak_memory = 3_GiB}};
  PLANNER_ASSERT_OK(add_measured_steps(db_, run, steps));
  const auto got_steps = take(get_measured_steps(db_, run));
  ASSERT_EQ(got_steps.size(), 2u);
  EXPECT_TRUE(got_steps[0].warmup);
  EXPECT_FALSE(got_steps[0].peak_memory);
  EXPECT_EQ(got_steps[0].step_time, 2_s);
  EXPECT_FALSE(got_steps[1].warmup);
  EXPECT_EQ(got_steps[1].peak_memory, 3_GiB);
  EXPECT_EQ(got_steps[1].tokens_per_s, 1365.3);
  EXPECT_EQ(got_steps[1].loss, 10.7);
  EXPECT_EQ(add_measured_steps(db_, RunId{99}, steps).code(), StatusCode::kNotFound);
}

TEST_F(RecordsTest, HardwareProfilesRoundTripWithTheirSamples) {
  const RunId run = take(create_run(db_, {.kind = RunKind::kCalibrate}));
  const std::vector<CalibrationSample> samples = {
      {.benchmark = "gemm",
       .shape = "4096x4096x4096",
       .precision = "bf16",
       .bytes = 96_MiB,
       .group_size = 1,
       .iterations = 20,
       .time = microseconds(180.0),
       .flop_rate = tflops_per_s(763.5)},
      {.benchmark = "all_reduce",
       .bytes = 1_GiB,
       .group_size = 8,
       .iterations = 5,
       .time = milliseconds(7.5),
       .algbw = GBps(143.2),
       .busbw = GBps(250.6)},
  };
  const ProfileId id = take(put_profile(db_,
                                        {.name = "h100-node",
                                         .description = "8x H100-SXM5-80GB, NVLink 4",
                                         .parameters_json = R"({"gemm_efficiency": 0.77})",
                                         .provenance = "driver 550.54, NCCL 2.21.5, 2024-05-01",
                                         .run = run},
                                        samples));
  const HardwareProfile p = take(get_profile(db_, "h100-node"));
  EXPECT_EQ(p.id, id);
  EXPECT_EQ(p.description, "8x H100-SXM5-80GB, NVLink 4");
  EXPECT_EQ(p.parameters_json, R"({"gemm_efficiency": 0.77})");
  EXPECT_EQ(p.provenance, "driver 550.54, NCCL 2.21.5, 2024-05-01");
  EXPECT_EQ(p.run, run);
  EXPECT_EQ(p.sample_count, 2);
  EXPECT_GT(p.created_unix_ms, 0);
  const auto got = take(get_calibration_samples(db_, id));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].shape, "4096x4096x4096");
  EXPECT_EQ(got[0].precision, "bf16");
  EXPECT_EQ(got[0].iterations, 20);
  ASSERT_TRUE(got[0].flop_rate);
  EXPECT_DOUBLE_EQ(to_tflops_per_s(*got[0].flop_rate), 763.5);
  EXPECT_FALSE(got[0].algbw);
  EXPECT_EQ(got[1].group_size, 8);
  EXPECT_EQ(got[1].time, milliseconds(7.5));
  EXPECT_DOUBLE_EQ(to_GBps(*got[1].busbw), 250.6);
  EXPECT_FALSE(got[1].flop_rate);

  auto dup = put_profile(db_, {.name = "h100-node", .parameters_json = "{}"}, {});
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidInput);
  const ProfileId replaced = take(put_profile(db_, {.name = "h100-node", .parameters_json = "{}"},
                                              {samples.data(), 1}, ProfileWrite::kReplace));
  EXPECT_NE(replaced, id) << "ids are never reused";
  EXPECT_EQ(take(get_profile(db_, "h100-node")).sample_count, 1);
  EXPECT_EQ(take(get_calibration_samples(db_, replaced)).size(), 1u);
  EXPECT_TRUE(take(get_calibration_samples(db_, id)).empty()) << "old samples were removed";

  PLANNER_ASSERT_OK(put_profile(db_, {.name = "cpu-2core", .parameters_json = "{}"}, {}).status());
  const auto all = take(list_profiles(db_));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "cpu-2core");
  auto missing = get_profile(db_, "a100");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("known profiles: cpu-2core, h100-node"),
            std::string::npos)
      << missing.status().message();
  PLANNER_ASSERT_OK(delete_profile(db_, "cpu-2core"));
  EXPECT_EQ(delete_profile(db_, "cpu-2core").code(), StatusCode::kNotFound);
  EXPECT_EQ(put_profile(db_, {.name = "x", .parameters_json = "[1,"}, {}).status().code(),
            StatusCode::kInvalidInput);
  EXPECT_EQ(put_profile(db_, {.parameters_json = "{}"}, {}).status().code(),
            StatusCode::kInvalidInput);
}

TEST_F(RecordsTest, SweepResultsRankPlansWithTheirMetrics) {
  const RunId run = take(create_run(db_, {.kind = RunKind::kSweep}));
  std::vector<SweepEntry> entries;
  for (int tp : {1, 2, 4, 8}) {
    SweepEntry e;
    e.plan = take(put_plan_text(db_, testing::plan_text(tp), "tp" + std::to_string(tp)));
    e.position = tp == 2 ? 1 : tp == 4 ? 2 : tp == 1 ? 3 : 4;
    e.tier = e.position <= 2 ? MetricSource::kSimulated : MetricSource::kAnalytic;
    e.objective = 1e6 / e.position;
    e.note = "bubble " + std::to_string(5 * tp) + "%";
    e.metrics = {{"tokens_per_usd", e.objective, "tokens/USD"}, {"mfu", 0.1 * tp, "fraction"}};
    entries.push_back(e);
  }
  PLANNER_ASSERT_OK(add_sweep_results(db_, run, entries));
  const auto got = take(get_sweep_results(db_, run));
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].plan_label, "tp2");
  EXPECT_EQ(got[0].tier, MetricSource::kSimulated);
  EXPECT_EQ(got[0].objective, 1e6);
  EXPECT_EQ(got[0].note, "bubble 10%");
  EXPECT_EQ(got[3].plan_label, "tp8");
  EXPECT_EQ(got[3].tier, MetricSource::kAnalytic);
  EXPECT_EQ(take(get_sweep_results(db_, run, 2)).size(), 2u);
  const auto metrics = take(get_metrics(db_, run, got[0].plan));
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[0].source, MetricSource::kSimulated);
  EXPECT_EQ(take(get_run(db_, run)).plan_count, 4);

  SweepEntry bad = entries[0];
  bad.plan = PlanId{999};
  EXPECT_EQ(add_sweep_results(db_, run, std::span(&bad, 1)).code(), StatusCode::kNotFound);
  EXPECT_EQ(take(get_sweep_results(db_, run)).size(), 4u);
}

TEST_F(RecordsTest, KnownMetricsHaveUniqueNamesAndUnits) {
  std::set<std::string_view> names;
  for (const MetricDef& m : known_metrics()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_FALSE(m.unit.empty()) << m.name;
    EXPECT_FALSE(m.description.empty()) << m.name;
  }
  EXPECT_TRUE(names.count("step_time"));
}

}  // namespace
}  // namespace planner::store
