// The simulator's prediction of a plan as the store keeps it, shared by `planner simulate` (which
// records a simulation run) and `planner exec` (which stores the prediction for its plan next to
// its measurements, joinable on op id, for `planner report`).
#pragma once

#include <string>
#include <vector>

#include "planner/core/gpu_spec.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/lowering.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/status.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"
#include "planner/topo/topology_spec.hpp"

namespace planner::cli {

// The first topology preset whose GPU is `gpu` (kNotFound naming the GPU when none is).
Result<topo::TopologySpec> topology_for_gpu(const GpuSpec& gpu);

// Step-level metrics of a simulation (memory always; timing when it was simulated), under the
// store's shared metric names.
std::vector<store::Metric> simulated_step_metrics(const sim::SimResult& result);
// Every simulated op of every simulated rank (SimOptions::run.keep_op_times must have been set).
std::vector<store::OpPrediction> predicted_ops(const sim::SimResult& result);

// Simulates one step of `plan` on every rank, lowered with `lower` (the executor's options, so
// that op ids match its measurements), on the plan's topology (cluster.topology, else the preset
// with its GPU) with `profile` (default: the GPU's built-in hardware profile), keeping every op's
// timing.
Result<sim::SimResult> simulate_plan_for_exec(const Plan& plan, const LowerOptions& lower,
                                              const HardwareProfile* profile = nullptr);

// Stores `result` for `plan` in `run`: the simulated step metrics and, when it was simulated,
// every predicted op, in one transaction.
Status store_prediction(store::Database& db, store::RunId run, store::PlanId plan,
                        const sim::SimResult& result);

}  // namespace planner::cli
