// Predictions: step-level metrics per (run, plan, source) and per-op timings from the simulator.
//
// Bulk inserts use one prepared statement inside one transaction: 1e5 op rows take a fraction of a
// second (bench/store_bench.cpp measures it).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::store {

// Stores metrics for `plan` in `run` from `source`, replacing earlier values of the same names.
// Every value must be finite (StatusCode::kInvalidInput otherwise). Links the plan to the run.
Status put_metrics(Database& db, RunId run, PlanId plan, MetricSource source,
                   std::span<const Metric> metrics);

// The metrics of `run` (of one plan when given), ordered by plan, source and name.
Result<std::vector<MetricRecord>> get_metrics(Database& db, RunId run,
                                              std::optional<PlanId> plan = std::nullopt);

// Appends simulated per-op timings for `plan` in `run`, all in one transaction. An op id repeated
// for the same (run, plan, rank) is StatusCode::kInvalidInput and nothing is stored.
Status add_predicted_ops(Database& db, RunId run, PlanId plan, std::span<const OpPrediction> ops);

// The predicted ops of `plan` in `run`, ordered by rank and start time.
Result<std::vector<OpPrediction>> get_predicted_ops(Database& db, RunId run, PlanId plan);

}  // namespace planner::store
