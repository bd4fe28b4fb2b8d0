// Lowering: (model, training, parallel config) → step program (program.hpp).
//
// Pure and deterministic: the same inputs give the same program, op ids and group ids. The rank
// grid comes from the parallel config (RankGrid::dense for attention, dense MLPs, tp, cp, pp and
// dp; RankGrid::expert for expert parallelism and expert data parallelism).
//
// What each rank runs, per micro-batch and in the order of the pipeline schedule (schedule.hpp):
//   * embedding on virtual stage 0 (vocab-parallel; all-reduce, or reduce-scatter with SP, over
//     tp); with tp > 1 the input tokens are first broadcast over tp (Megatron's get_batch), and
//     the labels on the last virtual stage;
//   * each layer as in Megatron-LM: norm → [SP all-gather] → QKV (column parallel) → attention
//     (flash-style; context parallel: a ring of cp − 1 K/V exchanges, and in backward also cp
//     dK/dV exchanges, as Transformer Engine does) → output projection (row parallel) → all-reduce
//     (or SP reduce-scatter) → residual; then the same around the MLP (2 GEMMs for GeLU, 3 for
//     gated units) or, in MoE layers, router → top-k → all-to-all over ep → all-gather over etp →
//     expert GEMMs (batched over local experts, capacity_factor × tokens × top_k / experts tokens
//     each, with the tokens of the ep × etp ranks that feed them) → reduce-scatter over etp →
//     all-to-all back → combine (ep and etp groups from the expert grid, rank_grid.hpp);
//   * backward mirrors forward: input-gradient GEMMs, weight-gradient GEMMs (with SP the layer
//     input is all-gathered again for them, Korthikanti et al. 2022 §4.2.2), the transposed
//     collectives (all-gather ↔ reduce-scatter, all-reduce ↔ identity);
//   * recompute: selective runs the attention core forward again before its backward; full runs
//     the whole layer forward (collectives included) before the layer's backward;
//   * final norm, LM head and vocab-parallel cross-entropy on the last virtual stage (the LM head
//     in 16-bit under fp8 training: Transformer Engine runs fp8 GEMMs inside the layers only);
//   * pipeline send/recv of activations and gradients between virtual stages (sequence-sharded
//     with SP, as Megatron sends them);
//   * with moe_a2a_overlap (Megatron-core's combined 1F1B), each forward pass and the backward
//     pass of another micro-batch next to it in the stage's order run merged: both cut after
//     every EP all-to-all, their pieces alternate (forward first), so that one's dispatch and
//     combine run under the other's compute; the schedule runs one more warm-up forward per stage
//     so that the steady state's pairs hold different micro-batches.
// After the last micro-batch (phase "step"):
//   * data-parallel gradient synchronisation in buckets of bucket_elements parameters (Megatron's
//     DDP: reverse registration order, a new bucket when the current one reaches the size), over
//     dp (dp-cp with context parallelism; expert weights over expert data parallel), started as
//     soon as a bucket's gradients of the last micro-batch are ready (overlap_grad_reduce), on the
//     dp-comm stream: ZeRO-0 all-reduce; ZeRO-1 reduce-scatter, then after the optimizer an
//     all-gather of the updated parameters (at the start of the step's forward when
//     overlap_param_gather, each layer's first use waiting for its bucket); ZeRO-2 the same but
//     reduce-scatter on every micro-batch (the gradients themselves are sharded); ZeRO-3 per layer
//     and micro-batch: all-gather of the parameters before forward and again before backward
//     (prefetched one layer ahead), reduce-scatter of its gradients after backward;
//   * parameter servers (dp_sync parameter-server): each bucket is split over the S server ranks
//     (world_size .. world_size + S − 1); workers push gradient parts and pull updated
//     parameters; servers sum over the dp workers of a model shard and update;
//   * offload: optimizer offload copies gradients to the host per bucket, runs the optimizer on
//     the host and copies parameters back; parameter offload (ZeRO-3) also copies each layer's
//     parameter shard to the device before its gathers;
//   * sequence-parallel norm gradients all-reduced over tp, tied-embedding gradients all-reduced
//     between the first and last stage, the gradient norm all-reduced for clipping, the optimizer.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/program.hpp"
#include "planner/core/training_spec.hpp"

namespace planner {

enum class RankSubset {
  kAll,                  // every worker and parameter server
  kDataParallelReplica,  // the workers with data-parallel index 0 (tp × cp × pp ranks)
  kOnePerStage,          // one worker per pipeline stage (tp = cp = dp = 0)
};

// Worker ranks of a subset, ascending. Ranks of the same stage run the same ops (same OpIds and
// descriptors; only groups and peers differ), so a simulator may time one per stage and treat
// the others as identical.
std::vector<int> representative_ranks(const ParallelConfig& parallel, RankSubset subset);
// The parameter-server ranks (empty unless dp_sync is parameter-server).
std::vector<int> parameter_server_ranks(const ParallelConfig& parallel);

// Megatron-LM's default DDP bucket size: max(40,000,000, 1,000,000 × dp) parameters
// (megatron/core/distributed/distributed_data_parallel.py, core_r0.9).
std::int64_t default_bucket_elements(int dp);

struct LowerOptions {
  std::vector<int> ranks;            // ranks to lower, any order; empty: all (kAll)
  std::int64_t bucket_elements = 0;  // DP gradient bucket size; 0: default_bucket_elements(dp)
  bool fp32_grads = false;           // accumulate and reduce gradients in fp32 (Megatron's
                                     // default for bf16) instead of the training precision
  bool clip_gradients = true;        // all-reduce the gradient norm before the update
};

// The barrier between the segments of a merged forward-and-backward pair (the EP all-to-all
// overlap, dualpipev; lowering.cpp merge_forward_backward): a segment's first compute op waits for
// the tp and cp communication of the segment before it, its first tp collective and cp send for
// that segment's compute; the other streams (all-to-all, dp, pp) run under the other pass. The
// slot an op's stream takes in that rule: 0 compute, 1 tp, 2 cp send, 3 cp receive, -1 none.
constexpr int merge_barrier_slot(Stream s) {
  switch (s) {
    case Stream::kCompute:
      return 0;
    case Stream::kTpComm:
      return 1;
    case Stream::kCpSend:
      return 2;
    case Stream::kCpRecv:
      return 3;
    default:
      return -1;
  }
}

// Lowers one training step. Fails (invalid input, with every reason) when check_parallel() finds
// the combination impossible, when a requested rank does not exist, or when the step is too large
// for op ids (layers < 65535, micro-batches < 2^20) or p2p tags.
Result<StepProgram> lower(const ModelSpec& model, const TrainingSpec& training,
                          const ParallelConfig& parallel, const LowerOptions& options = {});
// Same, after check_plan() (which also checks the cluster).
Result<StepProgram> lower(const Plan& plan, const LowerOptions& options = {});

}  // namespace planner
