// Reading the database as a whole: row counts of a run and JSON exports.
//
// Export document (kind "planner_db_export"):
//   { "schema_version": 1, "kind": "planner_db_export", "database_schema_version": 3,
//     "planner_version": "...", "runs": [ run, ... ], "hardware_profiles": [ profile, ... ] }
// A run holds its fields, its inputs (parsed JSON), plans (parsed JSON), metrics, sweep results,
// measured steps, and the bulky per-op tables in columnar form:
//   "predicted_ops": { "columns": ["plan_id", "rank", "op_id", ...], "rows": [[...], ...] }.
// Times are in the unit their key names (`duration_ps`), instants are ISO-8601 UTC.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "planner/core/json_reader.hpp"
#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::store {

struct RunCounts {
  std::int64_t plans = 0;
  std::int64_t metrics = 0;
  std::int64_t predicted_ops = 0;
  std::int64_t measured_ops = 0;
  std::int64_t measured_steps = 0;
  std::int64_t sweep_results = 0;
  std::int64_t profiles = 0;  // hardware profiles made by this run
};

Result<RunCounts> count_rows(Database& db, RunId run);

// Exports the given runs (and the hardware profiles they produced), or with no runs given every
// run and every profile, as one consistent snapshot.
Result<Json> export_runs(Database& db, std::span<const RunId> runs);

// "2024-05-01T12:00:03.250Z".
std::string format_utc(std::int64_t unix_ms);

}  // namespace planner::store
