// Runs whose recording process died: a killed sweep or exec used to stay "running" forever. The
// run records its process (host, pid, start time); when that process is gone the run reads as
// interrupted, mark_interrupted_runs() records it, and a process that takes over (a launcher
// whose rank 0 died) can still end it.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "planner/core/process.hpp"
#include "store_test_support.hpp"

namespace planner::store {
namespace {

using testing::take;

class InterruptedRuns : public ::testing::Test {
 protected:
  // A run created by a child process that then exits without ending it (as a killed `planner
  // sweep` leaves one).
  RunId run_of_a_dead_process() {
    const pid_t child = ::fork();
    if (child == 0) {
      auto db = Database::open(path_);
      if (!db) ::_exit(2);
      auto id = create_run(*db, {.kind = RunKind::kSweep, .label = "killed"});
      ::_exit(id ? static_cast<int>(id->value) : 3);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status));
    last_child_ = child;
    return RunId{WEXITSTATUS(status)};
  }

  // Sets a column of a run directly.
  void set(RunId id, const std::string& assignment) {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
    const std::string sql =
        "UPDATE runs SET " + assignment + " WHERE id = " + std::to_string(id.value);
    EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }

  planner::testing::TempDir dir_;
  std::string path_ = dir_.file("planner.db");
  pid_t last_child_ = 0;
};

TEST_F(InterruptedRuns, ARunRecordsItsProcess) {
  Database db = take(Database::open(path_));
  const RunId id = take(create_run(db, {.kind = RunKind::kSimulate}));
  const RunRecord run = take(get_run(db, id));
  EXPECT_EQ(run.status, RunStatus::kRunning);  // this process is alive
  EXPECT_EQ(run.owner_host, host_name());
  EXPECT_EQ(run.owner_pid, static_cast<std::int64_t>(::getpid()));
}

TEST_F(InterruptedRuns, ARunWhoseProcessDiedReadsAsInterrupted) {
  const RunId id = run_of_a_dead_process();
  ASSERT_GT(id.value, 0);
  Database db = take(Database::open(path_));
  const RunRecord run = take(get_run(db, id));
  EXPECT_EQ(run.status, RunStatus::kInterrupted);
  EXPECT_EQ(run.failure_reason, "the process that recorded it (pid " + std::to_string(last_child_) +
                                    " on " + host_name() + ") ended without finishing it");
  // Listed as interrupted, and found by that status, not by "running".
  const auto all = take(list_runs(db));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].status, RunStatus::kInterrupted);
  EXPECT_EQ(take(list_runs(db, {.status = RunStatus::kInterrupted})).size(), 1u);
  EXPECT_TRUE(take(list_runs(db, {.status = RunStatus::kRunning})).empty());
}

TEST_F(InterruptedRuns, MarkingRecordsTheStatusOnce) {
  const RunId dead = run_of_a_dead_process();
  Database db = take(Database::open(path_));
  const RunId alive = take(create_run(db, {.kind = RunKind::kExec}));
  EXPECT_EQ(take(mark_interrupted_runs(db)), std::vector<RunId>{dead});
  EXPECT_TRUE(take(mark_interrupted_runs(db)).empty());  // already marked
  EXPECT_EQ(take(get_run(db, dead)).status, RunStatus::kInterrupted);
  EXPECT_EQ(take(get_run(db, alive)).status, RunStatus::kRunning);
  // Recorded, it can no longer be ended.
  const Status again = finish_run(db, dead);
  EXPECT_EQ(again.code(), StatusCode::kInvalidInput);
  EXPECT_NE(again.message().find("already ended (interrupted)"), std::string::npos);
  PLANNER_EXPECT_OK(db.integrity_check());
}

TEST_F(InterruptedRuns, AnotherProcessMayStillEndARunWhoseProcessDied) {
  // `planner exec --launch local` records the run on rank 0; when rank 0 dies the launcher marks
  // it failed with the reason.
  const RunId id = run_of_a_dead_process();
  Database db = take(Database::open(path_));
  PLANNER_EXPECT_OK(fail_run(db, id, "rank 0 died"));
  const RunRecord run = take(get_run(db, id));
  EXPECT_EQ(run.status, RunStatus::kFailed);
  EXPECT_EQ(run.failure_reason, "rank 0 died");
}

TEST_F(InterruptedRuns, AReusedPidIsNotMistakenForTheRun) {
  Database db = take(Database::open(path_));
  const RunId id = take(create_run(db, {.kind = RunKind::kSweep}));
  // This process's pid, but a start token of another process: the recorder is gone.
  set(id, "owner_start = 'another-boot/42'");
  EXPECT_EQ(take(get_run(db, id)).status, RunStatus::kInterrupted);
}

TEST_F(InterruptedRuns, ProcessesOnOtherHostsAreNotJudged) {
  const RunId id = run_of_a_dead_process();
  set(id, "owner_host = 'some-other-host'");
  Database db = take(Database::open(path_));
  EXPECT_EQ(take(get_run(db, id)).status, RunStatus::kRunning);
  EXPECT_TRUE(take(mark_interrupted_runs(db)).empty());
}

}  // namespace
}  // namespace planner::store
