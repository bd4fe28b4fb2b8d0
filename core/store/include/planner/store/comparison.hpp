// Predicted vs measured: the join of a run's measurements with a prediction on (rank, op id).
//
// The simulator and the executor consume the same step program, so an op id names the same
// operation in both. A comparison takes the measured ops of a run (warm-up steps left out unless
// asked for), averages each (rank, op id) over the steps, and joins them with the predicted ops of
// one plan: by default the predictions stored in the measured run itself (the executor stores the
// simulator's prediction with its measurements), or those of another run (a `planner simulate` of
// the same plan).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/status.hpp"
#include "planner/core/units.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::store {

struct ComparisonOptions {
  std::optional<RunId> prediction_run;  // default: the measured run
  // Default: the only plan of the prediction run that has predicted ops or a step_time metric.
  std::optional<PlanId> plan;
  bool include_warmup = false;
};

// One (rank, op id) both predicted and measured.
struct OpComparison {
  int rank = 0;
  std::string op_id;
  std::string op_kind;  // as predicted
  Bytes bytes;          // as predicted
  Time predicted;       // simulated duration
  Time measured_mean;   // mean wall time over the compared steps
  Time measured_min;
  Time measured_max;
  std::int64_t samples = 0;  // compared steps in which the op was measured
};

// Matched ops of one kind, summed over ranks: time per step spent in this kind of op.
struct OpKindComparison {
  std::string op_kind;
  std::int64_t ops = 0;  // matched (rank, op id) pairs
  Time predicted;        // sum of predicted durations
  Time measured;         // sum of mean measured wall times
  // (predicted - measured) / measured; nullopt when nothing was measured.
  std::optional<double> relative_error() const;
};

struct StepComparison {
  std::int64_t step = 0;
  bool warmup = false;
  Time measured;
  std::optional<Time> predicted;  // the predicted step time (the same for every step)
  std::optional<double> relative_error() const;
};

struct RunComparison {
  RunId measured_run;
  RunId prediction_run;
  PlanId plan;
  // The plan's "step_time" metric: simulated when stored, else analytic.
  std::optional<Time> predicted_step_time;
  // Median step time over the compared (non-warm-up unless included) measured steps.
  std::optional<Time> measured_step_time;
  std::vector<OpKindComparison> by_op_kind;  // largest measured time first
  std::vector<StepComparison> by_step;       // every measured step, warm-up ones flagged
  std::int64_t predicted_only = 0;           // predicted ops never measured in the compared steps
  std::int64_t measured_only = 0;            // measured (rank, op id) pairs with no prediction
};

// Every matched op, ordered by rank and predicted start.
Result<std::vector<OpComparison>> compare_ops(Database& db, RunId measured_run,
                                              const ComparisonOptions& options = {});

// Per op kind and per step. StatusCode::kNotFound when the prediction run has no predictions;
// kInvalidInput when it has predictions for several plans and none was chosen.
Result<RunComparison> compare_run(Database& db, RunId measured_run,
                                  const ComparisonOptions& options = {});

}  // namespace planner::store
