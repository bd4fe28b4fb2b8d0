// The outcome file between rank 0 and the launching process: what rank 0 reported settles the job;
// a job whose rank 0 died without reporting fails, and the run rank 0 had recorded is marked
// failed instead of staying "running".
#include "planner/exec/outcome.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "planner/store/store.hpp"
#include "support/command.hpp"

namespace planner::exec {
namespace {

TEST(OutcomeFile, RankZeroReportsTheRunAndTheExitCode) {
  testing::TempDir dir;
  const std::string path = dir.file("job.outcome");
  const OutcomeFile rank0(path);
  rank0.run(42);
  rank0.exit(2);
  OutcomeFile("").exit(1);  // the other ranks report nothing
  const OutcomeFile::Read read = OutcomeFile::read(path);
  EXPECT_EQ(read.run, 42);
  EXPECT_EQ(read.exit, 2);
  const Status st = settle_outcome(path, "", "mpirun", 0, "rank 0 died");
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_TRUE(st.message().empty());  // rank 0 printed it
  EXPECT_FALSE(std::filesystem::exists(path));
  OutcomeFile(path).exit(0);
  EXPECT_TRUE(settle_outcome(path, "", "mpirun", 0, "rank 0 died").is_ok());
}

TEST(OutcomeFile, AJobWithoutAnOutcomeFailsItsRecordedRun) {
  testing::TempDir dir;
  const std::string db_path = dir.file("planner.db");
  store::RunId id{};
  {
    auto db = store::Database::open(db_path);
    ASSERT_TRUE(db);
    store::NewRun run;
    run.kind = store::RunKind::kExec;
    auto created = store::create_run(*db, run);
    ASSERT_TRUE(created);
    id = *created;
  }
  const std::string path = OutcomeFile::fresh_path("test");
  EXPECT_FALSE(std::filesystem::exists(path));
  OutcomeFile(path).run(id.value);
  const Status st = settle_outcome(path, db_path, "mpirun", 137, "rank 0 died or was killed");
  EXPECT_EQ(st.code(), StatusCode::kRuntime);
  EXPECT_NE(st.message().find("mpirun exit code 137"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("marked failed"), std::string::npos) << st.message();
  auto db = store::Database::open(db_path);
  ASSERT_TRUE(db);
  auto run = store::get_run(*db, id);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, store::RunStatus::kFailed);
  EXPECT_NE(run->failure_reason.find("before rank 0 reported the outcome"), std::string::npos);
  // Without a database the job still fails, saying why.
  OutcomeFile(path).run(id.value);
  EXPECT_EQ(settle_outcome(path, "", "srun", 1, "a rank died").code(), StatusCode::kRuntime);
}

}  // namespace
}  // namespace planner::exec
