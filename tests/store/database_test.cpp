// Opening, creating, migrating and refusing database files; transactions.
#include <sqlite3.h>

#include <filesystem>

#include "store_test_support.hpp"

namespace planner::store {
namespace {

using testing::take;

// Direct SQLite access, to build files the store must migrate or refuse.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("cannot open");
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = err != nullptr ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(message + " in: " + sql);
    }
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      throw std::runtime_error(sqlite3_errmsg(db_));
    }
    std::string out;
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

// The schema of version 1 exactly as it shipped (a copy, so that later edits of the migrations
// cannot silently change what this test migrates from).
constexpr const char* kVersion1Schema = R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('sweep', 'simulate', 'exec', 'calibrate', 'accuracy')),
  status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed')),
  label TEXT NOT NULL DEFAULT '', inputs_json TEXT NOT NULL DEFAULT '{}',
  planner_version TEXT NOT NULL, git_commit TEXT NOT NULL, created_unix_ms INTEGER NOT NULL,
  finished_unix_ms INTEGER, failure_reason TEXT, failed_rank INTEGER);
CREATE INDEX runs_by_kind ON runs (kind, id);
CREATE TABLE run_hosts (run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  position INTEGER NOT NULL, host TEXT NOT NULL, PRIMARY KEY (run_id, position)) WITHOUT ROWID;
CREATE TABLE plans (id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE,
  label TEXT NOT NULL DEFAULT '', canonical_json TEXT NOT NULL, created_unix_ms INTEGER NOT NULL);
CREATE TABLE run_plans (run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  plan_id INTEGER NOT NULL REFERENCES plans (id), PRIMARY KEY (run_id, plan_id)) WITHOUT ROWID;
CREATE INDEX run_plans_by_plan ON run_plans (plan_id);
CREATE TABLE metrics (run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  plan_id INTEGER NOT NULL REFERENCES plans (id),
  source TEXT NOT NULL CHECK (source IN ('analytic', 'simulated', 'measured')),
  name TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,
  PRIMARY KEY (run_id, plan_id, source, name)) WITHOUT ROWID;
CREATE TABLE predicted_ops (run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  plan_id INTEGER NOT NULL REFERENCES plans (id), rank INTEGER NOT NULL, op_id TEXT NOT NULL,
  op_kind TEXT NOT NULL, micro_batch INTEGER, start_ps INTEGER NOT NULL,
  duration_ps INTEGER NOT NULL, bytes INTEGER NOT NULL,
  PRIMARY KEY (run_id, plan_id, rank, op_id)) WITHOUT ROWID;
)sql";

class DatabaseTest : public ::testing::Test {
 protected:
  planner::testing::TempDir dir_;
  std::string path_ = dir_.file("planner.db");
};

TEST_F(DatabaseTest, CreatesACurrentWalDatabase) {
  {
    Database db = take(Database::open(path_));
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    EXPECT_EQ(db.path(), path_);
    PLANNER_EXPECT_OK(db.integrity_check());
  }
  RawDb raw(path_);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.text("PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(raw.text("PRAGMA application_id"), std::to_string(0x504C4E52));
  for (const char* table :
       {"runs", "run_hosts", "plans", "run_plans", "metrics", "predicted_ops", "measured_steps",
        "measured_ops", "hardware_profiles", "calibration_samples", "sweep_results"}) {
    EXPECT_EQ(raw.text(std::string("SELECT name FROM sqlite_schema WHERE name = '") + table + "'"),
              table);
  }
}

TEST_F(DatabaseTest, ReopensWithItsData) {
  RunId id;
  {
    Database db = take(Database::open(path_));
    id = take(create_run(
        db, {.kind = RunKind::kSweep, .label = "first", .inputs_json = "{}", .hosts = {"h0"}}));
  }
  OpenOptions existing;
  existing.mode = OpenMode::kMustExist;
  Database db = take(Database::open(path_, existing));
  EXPECT_EQ(take(get_run(db, id)).label, "first");
}

TEST_F(DatabaseTest, MigratesAVersion1DatabaseForward) {
  {
    RawDb raw(path_);
    raw.exec("PRAGMA journal_mode = WAL");
    raw.exec(kVersion1Schema);
    raw.exec(
        "INSERT INTO runs (id, kind, status, label, planner_version, git_commit, "
        "created_unix_ms) VALUES (7, 'simulate', 'ok', 'old run', '0.0.9', 'abc', 1700000000000)");
    raw.exec("INSERT INTO run_hosts VALUES (7, 0, 'oldhost')");
    raw.exec("INSERT INTO plans VALUES (3, 'deadbeef', 'old plan', '{\"tp\":2}', 1700000000000)");
    raw.exec("INSERT INTO run_plans VALUES (7, 3)");
    raw.exec("INSERT INTO metrics VALUES (7, 3, 'simulated', 'step_time', 1.5, 's')");
    raw.exec("INSERT INTO predicted_ops VALUES (7, 3, 0, 'op0', 'gemm', NULL, 0, 1000, 64)");
    raw.exec("PRAGMA application_id = " + std::to_string(0x504C4E52));
    raw.exec("PRAGMA user_version = 1");
  }
  {
    Database db = take(Database::open(path_));
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    const RunRecord run = take(get_run(db, RunId{7}));
    EXPECT_EQ(run.label, "old run");
    EXPECT_EQ(run.planner_version, "0.0.9");
    EXPECT_EQ(run.hosts, std::vector<std::string>{"oldhost"});
    EXPECT_EQ(run.plan_count, 1);
    const auto metrics = take(get_metrics(db, RunId{7}));
    ASSERT_EQ(metrics.size(), 1u);
    EXPECT_EQ(metrics[0].metric.value, 1.5);
    EXPECT_EQ(take(get_predicted_ops(db, RunId{7}, PlanId{3})).size(), 1u);
    // Tables of versions 2 and 3 exist and work.
    const OpMeasurement m{.rank = 0,
                          .step = 1,
                          .op_id = "op0",
                          .op_kind = "gemm",
                          .phase = "forward",
                          .wall = microseconds(2.0)};
    PLANNER_EXPECT_OK(add_measured_ops(db, RunId{7}, std::span(&m, 1)));
    PLANNER_EXPECT_OK(put_profile(db, {.name = "cpu", .parameters_json = "{}"}, {}).status());
    PLANNER_EXPECT_OK(db.integrity_check());
  }
  RawDb raw(path_);
  EXPECT_EQ(raw.text("PRAGMA user_version"), std::to_string(kSchemaVersion));
}

TEST_F(DatabaseTest, MigratingToVersion4KeepsRunIdsUniqueAndTheirRows) {
  {
    RawDb raw(path_);
    raw.exec("PRAGMA journal_mode = WAL");
    raw.exec(kVersion1Schema);
    for (int id : {5, 9}) {
      raw.exec(
          "INSERT INTO runs (id, kind, status, label, planner_version, git_commit, "
          "created_unix_ms) VALUES (" +
          std::to_string(id) + ", 'sweep', 'running', 'old', '0.0.9', 'abc', 1)");
      raw.exec("INSERT INTO run_hosts VALUES (" + std::to_string(id) + ", 0, 'oldhost')");
    }
    raw.exec("DELETE FROM runs WHERE id = 9");  // id 9 was used once: it must never come back
    raw.exec("DELETE FROM run_hosts WHERE run_id = 9");
    raw.exec("PRAGMA application_id = " + std::to_string(0x504C4E52));
    raw.exec("PRAGMA user_version = 1");
  }
  Database db = take(Database::open(path_));
  // Rebuilt with its rows, and the rows referring to them kept (dropping the old table did not
  // cascade); a run of an old build, whose process is unknown, stays as recorded.
  const RunRecord old = take(get_run(db, RunId{5}));
  EXPECT_EQ(old.status, RunStatus::kRunning);
  EXPECT_EQ(old.hosts, std::vector<std::string>{"oldhost"});
  EXPECT_FALSE(old.owner_pid.has_value());
  EXPECT_EQ(take(create_run(db, {.kind = RunKind::kSweep})).value, 10);
  PLANNER_EXPECT_OK(db.integrity_check());
}

TEST_F(DatabaseTest, RefusesANewerSchemaWithoutTouchingIt) {
  {
    RawDb raw(path_);
    raw.exec("CREATE TABLE future (x)");
    raw.exec("PRAGMA application_id = " + std::to_string(0x504C4E52));
    raw.exec("PRAGMA user_version = 99");
  }
  auto db = Database::open(path_);
  ASSERT_FALSE(db);
  EXPECT_EQ(db.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(db.status().message(),
            path_ +
                ": database schema version 99 is newer than this build of planner "
                "understands (" +
                std::to_string(kSchemaVersion) + "); use a newer planner to read it");
  RawDb raw(path_);
  EXPECT_EQ(raw.text("PRAGMA user_version"), "99");
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "delete");
}

TEST_F(DatabaseTest, RefusesFilesThatAreNotDatabases) {
  const std::string text_file = dir_.file("notes.txt");
  planner::testing::write_file(text_file, std::string(200, 'x') + "\nnot a database\n");
  std::string garbage(8192, '\0');
  for (std::size_t i = 0; i < garbage.size(); ++i)
    garbage[i] = static_cast<char>((i * 7919 + 13) % 251);
  const std::string binary_file = dir_.file("garbage.bin");
  planner::testing::write_file(binary_file, garbage);
  for (const std::string& file : {text_file, binary_file}) {
    const std::string before = planner::testing::slurp(file);
    auto db = Database::open(file);
    ASSERT_FALSE(db) << file;
    EXPECT_EQ(db.status().code(), StatusCode::kInvalidInput);
    EXPECT_EQ(db.status().message(), file + ": not a SQLite database (file is not a database)");
    EXPECT_EQ(planner::testing::slurp(file), before) << "the file was modified";
  }
}

TEST_F(DatabaseTest, RefusesDatabasesOfOtherApplications) {
  {
    RawDb raw(path_);
    raw.exec("CREATE TABLE contacts (name TEXT)");
  }
  auto tables = Database::open(path_);
  ASSERT_FALSE(tables);
  EXPECT_EQ(tables.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(tables.status().message().find("not a planner database"), std::string::npos)
      << tables.status().message();

  const std::string other = dir_.file("other.db");
  {
    RawDb raw(other);
    raw.exec("PRAGMA application_id = 1234");
    raw.exec("PRAGMA user_version = 1");
  }
  auto foreign = Database::open(other);
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.status().message(),
            other +
                ": a SQLite database of another application (application_id 1234), not a "
                "planner database");
}

TEST_F(DatabaseTest, MissingFilesAndDirectories) {
  OpenOptions existing;
  existing.mode = OpenMode::kMustExist;
  auto missing = Database::open(path_, existing);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(path_)) << "kMustExist created the file";

  auto directory = Database::open(dir_.path());
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidInput);

  // Not a file: a device, a symbolic link loop (bad input, not "disk I/O error").
  auto device = Database::open("/dev/null");
  ASSERT_FALSE(device);
  EXPECT_EQ(device.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(device.status().message(),
            "/dev/null: is a character device, expected a regular file (a planner database file)");
  const std::string loop = dir_.file("loop.db");
  std::filesystem::create_symlink(loop, loop);
  auto looped = Database::open(loop);
  ASSERT_FALSE(looped);
  EXPECT_EQ(looped.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(looped.status().message().find("symbolic link loop"), std::string::npos);

  auto unreachable = Database::open(dir_.file("no/such/dir/planner.db"));
  ASSERT_FALSE(unreachable);
  EXPECT_EQ(unreachable.status().code(), StatusCode::kRuntime);
  EXPECT_NE(unreachable.status().message().find("cannot open"), std::string::npos);
}

TEST_F(DatabaseTest, AnEmptyFileBecomesAPlannerDatabase) {
  planner::testing::write_file(path_, "");
  Database db = take(Database::open(path_));
  EXPECT_EQ(db.schema_version(), kSchemaVersion);
}

TEST_F(DatabaseTest, TransactionsGroupWritesAndRollBackUnlessCommitted) {
  Database db = take(Database::open(path_));
  {
    Transaction tx = take(db.write());
    take(create_run(db, {.label = "rolled back"}));
  }  // not committed
  EXPECT_TRUE(take(list_runs(db)).empty());

  Transaction tx = take(db.write());
  const RunId run = take(create_run(db, {.label = "kept"}));
  const PlanId plan = take(put_plan_text(db, testing::plan_text(2), "p"));
  // A failing store call inside the transaction undoes only its own writes.
  std::vector<OpPrediction> ops = testing::sample_predictions(1, 3);
  ops.push_back(ops.front());  // duplicate op id on rank 0
  const Status dup = add_predicted_ops(db, run, plan, ops);
  EXPECT_EQ(dup.code(), StatusCode::kInvalidInput);
  EXPECT_NE(dup.message().find("predicted op \"op0\" on rank 0"), std::string::npos)
      << dup.message();
  EXPECT_NE(dup.message().find("UNIQUE constraint failed"), std::string::npos) << dup.message();
  PLANNER_ASSERT_OK(tx.commit());
  EXPECT_EQ(take(list_runs(db)).size(), 1u);
  EXPECT_TRUE(take(get_predicted_ops(db, run, plan)).empty());
  EXPECT_EQ(take(count_rows(db, run)).plans, 0) << "the failed call's plan link was undone";
}

TEST_F(DatabaseTest, VacuumKeepsDataAndPassesTheIntegrityCheck) {
  Database db = take(Database::open(path_));
  const RunId run = take(create_run(db, {.label = "v"}));
  const PlanId plan = take(put_plan_text(db, testing::plan_text(1), "p"));
  PLANNER_ASSERT_OK(add_predicted_ops(db, run, plan, testing::sample_predictions(4, 500)));
  PLANNER_EXPECT_OK(db.vacuum());
  PLANNER_EXPECT_OK(db.integrity_check());
  EXPECT_EQ(take(count_rows(db, run)).predicted_ops, 2000);
  Transaction tx = take(db.write());
  EXPECT_EQ(db.vacuum().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace planner::store
