// Recording in the store, from library types: what `planner sweep`, `simulate`, `accuracy`,
// `calibrate` and `exec` record, and what the desktop app records for its sweeps and what-ifs, so
// that a run shows in the history whichever front-end made it. Each record_* call writes one run
// (created, filled in one or more transactions, then finished or failed) and returns its id.
#pragma once

#include <string>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/status.hpp"
#include "planner/fit/accuracy.hpp"
#include "planner/search/sweep.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/store/database.hpp"
#include "planner/store/records.hpp"

namespace planner::app {

// ---- a result as the store's metrics and ops

// A ranked plan's metrics (simulated when it was simulated, else estimated) and economics.
std::vector<store::Metric> plan_metrics(const search::RankedPlan& plan);
// Step-level metrics of a simulation (memory always; timing when it was simulated).
std::vector<store::Metric> simulated_step_metrics(const sim::SimResult& result);
// Every simulated op of every simulated rank (SimOptions::run.keep_op_times must have been set).
std::vector<store::OpPrediction> predicted_ops(const sim::SimResult& result);

// ---- runs

// A sweep: every ranked plan with its position, tier, objective, note and metrics. `inputs` is the
// run's inputs document (sweep_inputs()).
Result<store::RunId> record_sweep(store::Database& db, const search::SweepSetup& setup,
                                  const search::SweepResult& result, const Json& inputs);

// A simulation of `plan`: its step metrics and, with `with_ops`, every predicted op; a non-empty
// `failure` (the plan does not fit) fails the run with that message.
Result<store::RunId> record_simulation(store::Database& db, const Plan& plan,
                                       const sim::SimResult& result, const Json& inputs,
                                       bool with_ops, const std::string& failure = {});

// An accuracy report: per modelled published run, the predicted and the published metric.
Result<store::RunId> record_accuracy(store::Database& db, const fit::AccuracyReport& report,
                                     const Json& inputs);

// A fitted hardware profile with the samples it was fitted to, replacing a stored profile of the
// same name. Fails (kRuntime, nothing stored) when the profile would not read back as a profile
// document.
Result<store::RunId> record_profile(store::Database& db, const HardwareProfile& profile,
                                    const std::vector<store::CalibrationSample>& samples,
                                    const Json& inputs);

}  // namespace planner::app
