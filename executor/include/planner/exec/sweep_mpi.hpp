// A sweep over the ranks of an MPI job (`mpirun -np N planner sweep ...`): the simulator's sweep
// steps (simulator/sweep.hpp) split over a World, the results gathered on rank 0.
//
//   1. every rank evaluates its shard of the work units (SweepShard{rank, size}) analytically;
//   2. rank 0 gathers the shards' best candidates, Pareto frontiers and counts and merges them;
//   3. rank 0 broadcasts the top_k candidates; rank r simulates those at positions r, r + N, ...;
//   4. rank 0 gathers the simulations and builds the result with finish().
// Every step is deterministic and the merge keeps the sweep's total order, so rank 0's result
// equals a single process's. A rank that fails sends its error instead of its results; rank 0
// returns the first error and the others return it too after the broadcast.
#pragma once

#include <optional>

#include "planner/core/status.hpp"
#include "planner/exec/backend.hpp"
#include "planner/search/sweep.hpp"

namespace planner::exec {

// Waits longer than this (seconds) for another rank's part fail with kTimeout.
inline constexpr double kDefaultSweepTimeoutS = 3600;

// The result on rank 0; std::nullopt on the other ranks. `sink` reports this rank's own progress.
Result<std::optional<search::SweepResult>> run_sweep_distributed(
    World& world, const search::SweepSetup& setup, search::ProgressSink* sink = nullptr,
    double timeout_s = kDefaultSweepTimeoutS);

}  // namespace planner::exec
