// Failure is normal: a rank of a `planner exec --launch local` run that dies (SIGKILL) or hangs
// (SIGSTOP) mid-run is noticed by the others within the bounded waits, the job exits non-zero, the
// run is marked failed in the database with the reason and the rank, the steps completed before
// are kept, and no process of the job is left behind.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <regex>

#include "exec_test_plans.hpp"
#include "planner/core/loaders.hpp"
#include "planner/store/store.hpp"
#include "process_tree.hpp"
#include "support/command.hpp"

namespace planner::exec {
namespace {

using planner::testing::Background;
using planner::testing::TempDir;
using testing::gpt_test_model;
using testing::par;
using testing::test_plan;

// As exec_cli_test: Open MPI's shared memory without cross-memory attach.
const std::vector<std::string> kMpiEnv = {"OMPI_MCA_btl_vader_single_copy_mechanism=none"};

// The bound of every wait in these runs (--timeout): rank 0 waits at most 3 x this for a report.
constexpr int kTimeoutSeconds = 1;

// Steps completed before the fault is injected.
constexpr int kStepsBefore = 3;

// The largest step number in the progress lines ("step 12/100000  loss ...").
int last_step(const std::string& err) {
  static const std::regex line("step ([0-9]+)/[0-9]+  loss");
  int last = 0;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator();
       ++it) {
    last = std::max(last, std::stoi((*it)[1]));
  }
  return last;
}

struct Outcome {
  int exit_code = -1;
  std::string err;
  store::RunRecord run;
  std::vector<store::StepMeasurement> steps;
  double seconds_to_exit = 0;
};

// Runs a 2-rank data-parallel plan for (practically) ever with --timeout `timeout_s`, applies
// `fault` to rank `victim` once a few steps completed, and returns what the run left behind.
Outcome run_with_fault(int signal, int victim, int timeout_s = kTimeoutSeconds) {
  TempDir dir;
  const std::string plan_path = dir.file("dp2.json");
  planner::testing::write_file(plan_path, to_json_text(test_plan(gpt_test_model(), par(1, 1, 2))));
  const std::string db_path = dir.file("runs.db");
  Outcome o;
  std::vector<pid_t> job;
  {
    Background run(
        {PLANNER_CLI_PATH, "exec", plan_path, "--launch", "local", "-n", "2", "--steps", "1000000",
         "--warmup", "1", "--timeout", std::to_string(timeout_s), "--db", db_path},
        kMpiEnv, dir.path());
    EXPECT_TRUE(
        run.wait_for_err([](const std::string& err) { return last_step(err) >= kStepsBefore; },
                         std::chrono::seconds(60)))
        << run.err();
    const std::optional<pid_t> target = run.rank_pid(victim);
    EXPECT_TRUE(target.has_value()) << "rank " << victim << " not found";
    job = run.descendants();
    if (target) ::kill(*target, signal);
    const auto t0 = std::chrono::steady_clock::now();
    const std::optional<int> code = run.wait(std::chrono::seconds(60));
    o.seconds_to_exit =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(code.has_value()) << "the job did not end\n" << run.err();
    o.exit_code = code.value_or(-1);
    o.err = run.err();
    // Every process of the job ended with it (the stopped rank included).
    for (pid_t p : job) {
      EXPECT_TRUE(planner::testing::wait_until([&] { return !planner::testing::process_alive(p); },
                                               std::chrono::milliseconds(5000)))
          << "process " << p << " outlived the job";
    }
  }
  auto db = store::Database::open(db_path, {store::OpenMode::kMustExist});
  EXPECT_TRUE(db) << db.status().message();
  if (!db) return o;
  auto run = store::get_run(*db, store::RunId{1});
  EXPECT_TRUE(run) << run.status().message();
  if (run) o.run = *run;
  auto steps = store::get_measured_steps(*db, store::RunId{1});
  EXPECT_TRUE(steps);
  if (steps) o.steps = *steps;
  return o;
}

// `recorder_killed`: rank 0 itself was killed, possibly between recording a step and printing it.
void expect_kept_steps(const Outcome& o, bool recorder_killed = false) {
  // The steps reported before the fault are in the database, in order, with their losses.
  ASSERT_GE(static_cast<int>(o.steps.size()), kStepsBefore);
  for (std::size_t i = 0; i < o.steps.size(); ++i) {
    EXPECT_EQ(o.steps[i].step, static_cast<std::int64_t>(i));
    EXPECT_TRUE(o.steps[i].loss.has_value());
  }
  const int printed = last_step(o.err);
  if (recorder_killed) {
    EXPECT_GE(static_cast<int>(o.steps.size()), printed) << o.err;
    EXPECT_LE(static_cast<int>(o.steps.size()), printed + 1) << o.err;
  } else {
    EXPECT_EQ(static_cast<int>(o.steps.size()), printed) << o.err;
  }
}

TEST(ExecFailure, AKilledRankFailsTheRunNamingItAndKeepsTheFinishedSteps) {
  const Outcome o = run_with_fault(SIGKILL, 1);
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_EQ(o.run.status, store::RunStatus::kFailed);
  ASSERT_TRUE(o.run.failed_rank.has_value()) << o.run.failure_reason;
  EXPECT_EQ(*o.run.failed_rank, 1);
  EXPECT_NE(o.run.failure_reason.find("rank 1 did not report step"), std::string::npos)
      << o.run.failure_reason;
  EXPECT_NE(o.err.find("error: rank 1 did not report step"), std::string::npos) << o.err;
  // Noticed within the bounded waits: a timeout for the op, 3 x timeout for the report.
  EXPECT_LT(o.seconds_to_exit, 4 * kTimeoutSeconds + 10);
  expect_kept_steps(o);
}

TEST(ExecFailure, AHungRankIsNoticedWithinTheTimeoutAndTheJobEnds) {
  const Outcome o = run_with_fault(SIGSTOP, 1);
  EXPECT_NE(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.run.status, store::RunStatus::kFailed);
  ASSERT_TRUE(o.run.failed_rank.has_value()) << o.run.failure_reason;
  EXPECT_EQ(*o.run.failed_rank, 1);
  EXPECT_NE(o.run.failure_reason.find("(stopped, hung or dead"), std::string::npos)
      << o.run.failure_reason;
  EXPECT_LT(o.seconds_to_exit, 4 * kTimeoutSeconds + 10);
  expect_kept_steps(o);
}

TEST(ExecFailure, WhenRankZeroDiesTheLauncherMarksTheRunFailed) {
  const Outcome o = run_with_fault(SIGKILL, 0);
  EXPECT_NE(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.run.status, store::RunStatus::kFailed) << o.err;
  EXPECT_NE(o.run.failure_reason.find("before rank 0 reported the outcome: rank 0 died"),
            std::string::npos)
      << o.run.failure_reason;
  EXPECT_LT(o.seconds_to_exit, 4 * kTimeoutSeconds + 10);
  expect_kept_steps(o, true);
}

// The bound the user gives holds: a dead or stopped rank fails the job within about --timeout
// (the wait that runs into it), not a multiple of it. Rank 0 sees that a silent rank's process
// on its host is gone or stopped and stops waiting for its report; a rank waiting for rank 0
// does the same. (It took 4 x --timeout, about 60 s at --timeout 15.)
constexpr int kBoundTimeoutSeconds = 6;
constexpr double kBoundSlackSeconds = 3;

TEST(ExecFailure, AKilledRankFailsTheJobWithinTheTimeout) {
  const Outcome o = run_with_fault(SIGKILL, 1, kBoundTimeoutSeconds);
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_EQ(o.run.status, store::RunStatus::kFailed);
  EXPECT_NE(o.run.failure_reason.find("rank 1 did not report step"), std::string::npos);
  EXPECT_NE(o.run.failure_reason.find("rank 1's process (pid "), std::string::npos)
      << o.run.failure_reason;
  EXPECT_NE(o.run.failure_reason.find(") is gone"), std::string::npos) << o.run.failure_reason;
  EXPECT_LT(o.seconds_to_exit, kBoundTimeoutSeconds + kBoundSlackSeconds) << o.err;
  expect_kept_steps(o);
}

TEST(ExecFailure, AStoppedRankFailsTheJobWithinTheTimeout) {
  const Outcome o = run_with_fault(SIGSTOP, 1, kBoundTimeoutSeconds);
  EXPECT_NE(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.run.status, store::RunStatus::kFailed);
  EXPECT_NE(o.run.failure_reason.find(") is stopped"), std::string::npos) << o.run.failure_reason;
  EXPECT_LT(o.seconds_to_exit, kBoundTimeoutSeconds + kBoundSlackSeconds) << o.err;
  expect_kept_steps(o);
}

TEST(ExecFailure, AKilledRankZeroEndsTheJobWithinTheTimeout) {
  const Outcome o = run_with_fault(SIGKILL, 0, kBoundTimeoutSeconds);
  EXPECT_NE(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.run.status, store::RunStatus::kFailed) << o.err;
  EXPECT_LT(o.seconds_to_exit, kBoundTimeoutSeconds + kBoundSlackSeconds) << o.err;
  expect_kept_steps(o, true);
}

// A job killed outright (launcher, mpirun and ranks, as kill -9 or a lost node does) cannot mark
// its run: the run used to stay "running" forever. Its recording process (rank 0) is gone, so the
// run reads as interrupted, and `planner db repair` records that.
TEST(ExecFailure, AJobKilledOutrightLeavesItsRunInterrupted) {
  TempDir dir;
  const std::string plan_path = dir.file("dp2.json");
  planner::testing::write_file(plan_path, to_json_text(test_plan(gpt_test_model(), par(1, 1, 2))));
  const std::string db_path = dir.file("runs.db");
  {
    Background run({PLANNER_CLI_PATH, "exec", plan_path, "--launch", "local", "-n", "2", "--steps",
                    "1000000", "--warmup", "1", "--db", db_path},
                   kMpiEnv, dir.path());
    ASSERT_TRUE(run.wait_for_err([](const std::string& err) { return last_step(err) >= 2; },
                                 std::chrono::seconds(60)))
        << run.err();
    const std::vector<pid_t> job = run.descendants();
    run.kill_all();
    for (pid_t p : job) {
      EXPECT_TRUE(planner::testing::wait_until([&] { return !planner::testing::process_alive(p); },
                                               std::chrono::milliseconds(5000)));
    }
  }
  {
    auto db = store::Database::open(db_path, {store::OpenMode::kMustExist});
    ASSERT_TRUE(db) << db.status().message();
    const auto run = store::get_run(*db, store::RunId{1});
    ASSERT_TRUE(run) << run.status().message();
    EXPECT_EQ(run->status, store::RunStatus::kInterrupted);
    EXPECT_NE(run->failure_reason.find("ended without finishing it"), std::string::npos);
  }
  const auto list = planner::testing::run_planner({"db", "list", "--db", db_path});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("interrupted"), std::string::npos) << list.out;
  const auto repair = planner::testing::run_planner({"db", "repair", "--db", db_path});
  EXPECT_EQ(repair.exit_code, 0) << repair.err;
  EXPECT_NE(repair.out.find("marked 1 run interrupted"), std::string::npos) << repair.out;
  EXPECT_NE(repair.out.find("integrity check ok"), std::string::npos) << repair.out;
  const auto again = planner::testing::run_planner({"db", "repair", "--db", db_path});
  EXPECT_EQ(again.out.find("marked"), std::string::npos) << again.out;
}

}  // namespace
}  // namespace planner::exec
