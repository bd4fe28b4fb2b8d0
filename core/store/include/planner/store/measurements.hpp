// Measurements of executed runs: per rank, step and op, and per step over all ranks.
//
// Written by the executor's rank 0 as steps complete (each call is one transaction), so a run that
// fails later keeps the steps it finished.
#pragma once

#include <span>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::store {

// Appends per-op measurements. An op id repeated for the same (run, rank, step) is
// StatusCode::kInvalidInput and nothing is stored.
Status add_measured_ops(Database& db, RunId run, std::span<const OpMeasurement> ops);

// Appends or replaces per-step summaries (keyed by step).
Status add_measured_steps(Database& db, RunId run, std::span<const StepMeasurement> steps);

// Ordered by step, rank, then start time (op id when no start was measured).
Result<std::vector<OpMeasurement>> get_measured_ops(Database& db, RunId run);
// Ordered by step.
Result<std::vector<StepMeasurement>> get_measured_steps(Database& db, RunId run);

}  // namespace planner::store
