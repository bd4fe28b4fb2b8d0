// The database under several processes: bulk inserts, concurrent writers, a writer killed
// mid-write.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "store_test_support.hpp"

namespace planner::store {
namespace {

using testing::take;

constexpr int kOpsPerTransaction = 2000;

// Forks a child that runs `body` and exits with its return value (never returning into GoogleTest).
template <class Body>
pid_t fork_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  return pid;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// One run with `ops` predicted ops, created and finished in one transaction.
Status write_whole_run(Database& db, const std::string& label, const PlanId plan,
                       const std::vector<OpPrediction>& ops) {
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, db.write());
  PLANNER_ASSIGN_OR_RETURN(RunId run, create_run(db, {.kind = RunKind::kSweep, .label = label}));
  PLANNER_RETURN_IF_ERROR(add_predicted_ops(db, run, plan, ops));
  PLANNER_RETURN_IF_ERROR(finish_run(db, run));
  return tx.commit();
}

TEST(StoreProcess, BulkInsertOfAHundredThousandOps) {
  planner::testing::TempDir dir;
  Database db = take(Database::open(dir.file("planner.db")));
  const RunId run = take(create_run(db, {.kind = RunKind::kSimulate}));
  const PlanId plan = take(put_plan_text(db, testing::plan_text(8), "tp8"));
  const std::vector<OpPrediction> ops = testing::sample_predictions(100, 1000);
  const auto start = std::chrono::steady_clock::now();
  PLANNER_ASSERT_OK(add_predicted_ops(db, run, plan, ops));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("insert_1e5_ops_ms", std::to_string(ms));  // speed is checked in bench/
  EXPECT_EQ(take(count_rows(db, run)).predicted_ops, 100000);
  const auto back = take(get_predicted_ops(db, run, plan));
  ASSERT_EQ(back.size(), 100000u);
  EXPECT_EQ(back.back().rank, 99);
  EXPECT_EQ(back.back().op_id, "op999");
  PLANNER_EXPECT_OK(db.integrity_check());
}

TEST(StoreProcess, TwoProcessesWritingAtOnceBothLand) {
  planner::testing::TempDir dir;
  const std::string path = dir.file("planner.db");  // created by whichever child comes first
  constexpr int kRunsPerWriter = 15;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> children;
  for (int writer = 0; writer < 2; ++writer) {
    children.push_back(fork_child([&, writer] {
      ::close(go[1]);
      char byte = 0;
      if (::read(go[0], &byte, 1) != 1) return 10;
      auto db = Database::open(path);
      if (!db) {
        std::fprintf(stderr, "writer %d: %s\n", writer, db.status().message().c_str());
        return 11;
      }
      // Both writers store the same plan: it must end up stored once.
      auto plan = put_plan_text(*db, testing::plan_text(2), "shared");
      if (!plan) return 12;
      const std::vector<OpPrediction> ops = testing::sample_predictions(2, 250);
      for (int i = 0; i < kRunsPerWriter; ++i) {
        const std::string label = "writer" + std::to_string(writer) + "-" + std::to_string(i);
        if (!write_whole_run(*db, label, *plan, ops).is_ok()) return 13;
      }
      return 0;
    }));
  }
  ::close(go[0]);
  ASSERT_EQ(::write(go[1], "gg", 2), 2);  // start both at once
  ::close(go[1]);
  for (pid_t child : children) {
    EXPECT_EQ(wait_exit_code(child), 0);
  }

  Database db = take(Database::open(path));
  PLANNER_EXPECT_OK(db.integrity_check());
  const auto runs = take(list_runs(db));
  ASSERT_EQ(runs.size(), 2u * kRunsPerWriter);
  std::map<std::string, int> per_writer;
  PlanId shared;
  for (const RunRecord& r : runs) {
    EXPECT_EQ(r.status, RunStatus::kOk);
    per_writer[r.label.substr(0, 7)]++;
    const auto plans = take(run_plans(db, r.id));
    ASSERT_EQ(plans.size(), 1u);
    if (shared.value == 0) shared = plans[0].id;
    EXPECT_EQ(plans[0].id, shared) << "the shared plan was stored twice";
    EXPECT_EQ(take(count_rows(db, r.id)).predicted_ops, 500);
  }
  EXPECT_EQ(per_writer["writer0"], kRunsPerWriter);
  EXPECT_EQ(per_writer["writer1"], kRunsPerWriter);
}

// Creates the database at `path` with one plan in it.
PlanId seed_plan(const std::string& path) {
  Database db = take(Database::open(path));
  return take(put_plan_text(db, testing::plan_text(4), "tp4"));
}

// Checks that every run in the database is whole (finished, with all its ops) and returns how many
// there are.
int whole_runs(const std::string& path, int ops_per_run) {
  Database db = take(Database::open(path));
  EXPECT_TRUE(db.integrity_check().is_ok());
  const auto runs = take(list_runs(db));
  for (const RunRecord& r : runs) {
    EXPECT_EQ(r.status, RunStatus::kOk) << "run " << r.id.value << " is half-written";
    EXPECT_EQ(take(count_rows(db, r.id)).predicted_ops, ops_per_run)
        << "run " << r.id.value << " has part of a transaction";
  }
  return static_cast<int>(runs.size());
}

TEST(StoreProcess, AWriterKilledMidWriteLeavesOnlyWholeTransactions) {
  planner::testing::TempDir dir;
  const std::string path = dir.file("planner.db");
  const PlanId plan = seed_plan(path);
  const std::vector<OpPrediction> ops = testing::sample_predictions(4, kOpsPerTransaction / 4);
  int committed = 0;
  // The child reports 'b' once inside a transaction and 'c' after each commit. Kill it a few
  // commits in, at different moments after it began the next transaction.
  for (const int delay_us : {0, 300, 1500, 5000}) {
    int progress[2];
    ASSERT_EQ(::pipe(progress), 0);
    const pid_t child = fork_child([&] {
      ::close(progress[0]);
      auto db = Database::open(path);
      if (!db) return 11;
      for (int i = 0;; ++i) {
        auto tx = db->write();
        if (!tx || ::write(progress[1], "b", 1) != 1) return 12;
        if (!write_whole_run(*db, "killed-" + std::to_string(i), plan, ops).is_ok()) return 13;
        if (!tx->commit().is_ok() || ::write(progress[1], "c", 1) != 1) return 14;
      }
    });
    ::close(progress[1]);
    char byte = 0;
    int commits_now = 0;
    while (commits_now < 3) {
      ASSERT_EQ(::read(progress[0], &byte, 1), 1) << "the writer stopped early";
      if (byte == 'c') ++commits_now;
    }
    do {
      ASSERT_EQ(::read(progress[0], &byte, 1), 1);
    } while (byte != 'b');
    if (delay_us > 0) ::usleep(static_cast<useconds_t>(delay_us));
    ::kill(child, SIGKILL);
    EXPECT_EQ(wait_exit_code(child), 128 + SIGKILL);
    while (::read(progress[0], &byte, 1) == 1) {
      if (byte == 'c') ++commits_now;  // commits reported before the kill landed
    }
    ::close(progress[0]);
    committed += commits_now;

    const int runs = whole_runs(path, kOpsPerTransaction);
    // Every reported commit is there; at most one more (committed, killed before reporting it).
    EXPECT_GE(runs, committed);
    EXPECT_LE(runs, committed + 1);
    committed = runs;
  }
}

TEST(StoreProcess, AWriterKilledWithUncommittedPagesInTheLogLosesOnlyThem) {
  planner::testing::TempDir dir;
  const std::string path = dir.file("planner.db");
  const PlanId plan = seed_plan(path);
  {
    Database db = take(Database::open(path));
    const RunId kept = take(create_run(db, {.label = "kept"}));
    PLANNER_ASSERT_OK(add_predicted_ops(db, kept, plan, testing::sample_predictions(1, 10)));
    PLANNER_ASSERT_OK(finish_run(db, kept));
  }
  // A transaction larger than the page cache (1 MiB here) spills its pages into the write-ahead
  // log before it commits.
  const std::vector<OpPrediction> big = testing::sample_predictions(100, 1000);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = fork_child([&] {
    ::close(ready[0]);
    OpenOptions small_cache;
    small_cache.page_cache_KiB = 1024;
    auto db = Database::open(path, small_cache);
    if (!db) return 11;
    auto tx = db->write();
    if (!tx) return 12;
    auto run = create_run(*db, {.label = "never committed"});
    if (!run || !add_predicted_ops(*db, *run, plan, big).is_ok()) return 13;
    if (::write(ready[1], "w", 1) != 1) return 14;
    ::pause();  // holds the open transaction until killed
    return 15;
  });
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  std::error_code ec;
  const auto wal_bytes = std::filesystem::file_size(path + "-wal", ec);
  EXPECT_GT(wal_bytes, 1u << 20) << "the uncommitted transaction did not reach the log";
  ::kill(child, SIGKILL);
  EXPECT_EQ(wait_exit_code(child), 128 + SIGKILL);

  EXPECT_EQ(whole_runs(path, 10), 1);
  Database db = take(Database::open(path));
  EXPECT_EQ(take(list_runs(db))[0].label, "kept");
}

}  // namespace
}  // namespace planner::store
