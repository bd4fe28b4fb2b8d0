// Calibration inputs a front-end reads from the database: the measured compute ops of executed runs
// as calibration points (`planner calibrate --from-runs`).
#pragma once

#include <functional>
#include <vector>

#include "planner/core/calibration_point.hpp"
#include "planner/core/catalog.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/lowering.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/status.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::app {

// The lowering options an executed run used, from its plan and its recorded inputs (the executor
// knows them: exec::runner_lower_options()).
using ExecLowering = std::function<LowerOptions(const Plan& plan, const Json& run_inputs)>;

// The compute ops of executed run `run` as calibration points: its plan lowered as it was executed
// (`lowering`), joined on op id with its per-op measurements averaged over the non-warm-up steps
// (fit::join_measured_ops()). kInvalidInput when the run is not an executed run of one plan.
Result<std::vector<CalibrationPoint>> run_points(store::Database& db, store::RunId run,
                                                 const Catalog& catalog,
                                                 const ExecLowering& lowering);

}  // namespace planner::app
