// simulate(): one training step of a plan on a cluster, from memory check to step report.
//
//   1. Memory: core's accounting (memory.hpp) per pipeline stage against the GPU's HBM. A plan that
//      does not fit is not simulated: the result carries out_of_memory (stage, bytes needed, HBM)
//      and no timing (unless options.check_memory is off).
//   2. Lowering: the step program (lowering.hpp) of the simulated ranks: one rank per pipeline
//      stage (default), one data-parallel replica, or every rank (--full).
//   3. Timing: run_program() (program_runner.hpp) on the cluster with the hardware profile;
//      unsimulated ranks' collectives and messages load the fabric as background (symmetry.hpp).
//   4. Report: step time, tokens/s, model and hardware TFLOP/s per GPU, MFU and HFU (flops.hpp
//      conventions; peak = the GPU's dense peak for the training precision), bubble fraction,
//      exposed communication per axis, per-stage busy/idle and peak memory, the critical path.
//
// Thread safety: simulate() only reads its input; the cluster and the profile are shared const
// objects (topo::Cluster's const members are thread-safe), so a sweep may call it from many
// threads at once with the same cluster. Results are deterministic: the same input gives the same
// result and the same trace on any thread.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/hardware_profile.hpp"
#include "planner/core/lowering.hpp"
#include "planner/core/memory.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/status.hpp"
#include "planner/sim/program_runner.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::sim {

struct SimOptions {
  RankSubset ranks = RankSubset::kOnePerStage;
  RunOptions run;
  bool check_memory = true;
  MemoryOptions memory;  // as memory_with(): a kernel that keeps the scores stores them
  LowerOptions lower;    // bucket size, fp32 gradients, clipping (its `ranks` is ignored)
};

// The memory options under an attention kernel: any but flash-style keeps the s×s scores
// (flash_attention off).
inline MemoryOptions memory_with(MemoryOptions memory, AttentionKernel attention) {
  if (attention != AttentionKernel::kFlash) memory.flash_attention = false;
  return memory;
}

struct SimInput {
  Plan plan;  // model, GPU, training, parallel config (plan.cluster is informational)
  std::shared_ptr<const topo::Cluster> cluster;
  std::shared_ptr<const HardwareProfile> profile;
  // Optional: Fabric::build(*cluster, *profile, options.run.balanced_fabric), shared by the
  // simulations of a sweep (building it takes tens of milliseconds on 16,384 GPUs). Built per call
  // when empty.
  std::shared_ptr<const Fabric> fabric;
  // Optional: collective plans shared by the simulations of a sweep on this cluster, profile and
  // fabric (program_runner.hpp).
  std::shared_ptr<PlanMemo> plan_memo;
  // GPU of every rank (workers, then parameter servers). Empty: default_gpu_of_rank().
  std::vector<int> gpu_of_rank;
  SimOptions options;
};

struct OutOfMemory {
  int stage = 0;
  Bytes needed;
  Bytes capacity;
};

struct StageReport {
  int stage = 0;
  int ranks = 0;  // simulated ranks of the stage (the figures are their mean)
  std::array<Time, kNumTimeBuckets> buckets{};
  double busy_fraction = 0;  // compute / step time
  double idle_fraction = 0;  // idle (bubble and waiting) / step time
  Bytes peak_memory;
};

struct SimResult {
  std::string model;
  std::string gpu;
  std::string profile;
  std::string parallel;  // short_label()
  std::int64_t world_size = 0;
  int microbatches = 0;
  int simulated_ranks = 0;
  RankSubset subset = RankSubset::kOnePerStage;

  MemoryReport memory;
  std::optional<OutOfMemory> out_of_memory;  // set: not simulated, no timing below
  bool simulated = false;

  Time step_time;
  std::int64_t tokens_per_step = 0;
  double tokens_per_second = 0;
  Flops model_flops;     // per step, all GPUs
  Flops hardware_flops;  // per step, recompute included
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  double bubble_fraction = 0;  // mean over simulated workers of idle / step time
  double schedule_bubble = 0;  // the schedule's closed form (schedule.hpp)
  // Mean over simulated workers of the time their compute stream had an op ready that the host
  // had not issued yet (host_model.hpp), and that as a fraction of the step.
  Time host_wait;
  double host_bound_fraction = 0;
  std::array<Time, kNumTimeBuckets> mean_buckets{};  // per simulated worker, mean
  std::vector<StageReport> stages;
  std::array<Time, kNumTimeBuckets> critical_buckets{};
  std::vector<PathEntry> critical_path;
  std::vector<CollectiveUse> collectives;
  std::vector<RankRun> ranks;  // per-rank accounting; op timings when options.run.keep_op_times
  RunStats stats;
  std::string trace_json;

  // Exposed communication of an axis (mean per simulated worker).
  Time exposed(TimeBucket axis) const { return mean_buckets[static_cast<std::size_t>(axis)]; }
};

// The default placement: Placement::by_order over the dense rank grid in the plan's rank order,
// then parameter servers on the next free GPUs. Fails when the cluster has too few GPUs.
Result<std::vector<int>> default_gpu_of_rank(const ParallelConfig& parallel,
                                             const topo::Cluster& cluster);

// Fails with kInvalidInput when the plan is impossible (check_parallel), the cluster is too small
// or the profile cannot time the plan's precision; an out-of-memory plan is a result, not an error.
Result<SimResult> simulate(const SimInput& input);

}  // namespace planner::sim

namespace planner {

template <>
struct EnumTraits<RankSubset> {
  static constexpr std::string_view kWhat = "rank subset";
  static constexpr std::array<std::pair<RankSubset, std::string_view>, 3> kNames{{
      {RankSubset::kOnePerStage, "stage"},
      {RankSubset::kDataParallelReplica, "replica"},
      {RankSubset::kAll, "all"},
  }};
};

}  // namespace planner
