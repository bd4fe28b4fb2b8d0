// The analytic tier of a sweep: a closed-form step time for a plan, from the same parameters and
// models the discrete-event simulator uses, fast enough to rank every plan of a search space.
//
// What it shares with the simulator (so a calibrated profile moves both tiers together):
//   * compute: the step program itself. A *probe* lowers a small version of the plan (core's
//     lowering, 2 pipeline stages of one layer period each, one micro-batch) and times every
//     compute op with the simulator's ComputeModel; per-layer forward, backward, weight-gradient
//     and recompute times, the embedding and LM-head ends, the multi-token-prediction modules (on
//     the LM head's stage), the optimizer's bytes per parameter and the pipeline message size come
//     from it. Probes are cached per (tp, cp, ep, sequence parallel,
//     micro-batch size, recompute).
//   * communication: CollectivePlanner::cost_lines() on the plan's actual GPUs (Placement by the
//     plan's rank order): the algorithm and protocol the simulator would select for each size, at
//     the rate it reaches while the symmetric groups of the other ranks run at the same time
//     (images on islands holding no member of the group are left out, as the simulator drops them).
//     Lines are cached per group (its GPUs and images).
//   * memory: core's MemoryEstimator (equal to estimate_memory()).
// The closed forms (per micro-batch and stage: f forward, b backward incl. recompute, w the
// weight-gradient part; m micro-batches, p stages, v virtual stages, t_pp one pipeline message):
//   tp and ep collectives   exposed (each feeds the next compute op); cp K/V exchange exposed
//                           beyond the attention compute it overlaps (a block's receive ends when
//                           the symmetric peer's send of it does).
//   gpipe, 1f1b   T = (m − 1)·max_s(f+b) + Σ_s(f+b) + 2(p − 1)·t_pp       (Narayanan et al. 2021)
//   interleaved   T = m·max_s(f+b) + (Σ_s(f+b) − max_s(f+b))/v + 2(p − 1)·t_pp
//   zb-h1         T = m·max_s(f+b+w... ) + (p − 1)·max_s(f + b − 2w) + 2(p − 1)·t_pp, with b
//                 excluding w: the bubble (p − 1)(F + B − W) of Qi et al. 2024 (ICLR, §3.1)
//   dualpipev     no closed form with unequal stages: run_schedule() of the schedule with each
//                 stage's chunk passes taking half its f, b, w, at m = 2p and 2p + 1, extended
//                 linearly to m; + 2(p − 1)·t_pp (its merged chunks hide the steady state's
//                 messages). Its merged chunks hide exposed all-to-all time as moe_a2a_overlap's
//                 do, for the share of passes they merge.
//   (for equal stages these reduce to core's bubble_fraction(); tests check them against
//   run_schedule()).
//   data parallel  bucketed gradient reduction (core's ModelPartition buckets, Megatron's default
//                 bucket size) after the last micro-batch, overlapped with that micro-batch's
//                 backward (overlap_grad_reduce) except for its last bucket; stage s has s backward
//                 chunks of slack (it finishes earlier in the drain). ZeRO-1/2 gather the updated
//                 parameters (overlapped with the next step's first forward under
//                 overlap_param_gather); ZeRO-2 reduce-scatters every micro-batch; ZeRO-3 gathers
//                 every layer before forward and backward and reduce-scatters it after, prefetched
//                 one layer ahead: exposed beyond the layer's compute. Then the gradient-norm and
//                 tied-embedding all-reduces and the optimizer step (memory-bound).
//   compute slowdown  compute overlapping communication runs at (1 − comm_slowdown) of its speed,
//                 as in the program runner.
// Not modelled: parameter servers and offload (a sweep does not search them; estimate() refuses
// them), per-op contention beyond the steady state. The sweep re-runs its best plans through the
// simulator and reports how far this estimate was.
//
// Thread safety: an Estimator is shared by the threads of a sweep; each thread evaluates plans
// through its own Estimator::Session (which keeps a front cache and a MemoryEstimator). Results do
// not depend on which thread computed a cached entry first.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/core/gpu_spec.hpp"
#include "planner/core/hardware_profile.hpp"
#include "planner/core/memory.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/status.hpp"
#include "planner/core/training_spec.hpp"
#include "planner/sim/collectives.hpp"
#include "planner/sim/fabric.hpp"
#include "planner/sim/program_runner.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::search {

struct EstimatorInput {
  ModelSpec model;
  TrainingSpec training;
  GpuSpec gpu;
  std::shared_ptr<const topo::Cluster> cluster;
  std::shared_ptr<const HardwareProfile> profile;
  std::shared_ptr<const sim::Fabric> fabric;  // built from cluster and profile when empty
  MemoryOptions memory;
  bool fp32_grads = false;  // as LowerOptions::fp32_grads
  HostCosts host;           // as RunOptions::host: the issuing thread's cost per op
  // As RunOptions::attention; a kernel that keeps the scores stores them (sim::memory_with).
  sim::AttentionKernel attention = sim::AttentionKernel::kFlash;
};

struct PlanEstimate {
  MemoryPeak memory;
  Time step_time;
  double tokens_per_second = 0;
  double mfu = 0;
  double hfu = 0;
  double bubble_fraction = 0;  // mean over stages of idle / step time
  // Per-worker time of stage 0 (the critical stage) by bucket, as the simulator reports them:
  // compute, exposed communication per axis, idle.
  std::array<Time, sim::kNumTimeBuckets> buckets{};
  Time exposed(sim::TimeBucket axis) const { return buckets[static_cast<std::size_t>(axis)]; }
};

class Estimator {
 public:
  // Fails when the profile cannot time the training precision.
  static Result<std::shared_ptr<Estimator>> create(EstimatorInput input);

  const EstimatorInput& input() const { return input_; }

  class Session;
  // A per-thread handle; the Estimator must outlive it.
  Session session() const;

  struct Probe;
  struct Groups;
  struct Partition;
  struct BlockCosts;
  struct DpTail;
  // Exact cache keys: a few integers.
  struct Key {
    std::array<std::int64_t, 11> v{};
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept;
  };

 private:
  explicit Estimator(EstimatorInput input);
  Result<const Probe*> probe(const ParallelConfig& p) const;
  Result<const Groups*> groups(const ParallelConfig& p, sim::CollectivePlanner& planner) const;
  Result<const Partition*> partition(const ParallelConfig& p) const;
  // Lines cached by `key` (the group's content, or a shape for latency-bound groups).
  const std::vector<sim::CostLine>* lines(const std::string& key, const std::vector<int>& gpus,
                                          const std::vector<std::vector<int>>& images, OpKind kind,
                                          sim::CollectivePlanner& planner,
                                          const sim::TokenRouting* routing = nullptr) const;

  EstimatorInput input_;
  // The step's model FLOPs and hardware FLOPs per recompute mode: the same for every plan (MFU and
  // HFU divide them), so computed once, not per estimate.
  Flops model_flops_{0};
  std::array<Flops, 3> hardware_flops_{};
  mutable std::mutex mutex_;
  mutable std::unordered_map<Key, std::unique_ptr<Probe>, KeyHash> probes_;
  mutable std::unordered_map<std::string, std::unique_ptr<Groups>> groups_;
  mutable std::unordered_map<Key, std::unique_ptr<Partition>, KeyHash> partitions_;
  mutable std::unordered_map<std::string, std::unique_ptr<std::vector<sim::CostLine>>> lines_;
};

class Estimator::Session {
 public:
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Memory of a plan (equal to estimate_memory()'s peak).
  Result<MemoryPeak> memory(const ParallelConfig& p);
  // The analytic step estimate of a plan that passes check_parallel(); `memory` from memory().
  Result<PlanEstimate> estimate(const ParallelConfig& p, const MemoryPeak& memory);

 private:
  friend class Estimator;
  explicit Session(const Estimator& e);
  const BlockCosts& block_costs(const Probe& probe, const Groups& groups);
  const DpTail& dp_tail(const Partition& part, const Groups& groups, int zero_stage, int stage,
                        bool dp_on, double grad_bytes, double param_bytes);

  const Estimator* e_;
  MemoryEstimator memory_;
  std::unique_ptr<sim::CollectivePlanner> planner_;  // this thread's, for building cost lines
  std::unordered_map<Key, const Probe*, KeyHash> probes_;
  std::unordered_map<Key, const Groups*, KeyHash> groups_;
  std::unordered_map<Key, const Partition*, KeyHash> partitions_;
  std::vector<std::string> orders_;  // rank orders seen, by index (a field of the groups key)
  std::unordered_map<Key, std::unique_ptr<BlockCosts>, KeyHash> block_costs_;
  // A block's span costs by its communication times (block_costs): plans whose groups differ
  // where the block does not communicate (dp, pp, ZeRO) share them.
  struct SpanCosts;
  std::unique_ptr<SpanCosts> span_costs_;
  std::unordered_map<Key, std::unique_ptr<DpTail>, KeyHash> dp_tails_;
};

// Makespan of a pipeline with per-micro-batch stage times (forward f, backward b excluding the
// weight gradient w, which is 0 unless the schedule splits it) by the closed forms of the header.
double pipeline_makespan(Schedule schedule, int microbatches, int chunks,
                         const std::vector<double>& f, const std::vector<double>& b,
                         const std::vector<double>& w, double p2p);

}  // namespace planner::search
