// planner exec as a user runs it: --launch local starts mpirun itself, the run lands in the
// database op by op, and bad plans are refused before any rank starts.
#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "exec_test_plans.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/lowering.hpp"
#include "planner/store/store.hpp"
#include "support/command.hpp"

namespace planner::exec {
namespace {

using planner::testing::CommandResult;
using planner::testing::TempDir;
using planner::testing::write_file;
using testing::gpt_test_model;
using testing::par;
using testing::test_plan;

// The plan linked to an executed run (it has exactly one).
std::optional<store::PlanId> run_plan_id(store::Database& db, store::RunId run) {
  auto plans = store::run_plans(db, run);
  if (!plans || plans->size() != 1) return std::nullopt;
  return plans->front().id;
}

std::string write_plan(const TempDir& dir, const std::string& name, const Plan& plan) {
  const std::string path = dir.file(name);
  write_file(path, to_json_text(plan));
  return path;
}

// Open MPI's shared-memory transport without cross-memory attach, which containers lacking the
// ptrace capability refuse (as for the mpi tests, tests/CMakeLists.txt). The run-as-root variables
// are deliberately absent: planner exec --launch local adds them itself.
const std::vector<std::string> kMpiEnv = {"OMPI_MCA_btl_vader_single_copy_mechanism=none"};

CommandResult run_planner(std::vector<std::string> args) {
  args.insert(args.begin(), PLANNER_CLI_PATH);
  return planner::testing::run_command(args, kMpiEnv);
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(ExecCli, LocalLaunchOnTwoRanksRecordsEveryStepAndOp) {
  TempDir dir;
  const Plan plan = test_plan(gpt_test_model(), par(2, 1, 1));
  const std::string path = write_plan(dir, "tp2.json", plan);
  const std::string db_path = dir.file("runs.db");
  const CommandResult r = run_planner({"exec", path, "--launch", "local", "-n", "2", "--steps", "3",
                                       "--warmup", "1", "--db", db_path});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.err, "planner exec: 2 ranks on ")) << r.err;
  EXPECT_TRUE(contains(r.err, "data: synthetic Markov tokens (seed 7")) << r.err;
  EXPECT_TRUE(contains(r.err, "step 1/3  loss ")) << r.err;
  EXPECT_TRUE(contains(r.err, "(warm-up)")) << r.err;
  EXPECT_TRUE(contains(r.err, "step 3/3  loss ")) << r.err;
  EXPECT_TRUE(contains(r.out, "run:")) << r.out;
  EXPECT_TRUE(contains(r.out, "final loss:")) << r.out;

  auto db = store::Database::open(db_path, {store::OpenMode::kMustExist});
  ASSERT_TRUE(db) << db.status().message();
  auto run = store::get_run(*db, store::RunId{1});
  ASSERT_TRUE(run) << run.status().message();
  EXPECT_EQ(run->kind, store::RunKind::kExec);
  EXPECT_EQ(run->status, store::RunStatus::kOk);
  EXPECT_EQ(run->hosts.size(), 2u);
  EXPECT_EQ(run->plan_count, 1);
  EXPECT_TRUE(contains(run->inputs_json, "\"backend\":\"cpu\"")) << run->inputs_json;

  auto steps = store::get_measured_steps(*db, run->id);
  ASSERT_TRUE(steps);
  ASSERT_EQ(steps->size(), 3u);
  for (const store::StepMeasurement& s : *steps) {
    EXPECT_EQ(s.warmup, s.step == 0);
    ASSERT_TRUE(s.loss.has_value());
    EXPECT_GT(*s.loss, 3.0);  // about ln(64) = 4.16 at the start
    EXPECT_GT(s.tokens_per_s, 0);
    EXPECT_GT(s.step_time.raw(), 0);
    EXPECT_GT(s.peak_memory.value_or(Bytes(0)).raw(), 0);
  }

  // Every op of both ranks' programs in every step, under the program's op ids.
  LowerOptions lo;
  lo.fp32_grads = true;
  auto program = lower(plan, lo);
  ASSERT_TRUE(program);
  auto ops = store::get_measured_ops(*db, run->id);
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops->size(), 3 * program->total_ops());
  std::set<std::string> ids;
  for (const RankProgram& rp : program->ranks()) {
    for (const Op& op : rp.ops())
      ids.insert(to_string(op.id));
  }
  int collectives = 0;
  for (const store::OpMeasurement& m : *ops) {
    EXPECT_TRUE(ids.count(m.op_id)) << m.op_id;
    ASSERT_TRUE(m.start.has_value());
    if (m.op_kind == "all_reduce" && m.wall.raw() > 0) {
      ++collectives;
      ASSERT_TRUE(m.busbw.has_value());
      // nccl-tests: busbw = algbw x 2(n-1)/n, which is 1 for n = 2.
      EXPECT_DOUBLE_EQ(m.busbw->raw(), m.algbw->raw());
    }
  }
  EXPECT_GT(collectives, 0);
  auto metrics = store::get_metrics(*db, run->id);
  ASSERT_TRUE(metrics);
  std::set<std::string> names;
  std::set<std::string> simulated;
  for (const store::MetricRecord& m : *metrics) {
    if (m.source == store::MetricSource::kMeasured) names.insert(m.metric.name);
    if (m.source == store::MetricSource::kSimulated) simulated.insert(m.metric.name);
  }
  for (const char* name : {"step_time", "tokens_per_s", "loss", "peak_memory", "mfu"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  for (const char* name : {"step_time", "tokens_per_s", "peak_memory"}) {
    EXPECT_TRUE(simulated.count(name)) << name;
  }

  // The simulator's prediction for the same plan is stored with the run: every op of both ranks,
  // under the same op ids, and the simulated step time.
  const std::optional<store::PlanId> plan_id = run_plan_id(*db, run->id);
  ASSERT_TRUE(plan_id.has_value());
  auto predicted = store::get_predicted_ops(*db, run->id, *plan_id);
  ASSERT_TRUE(predicted) << predicted.status().message();
  EXPECT_EQ(predicted->size(), program->total_ops());
  auto compared = store::compare_run(*db, run->id);
  ASSERT_TRUE(compared) << compared.status().message();
  EXPECT_TRUE(compared->predicted_step_time.has_value());
  EXPECT_EQ(compared->predicted_only, 0);
  EXPECT_EQ(compared->measured_only, 0);
  EXPECT_EQ(compared->by_step.size(), 3u);

  // planner report shows it: per op kind and per step, with the error.
  const CommandResult report = run_planner({"report", "1", "--db", db_path});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  for (const char* what : {"Per op kind", "all_reduce", "gemm", "Per step", "warm-up", "error"}) {
    EXPECT_TRUE(contains(report.out, what)) << what << "\n" << report.out;
  }
  const CommandResult json = run_planner({"report", "latest", "--db", db_path, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json rep = Json::parse(json.out);
  EXPECT_EQ(rep["run"], 1);
  EXPECT_EQ(rep["by_step"].size(), 3u);
  EXPECT_FALSE(rep["by_op_kind"].empty());
  EXPECT_TRUE(rep["predicted_step_time_s"].is_number());
  EXPECT_TRUE(rep["step_time_relative_error"].is_number());
}

TEST(ExecCli, ReportRefusesARunWithoutAPrediction) {
  TempDir dir;
  const std::string db_path = dir.file("runs.db");
  {
    auto db = store::Database::open(db_path);
    ASSERT_TRUE(db);
    store::NewRun r;
    r.kind = store::RunKind::kExec;
    ASSERT_TRUE(store::create_run(*db, r));
  }
  const CommandResult r = run_planner({"report", "1", "--db", db_path});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "run 1 has no prediction to compare with")) << r.err;
  const CommandResult missing = run_planner({"report", "7", "--db", db_path});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
}

TEST(ExecCli, OneRankWithoutALauncher) {
  TempDir dir;
  const std::string path = write_plan(dir, "one.json", test_plan(gpt_test_model(), {}));
  const CommandResult r = run_planner(
      {"exec", path, "--launch", "none", "--steps", "2", "--warmup", "1", "--no-db", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json out = Json::parse(r.out);
  EXPECT_EQ(out["losses"].size(), 2u);
  EXPECT_EQ(out["steps"], 2);
  EXPECT_FALSE(out.contains("run"));
}

TEST(ExecCli, RefusesBadPlansBeforeAnyRankStarts) {
  TempDir dir;
  const std::string db_path = dir.file("never.db");
  const std::string tp2 = write_plan(dir, "tp2.json", test_plan(gpt_test_model(), par(2, 1, 1)));
  Plan bf16 = test_plan(gpt_test_model(), {});
  bf16.training.precision = Precision::kBf16;
  bf16.gpu = *builtin_catalog().find_gpu("H100");
  bf16.cluster.gpu = bf16.gpu.name;
  const std::string bf16_path = write_plan(dir, "bf16.json", bf16);
  Plan huge = test_plan(*builtin_catalog().find_model("gpt3-175b"), {}, Optimizer::kAdam, 1, 2048);
  const std::string huge_path = write_plan(dir, "huge.json", huge);
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"exec", tp2, "--launch", "local", "-n", "3"}, 2, "were started: run it on 2 ranks (-n 2)"},
      {{"exec", tp2, "--backend", "tpu"}, 2, "unknown backend \"tpu\""},
      {{"exec", tp2, "--backend", "cuda"}, 1, "cuda backend is not part of this build"},
      {{"exec", bf16_path, "--launch", "local"}, 2, "/training/precision"},
      {{"exec", huge_path, "--launch", "local"}, 2, "/cluster/gpu: a rank of stage 0 needs"},
      {{"exec", tp2, "--steps", "2", "--warmup", "2"}, 2, "--warmup (2) must be below --steps"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--db", db_path});
    const auto t0 = std::chrono::steady_clock::now();
    const CommandResult r = run_planner(args);
    EXPECT_EQ(r.exit_code, c.code) << c.message << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, c.message)) << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << c.message;
  }
  EXPECT_FALSE(std::filesystem::exists(db_path));
}

TEST(ExecCli, SlurmDryRunPrintsTheBatchScriptAndBadPlansAreRefusedBeforeSubmitting) {
  TempDir dir;
  const std::string tp2 = write_plan(dir, "tp2.json", test_plan(gpt_test_model(), par(2, 1, 1)));
  const CommandResult r = run_planner({"exec", tp2, "--launch", "slurm", "--dry-run", "--partition",
                                       "debug", "--time", "00:10:00", "--steps", "5", "--no-db"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line :
       {"#SBATCH --nodes=1\n", "#SBATCH --ntasks=2\n", "#SBATCH --ntasks-per-node=2\n",
        "#SBATCH --partition=debug\n", "#SBATCH --time=00:10:00\n", "\nsrun --mpi=pmix ",
        " --launch none --steps 5 ", " --no-db",
        " --outcome-file \"$outcome\" --settle \"$?\"\n"}) {
    EXPECT_TRUE(contains(r.out, line)) << line << "\n" << r.out;
  }
  EXPECT_TRUE(contains(r.out, " exec " + tp2 + " ")) << r.out;

  // One rank per node in the plan's cluster: 2 ranks need 2 nodes.
  Plan spread = test_plan(gpt_test_model(), par(2, 1, 1));
  spread.cluster.nodes = 2;
  spread.cluster.gpus_per_node = 1;
  const std::string spread_path = write_plan(dir, "spread.json", spread);
  CommandResult bad = run_planner(
      {"exec", spread_path, "--launch", "slurm", "--nodes", "1", "--dry-run", "--no-db"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "its 2 ranks need 2 nodes")) << bad.err;

  Plan huge = test_plan(*builtin_catalog().find_model("gpt3-175b"), {}, Optimizer::kAdam, 1, 2048);
  bad = run_planner(
      {"exec", write_plan(dir, "huge.json", huge), "--launch", "slurm", "--dry-run", "--no-db"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "/cluster/gpu: a rank of stage 0 needs")) << bad.err;
  bad = run_planner({"exec", tp2, "--launch", "local", "--dry-run", "--no-db"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "apply to --launch slurm")) << bad.err;
}

TEST(ExecCli, UnderMpirunAWrongWorldSizeIsReportedOnceAndNothingRuns) {
  TempDir dir;
  ParallelConfig p;
  p.tp = 4;
  const std::string path = write_plan(dir, "tp4.json", test_plan(gpt_test_model(), p));
  const CommandResult r = planner::testing::run_command(
      {PLANNER_MPIEXEC, "-n", "2", "--oversubscribe", PLANNER_CLI_PATH, "exec", path, "--launch",
       "none", "--no-db"},
      {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", kMpiEnv[0]});
  EXPECT_NE(r.exit_code, 0);
  const std::string what = "but 2 were started: run it on 4 ranks (-n 4)";
  const auto first = r.err.find(what);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(what, first + 1), std::string::npos) << r.err;
}

}  // namespace
}  // namespace planner::exec
