// Microbenchmarks for calibration (`planner calibrate`, `planner bench collectives`): GEMMs,
// attention, memory-bound kernels and collectives through a Backend's Device and Communicators,
// the same calls the runner makes, each described as the op the lowering would emit
// (CalibrationPoint), so that the simulator's fit (planner/fit/calibration.hpp) can time it.
//
// Measuring (nccl-tests style): warm-up, then timed iterations between two device events; each
// measurement is repeated kRepeats times and the median kept. Compute benchmarks run at once on the
// first `compute_ranks` ranks (each on its own core, as the ranks of a run compute side by side,
// starting each kernel together); the others wait. A compute point's group_size is the number of
// ranks computing at once. When the host runs more ranks than it has cores (and `oversubscribed`),
// a few kernels are then run by every rank at once, each point timed as the wall time of a common
// batch over its calls (group_size = the world size): the cost of sharing the cores. Collectives
// run over the first g ranks for every group size g from 2 to the world size (to the host's cores
// when the host is oversubscribed), the members polling as ranks with a core each; every rank of
// the group times the same iterations; the slowest rank's time counts.
// Send/recv is a ping-pong between ranks 0 and 1 (one message = half a round trip). Memory-bound
// kernels rotate through copies of their arrays (32 MiB of each) so that they read memory, not the
// cache, as in a training step. Every wait is bounded by `timeout_s`.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "planner/core/calibration_point.hpp"
#include "planner/core/status.hpp"
#include "planner/exec/backend.hpp"

namespace planner::exec {

struct MicrobenchOptions {
  bool compute = true;
  bool collectives = true;
  // Collectives to measure; empty: all-reduce, all-gather, reduce-scatter, all-to-all, broadcast
  // and send/recv.
  std::vector<OpKind> kinds;
  // Message sizes (nccl-tests size), doubling by `size_factor`.
  std::int64_t min_bytes = 1024;
  std::int64_t max_bytes = 16 * 1024 * 1024;
  int size_factor = 4;
  // A larger GEMM, attention and memory-bound grid (slow on CPUs).
  bool full_compute = false;
  // Group sizes to measure (each between 2 and the world size); empty: every one.
  std::vector<int> group_sizes;
  // Ranks running the compute benchmarks together; 0: min(world size, cores of the host).
  int compute_ranks = 0;
  // With more ranks on the host than cores: also measure compute with every rank at once.
  bool oversubscribed = true;
  // Passes over the compute kernels; each keeps its fastest pass (robust to other work on the
  // machine, which only slows kernels down).
  int compute_sweeps = 3;
  // Wall time one timed batch aims at (iterations are chosen from a first, untimed run).
  double target_s = 0.005;
  double timeout_s = 60;
};

struct Measurement {
  CalibrationPoint point;  // measured = median time of one op
  std::int64_t iterations = 0;
};

// Called on rank 0 after each measurement (progress); may be empty.
using MeasurementSink = std::function<void(const Measurement&)>;

// Runs the benchmarks on every rank of backend.world() (collective: every rank calls it with the
// same options). Returns every measurement on rank 0, an empty vector elsewhere.
Result<std::vector<Measurement>> run_microbenchmarks(Backend& backend,
                                                     const MicrobenchOptions& options,
                                                     const MeasurementSink& sink = {});

}  // namespace planner::exec
