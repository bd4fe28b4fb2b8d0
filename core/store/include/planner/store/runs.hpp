// Runs: one row per sweep, simulation, execution, calibration or accuracy check.
//
// A run starts as "running" (create_run), then ends "ok" (finish_run) or "failed" with a reason
// and, for executed runs, the failing rank (fail_run). Everything else the store keeps (plans,
// metrics, predictions, measurements, sweep results) hangs off a run.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::store {

// Records a new running run with the current wall-clock time, this build's version and git commit,
// and `run.hosts` (this machine's host name when empty). `inputs_json` must be valid JSON.
Result<RunId> create_run(Database& db, const NewRun& run);

// Marks a running run ok and records when it finished. A run that is no longer running is
// StatusCode::kInvalidInput.
Status finish_run(Database& db, RunId run);

// Marks a running run failed with a reason and, when known, the rank that failed.
Status fail_run(Database& db, RunId run, std::string_view reason,
                std::optional<int> failed_rank = std::nullopt);

// StatusCode::kNotFound when there is no such run.
Result<RunRecord> get_run(Database& db, RunId run);

// Runs matching `filter`, newest first.
Result<std::vector<RunRecord>> list_runs(Database& db, const RunFilter& filter = {});

// The newest run, or StatusCode::kNotFound in an empty database.
Result<RunId> latest_run(Database& db);

// StatusCode::kNotFound ("run 7 not found in planner.db") unless the run exists.
Status require_run(Database& db, RunId run);

}  // namespace planner::store
