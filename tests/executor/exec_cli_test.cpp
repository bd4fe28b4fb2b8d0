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
  for (const store::MetricRecord& m : *metrics) {
    EXPECT_EQ(m.source, store::MetricSource::kMeasured);
    names.insert(m.metric.name);
  }
  for (const char* name : {"step_time", "tokens_per_s", "loss", "peak_memory", "mfu"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
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

// Without a usable GPU (none visible here, whatever the machine has) the cuda backend refuses with
// exit code 1 before any rank starts, saying that it needs a GPU; a build without CUDA says that
// the backend is not part of it.
TEST(ExecCli, TheCudaBackendSaysThatItNeedsAGpu) {
  TempDir dir;
  const std::string path = write_plan(dir, "one.json", test_plan(gpt_test_model(), par(1, 1, 1)));
  std::vector<std::string> env = kMpiEnv;
  env.push_back("CUDA_VISIBLE_DEVICES=");
  const auto t0 = std::chrono::steady_clock::now();
  const CommandResult r = planner::testing::run_command(
      {PLANNER_CLI_PATH, "exec", path, "--backend", "cuda", "--no-db"}, env);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_TRUE(contains(r.err, "needs an NVIDIA GPU") ||
              contains(r.err, "cuda backend is not part of this build"))
      << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
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
