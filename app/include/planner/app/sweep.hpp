// A sweep as a front-end runs it: every step of search::run_sweep() in this process, or, when the
// front-end hands over a distributed runner (the CLI under mpirun: the executor's
// run_sweep_distributed()), over the ranks of a job; timed, with the setup kept so that any ranked
// plan can be rebuilt, drawn, simulated again or recorded.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stop_token>

#include "planner/core/json_reader.hpp"
#include "planner/core/status.hpp"
#include "planner/search/sweep.hpp"

namespace planner::app {

struct SweepRun {
  std::shared_ptr<const search::SweepSetup> setup;
  // Set in this process; empty on the ranks other than 0 of a distributed sweep.
  std::optional<search::SweepResult> result;
  double seconds = 0;  // wall time
};

// Runs the analytic and simulation steps of a prepared sweep somewhere else (over MPI ranks):
// the result on the rank that reports it, std::nullopt on the others.
using SweepSteps = std::function<Result<std::optional<search::SweepResult>>(
    const search::SweepSetup& setup, search::ProgressSink* sink)>;

struct SweepRunOptions {
  int threads = 0;         // 0: every core of this machine
  SweepSteps distributed;  // empty: every step in this process
  std::stop_token stop;    // cancels between work units (kRuntime "cancelled")
};

Result<SweepRun> run_sweep(search::SweepRequest request, search::ProgressSink* sink = nullptr,
                           const SweepRunOptions& options = {});

// What a recorded sweep was asked: its scenarios, search and constraints, merged into `origin`
// (who asked: {"command": "sweep", "spec": ...} from the CLI, {"command": "gui", ...} from the
// app).
Json sweep_inputs(const search::SweepRequest& request, Json origin);

}  // namespace planner::app
