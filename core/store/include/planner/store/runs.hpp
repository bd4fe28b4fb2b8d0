// Runs: one row per sweep, simulation, execution, calibration or accuracy check.
//
// A run starts as "running" (create_run), then ends "ok" (finish_run) or "failed" with a reason
// and, for executed runs, the failing rank (fail_run). Everything else the store keeps (plans,
// metrics, predictions, measurements, sweep results) hangs off a run.
//
// A run also records the process that created it (host name, pid, and the process's start time,
// so a reused pid is not mistaken for it). A process killed before it ended its run leaves it
// "running" in the file; get_run() and list_runs() report such a run as "interrupted" when its
// process is on this host and gone, and mark_interrupted_runs() records that (`planner db repair`,
// `planner db vacuum`). A run whose process is on another host is reported as recorded.
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
// StatusCode::kInvalidInput. A run still recorded as running whose process is gone may be ended
// by another process (e.g. the launcher of a job whose rank 0 died).
Status finish_run(Database& db, RunId run);

// Marks a running run failed with a reason and, when known, the rank that failed.
Status fail_run(Database& db, RunId run, std::string_view reason,
                std::optional<int> failed_rank = std::nullopt);

// Marks every run recorded as running whose process was on this host and is gone as
// interrupted (with the process in failure_reason), and returns their ids.
Result<std::vector<RunId>> mark_interrupted_runs(Database& db);

// StatusCode::kNotFound when there is no such run.
Result<RunRecord> get_run(Database& db, RunId run);

// Runs matching `filter`, newest first.
Result<std::vector<RunRecord>> list_runs(Database& db, const RunFilter& filter = {});

// The newest run, or StatusCode::kNotFound in an empty database.
Result<RunId> latest_run(Database& db);

// StatusCode::kNotFound ("run 7 not found in planner.db") unless the run exists.
Status require_run(Database& db, RunId run);

}  // namespace planner::store
