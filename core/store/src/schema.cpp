#include "schema.hpp"

#include <iterator>
#include <string>

namespace planner::store::detail {
namespace {

// Version 1: runs, plans and predictions (what sweeps and simulations record). Run (and profile)
// ids are AUTOINCREMENT, never reused, so "run 12" names the same run for the life of the file.
constexpr const char* kRunsAndPredictions = R"sql(
CREATE TABLE runs (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  kind             TEXT NOT NULL CHECK (kind IN ('sweep', 'simulate', 'exec', 'calibrate', 'accuracy')),
  status           TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed')),
  label            TEXT NOT NULL DEFAULT '',
  inputs_json      TEXT NOT NULL DEFAULT '{}',
  planner_version  TEXT NOT NULL,
  git_commit       TEXT NOT NULL,
  created_unix_ms  INTEGER NOT NULL,
  finished_unix_ms INTEGER,
  failure_reason   TEXT,
  failed_rank      INTEGER
);
CREATE INDEX runs_by_kind ON runs (kind, id);

CREATE TABLE run_hosts (
  run_id   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  host     TEXT NOT NULL,
  PRIMARY KEY (run_id, position)
) WITHOUT ROWID;

CREATE TABLE plans (
  id              INTEGER PRIMARY KEY,
  hash            TEXT NOT NULL UNIQUE,
  label           TEXT NOT NULL DEFAULT '',
  canonical_json  TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL
);

CREATE TABLE run_plans (
  run_id  INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  plan_id INTEGER NOT NULL REFERENCES plans (id),
  PRIMARY KEY (run_id, plan_id)
) WITHOUT ROWID;
CREATE INDEX run_plans_by_plan ON run_plans (plan_id);

CREATE TABLE metrics (
  run_id  INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  plan_id INTEGER NOT NULL REFERENCES plans (id),
  source  TEXT NOT NULL CHECK (source IN ('analytic', 'simulated', 'measured')),
  name    TEXT NOT NULL,
  value   REAL NOT NULL,
  unit    TEXT NOT NULL,
  PRIMARY KEY (run_id, plan_id, source, name)
) WITHOUT ROWID;

CREATE TABLE predicted_ops (
  run_id      INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  plan_id     INTEGER NOT NULL REFERENCES plans (id),
  rank        INTEGER NOT NULL,
  op_id       TEXT NOT NULL,
  op_kind     TEXT NOT NULL,
  micro_batch INTEGER,
  start_ps    INTEGER NOT NULL,
  duration_ps INTEGER NOT NULL,
  bytes       INTEGER NOT NULL,
  PRIMARY KEY (run_id, plan_id, rank, op_id)
) WITHOUT ROWID;
)sql";

// Version 2: measurements of executed runs (issue 7's executor).
constexpr const char* kMeasurements = R"sql(
CREATE TABLE measured_steps (
  run_id            INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step              INTEGER NOT NULL,
  step_time_ps      INTEGER NOT NULL,
  tokens_per_s      REAL NOT NULL,
  loss              REAL,
  peak_memory_bytes INTEGER,
  warmup            INTEGER NOT NULL CHECK (warmup IN (0, 1)),
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

CREATE TABLE measured_ops (
  run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  rank       INTEGER NOT NULL,
  step       INTEGER NOT NULL,
  op_id      TEXT NOT NULL,
  op_kind    TEXT NOT NULL,
  phase      TEXT NOT NULL,
  start_ps   INTEGER,
  wall_ps    INTEGER NOT NULL,
  bytes      INTEGER NOT NULL,
  algbw_GBps REAL,
  busbw_GBps REAL,
  PRIMARY KEY (run_id, rank, step, op_id)
) WITHOUT ROWID;
)sql";

// Version 3: hardware profiles with their calibration samples (issue 9) and sweep rankings
// (issue 6).
constexpr const char* kProfilesAndSweeps = R"sql(
CREATE TABLE hardware_profiles (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  name            TEXT NOT NULL UNIQUE,
  description     TEXT NOT NULL,
  parameters_json TEXT NOT NULL,
  provenance      TEXT NOT NULL,
  run_id          INTEGER REFERENCES runs (id) ON DELETE SET NULL,
  created_unix_ms INTEGER NOT NULL
);
CREATE INDEX hardware_profiles_by_run ON hardware_profiles (run_id);

CREATE TABLE calibration_samples (
  profile_id INTEGER NOT NULL REFERENCES hardware_profiles (id) ON DELETE CASCADE,
  seq        INTEGER NOT NULL,
  benchmark  TEXT NOT NULL,
  shape      TEXT NOT NULL,
  precision  TEXT NOT NULL,
  bytes      INTEGER NOT NULL,
  group_size INTEGER NOT NULL,
  iterations INTEGER NOT NULL,
  time_ps    INTEGER NOT NULL,
  algbw_GBps REAL,
  busbw_GBps REAL,
  tflops     REAL,
  PRIMARY KEY (profile_id, seq)
) WITHOUT ROWID;

CREATE TABLE sweep_results (
  run_id    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  plan_id   INTEGER NOT NULL REFERENCES plans (id),
  position  INTEGER NOT NULL,
  tier      TEXT NOT NULL CHECK (tier IN ('analytic', 'simulated', 'measured')),
  objective REAL NOT NULL,
  note      TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, plan_id)
) WITHOUT ROWID;
CREATE INDEX sweep_results_by_position ON sweep_results (run_id, position);
)sql";

// Version 4: the process that records a run (host, pid and a start token telling a reused pid
// apart), so a run whose process died without ending it can be told from one still running, and
// the status 'interrupted' for such runs. SQLite cannot change a CHECK constraint in place: the
// table is rebuilt (SQLite's documented procedure, with foreign keys off during migrations), its
// ids and AUTOINCREMENT sequence kept so run ids stay unique for the life of the file.
constexpr const char* kRunOwners = R"sql(
CREATE TABLE runs_v4 (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  kind             TEXT NOT NULL CHECK (kind IN ('sweep', 'simulate', 'exec', 'calibrate', 'accuracy')),
  status           TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'interrupted')),
  label            TEXT NOT NULL DEFAULT '',
  inputs_json      TEXT NOT NULL DEFAULT '{}',
  planner_version  TEXT NOT NULL,
  git_commit       TEXT NOT NULL,
  created_unix_ms  INTEGER NOT NULL,
  finished_unix_ms INTEGER,
  failure_reason   TEXT,
  failed_rank      INTEGER,
  owner_host       TEXT,
  owner_pid        INTEGER,
  owner_start      TEXT
);
INSERT INTO runs_v4 (id, kind, status, label, inputs_json, planner_version, git_commit,
                     created_unix_ms, finished_unix_ms, failure_reason, failed_rank)
  SELECT id, kind, status, label, inputs_json, planner_version, git_commit, created_unix_ms,
         finished_unix_ms, failure_reason, failed_rank FROM runs;
DELETE FROM sqlite_sequence WHERE name = 'runs_v4';
INSERT INTO sqlite_sequence (name, seq) SELECT 'runs_v4', seq FROM sqlite_sequence WHERE name = 'runs';
DROP TABLE runs;
ALTER TABLE runs_v4 RENAME TO runs;
CREATE INDEX runs_by_kind ON runs (kind, id);
CREATE INDEX runs_by_status ON runs (status);
)sql";

constexpr Migration kMigrations[] = {
    {1, "runs, plans, metrics and predicted ops", kRunsAndPredictions},
    {2, "measured steps and ops", kMeasurements},
    {3, "hardware profiles, calibration samples and sweep results", kProfilesAndSweeps},
    {4, "the process recording each run, and interrupted runs", kRunOwners},
};
static_assert(std::size(kMigrations) == kSchemaVersion,
              "one migration per schema version; bump kSchemaVersion with a new migration");

Result<std::int64_t> pragma_int(Database::Impl& impl, const char* sql) {
  PLANNER_ASSIGN_OR_RETURN(auto stmt, impl.prepare(sql));
  return stmt.scalar();
}

// Checks that the file is a planner database this build can use. Reads only the header fields, so
// it is safe to call before changing the journal mode.
Status check_identity(Database::Impl& impl, int version, std::int64_t application_id) {
  if (version > kSchemaVersion) {
    return Status::invalid_input(
        impl.path + ": database schema version " + std::to_string(version) +
        " is newer than this build of planner understands (" + std::to_string(kSchemaVersion) +
        "); use a newer planner to read it");
  }
  if (application_id != 0 && application_id != kApplicationId) {
    return Status::invalid_input(impl.path +
                                 ": a SQLite database of another application (application_id " +
                                 std::to_string(application_id) + "), not a planner database");
  }
  if (version > 0 && application_id == 0) {
    return Status::invalid_input(impl.path + ": a SQLite database with user_version " +
                                 std::to_string(version) +
                                 " but no planner application id: not a planner database");
  }
  return Status::ok();
}

}  // namespace

std::span<const Migration> migrations() {
  return kMigrations;
}

Status check_header(Database::Impl& impl) {
  // One snapshot: another process may create the schema between two separate reads.
  PLANNER_ASSIGN_OR_RETURN(Transaction snapshot, impl.begin(/*write=*/false));
  PLANNER_ASSIGN_OR_RETURN(std::int64_t version, pragma_int(impl, "PRAGMA user_version"));
  PLANNER_ASSIGN_OR_RETURN(std::int64_t app_id, pragma_int(impl, "PRAGMA application_id"));
  PLANNER_RETURN_IF_ERROR(check_identity(impl, static_cast<int>(version), app_id));
  if (version == 0) {
    PLANNER_ASSIGN_OR_RETURN(std::int64_t objects,
                             pragma_int(impl, "SELECT count(*) FROM sqlite_schema"));
    if (objects > 0) {
      return Status::invalid_input(impl.path +
                                   ": a SQLite database with tables but no planner schema version: "
                                   "not a planner database");
    }
  }
  impl.version = static_cast<int>(version);
  return snapshot.commit();
}

Status migrate(Database::Impl& impl) {
  PLANNER_RETURN_IF_ERROR(check_header(impl));
  if (impl.version == kSchemaVersion) return Status::ok();

  // Foreign keys are off while the schema changes (a migration may rebuild a table that others
  // refer to; dropping it with them on would delete the rows that refer to it). The pragma only
  // takes effect outside a transaction; it is checked below before the commit.
  PLANNER_RETURN_IF_ERROR(impl.exec("PRAGMA foreign_keys = OFF"));
  struct ForeignKeysOn {
    Database::Impl& impl;
    ~ForeignKeysOn() { (void)impl.exec("PRAGMA foreign_keys = ON"); }
  } restore{impl};
  PLANNER_ASSIGN_OR_RETURN(Transaction tx, impl.begin(/*write=*/true));
  // Another process may have migrated it while this one waited for the write lock.
  PLANNER_RETURN_IF_ERROR(check_header(impl));
  const int version = impl.version;
  if (version == kSchemaVersion) return tx.commit();
  if (version == 0) {
    PLANNER_RETURN_IF_ERROR(impl.exec("PRAGMA application_id = " + std::to_string(kApplicationId)));
  }
  for (const Migration& m : kMigrations) {
    if (m.version <= version) continue;
    Status applied = impl.exec(m.sql);
    if (!applied.is_ok()) {
      return applied.with_context("migrating to schema version " + std::to_string(m.version) +
                                  " (" + m.description + ")");
    }
  }
  {
    PLANNER_ASSIGN_OR_RETURN(auto check, impl.prepare("PRAGMA foreign_key_check"));
    PLANNER_ASSIGN_OR_RETURN(bool broken, check.next());
    if (broken) {
      return Status::internal(impl.path + ": migrating to schema version " +
                              std::to_string(kSchemaVersion) + " broke a foreign key in table " +
                              check->text(0));
    }
  }
  PLANNER_RETURN_IF_ERROR(impl.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion)));
  PLANNER_RETURN_IF_ERROR(tx.commit());
  impl.version = kSchemaVersion;
  return Status::ok();
}

}  // namespace planner::store::detail
