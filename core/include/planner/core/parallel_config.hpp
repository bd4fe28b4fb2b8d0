// How a model is split across GPUs, in Megatron-LM's vocabulary.
//
//   tp   tensor parallel size          (column/row-parallel GEMMs inside a layer)
//   pp   pipeline parallel size        (layers split into stages)
//   dp   data parallel size            (model replicas; world = tp x cp x dp x pp)
//   cp   context parallel size         (the sequence split across ranks, ring attention)
//   ep   expert parallel size          (MoE experts spread over ep ranks)
//   etp  expert tensor parallel size   (Megatron's --expert-tensor-parallel-size: each expert's
//                                       MLP split over etp ranks; default tp). The ranks of one
//                                       pipeline stage (tp x cp x dp of them) are regrouped for the
//                                       MoE layers as etp x ep x edp, edp the expert data parallel
//                                       size, as Megatron-core's expert rank generator does (see
//                                       rank_grid.hpp)
//   sequence_parallel                  (Korthikanti et al.: norms/dropout sharded along the
//   sequence
//                                       inside the tp group; needs tp > 1 to matter)
//   moe_capacity_factor (a number, or "dropless"; default the model's), moe_pad_to_capacity,
//   moe_imbalance (the hottest expert's load over the mean) and moe_fp8_dispatch: token routing
//                                      of MoE layers (moe_routing.hpp)
//   moe_a2a ("nccl" or "hierarchical")  how the dispatch and combine all-to-alls move tokens
//                                      (enums.hpp MoeA2a; the simulator's hierarchical-a2a model)
//   moe_a2a_overlap                    (Megatron-core's --overlap-moe-expert-parallel-comm:
//                                       each steady-state forward pass runs merged with the
//                                       backward pass after it, so one micro-batch's dispatch and
//                                       combine all-to-alls run under the other's compute;
//                                       lowering.hpp; needs expert parallelism)
//   first_stage_layers, last_stage_layers  (uneven pipeline stages, Megatron-core's
//                                       --decoder-first/last-pipeline-num-layers: the layers of
//                                       the first and the last stage; the others share the rest
//                                       evenly. 0: an even share; model_partition.hpp)
//   layout                             (Megatron-core's --pipeline-model-parallel-layout:
//                                       the decoder layers of every virtual stage, chunks of
//                                       unequal size; excludes first/last_stage_layers.
//                                       Empty: from those; model_partition.hpp)
//   dualpipe                           (the plan was written with DeepSeek's DualPipe schedule:
//                                       2 x pp ranks a pipeline, rank r holding stages r and
//                                       2pp - 1 - r of 2pp, half the micro-batches fed from each
//                                       end. Its ranks r and 2pp - 1 - r hold the same stages and
//                                       run mirrored halves of the work, so it is kept in its
//                                       cut-in-half form (Sea AI Lab; DualPipe's DualPipeV): this
//                                       config is dualpipev on pp stages with dp replicas, twice
//                                       the written dp, each written pair a replica. Same chunks,
//                                       bubble, memory and gradient reduction per GPU; the one
//                                       pipeline hop at the V's turn, a message between ranks
//                                       pp - 1 and pp under DualPipe, stays on the rank here.
//                                       fold_dualpipe(); labels and documents show the written
//                                       form)
//   recompute ("none", "selective" or "full") and recompute_modules (Megatron-core's
//                                      --recompute-granularity selective --recompute-modules:
//                                      the parts of every layer that selective recompute runs
//                                      again before their backward instead of keeping their
//                                      activations. core_attn (the default) the attention core;
//                                      moe_act the experts' activation function, layernorm the
//                                      norms Transformer Engine does not fuse into the next
//                                      linear (MLA's, an MoE block's) and mla_up_proj MLA's
//                                      up-projections, whose
//                                      outputs are dropped after use and recomputed from their
//                                      inputs; mlp the dense MLP, moe the whole MoE block
//                                      (router, all-to-alls, experts, shared experts) and
//                                      shared_experts the shared experts, which keep only their
//                                      input. Full recompute runs every layer's forward again)
//   micro_batch_size, virtual_stages (vpp), schedule, zero_stage (0-3), offload,
//   order (rank-grid order, innermost first; default "tp-cp-ep-dp-pp"), dp_sync (allreduce or
//   parameter-server with param_servers server ranks), overlap_grad_reduce, overlap_param_gather,
//   async_tp_allreduce (default true: the backward's tensor-parallel all-reduce of a layer's input
//   gradient runs beside its weight-gradient GEMM, as Megatron-LM's
//   async_tensor_model_parallel_allreduce (2022-) and Megatron-core do; false: after it, blocking,
//   as Megatron-LM before it did, whose copy_to_tensor_model_parallel_region reduced in the
//   autograd node after the layer's whole backward. Without sequence parallelism only),
//   tp_comm_overlap (default false; Megatron-core's --tp-comm-overlap: Transformer Engine's
//   userbuffers overlap each sequence-parallel all-gather with the GEMM that consumes it and each
//   reduce-scatter with the GEMM that produces it, chunk by chunk; needs sequence_parallel; the
//   dense attention and MLP blocks' collectives, not MLA's or the MoE blocks').
//
// num_microbatches = global_batch_size / (dp x micro_batch_size).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/checked.hpp"
#include "planner/core/enums.hpp"
#include "planner/core/status.hpp"

namespace planner {

inline constexpr std::string_view kDefaultRankOrder = "tp-cp-ep-dp-pp";

constexpr std::uint8_t module_bit(RecomputeModule m) {
  return static_cast<std::uint8_t>(1u << static_cast<unsigned>(m));
}
inline constexpr std::uint8_t kDefaultRecomputeModules = module_bit(RecomputeModule::kCoreAttn);

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int cp = 1;
  int ep = 1;
  int etp = 0;  // 0: tp (Megatron's default)
  // Token routing of MoE layers (moe_routing.hpp).
  double moe_capacity_factor = -1;   // < 0: the model's; 0: dropless; > 0: capacity factor
  bool moe_pad_to_capacity = false;  // pad every expert's tokens to the capacity
  double moe_imbalance = 1.0;        // the hottest expert's load over the mean, >= 1
  bool moe_fp8_dispatch = false;     // the forward dispatch all-to-all in FP8
  MoeA2a moe_a2a = MoeA2a::kNccl;
  bool moe_a2a_overlap = false;  // merged forward and backward passes (see above)
  bool sequence_parallel = false;
  std::int64_t micro_batch_size = 1;
  int virtual_stages = 1;
  int first_stage_layers = 0;  // 0: an even share of the layers
  int last_stage_layers = 0;
  // Decoder layers per virtual stage, in virtual-stage order (chunk c of stage s is virtual stage
  // c x pp + s), pp x virtual_stages of them; empty: from first/last_stage_layers.
  std::vector<int> layout;
  Schedule schedule = Schedule::k1F1B;
  Recompute recompute = Recompute::kNone;
  std::uint8_t recompute_modules = kDefaultRecomputeModules;  // with selective: module_bit()s
  int zero_stage = 0;
  Offload offload = Offload::kNone;
  std::string order{kDefaultRankOrder};
  DpSync dp_sync = DpSync::kAllReduce;
  int param_servers = 0;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  bool async_tp_allreduce = true;
  bool tp_comm_overlap = false;
  bool dualpipe = false;  // written as DeepSeek's DualPipe (see above)

  // Saturated at INT64_MAX when the product does not fit (checked.hpp): never wrapped.
  std::int64_t world_size() const { return saturating_product({tp, pp, dp, cp}); }
  // Whether there is sequence-parallel communication for tp_comm_overlap to hide.
  bool can_overlap_tp_comm() const { return sequence_parallel && tp > 1; }
  // Model-parallel ranks holding one replica.
  std::int64_t model_parallel_size() const { return saturating_product({tp, pp, cp}); }
  // The expert tensor parallel size in use.
  int expert_tp() const { return etp > 0 ? etp : tp; }
  // Forward passes every pipeline stage runs ahead of its schedule's warm-up: one for the merged
  // passes of moe_a2a_overlap (PipelineSchedule::create).
  int extra_warmup() const { return moe_a2a_overlap ? 1 : 0; }
  // The pipeline stage holding the final norm, the LM head and the loss: the last, or the first
  // under dualpipev, whose V puts the last model chunk beside the first.
  int lm_head_stage() const { return schedule == Schedule::kDualPipeV ? 0 : pp - 1; }
  // Expert data parallel size: (tp x cp x dp) / (etp x ep); 0 when that does not divide.
  std::int64_t expert_dp() const {
    const std::int64_t stage = static_cast<std::int64_t>(tp) * cp * dp;
    const std::int64_t group = static_cast<std::int64_t>(expert_tp()) * ep;
    return group > 0 && stage % group == 0 ? stage / group : 0;
  }
  // The pipeline and data-parallel sizes as written: DualPipe's 2 x pp ranks and dp / 2 replicas.
  int written_pp() const { return dualpipe ? 2 * pp : pp; }
  int written_dp() const { return dualpipe ? dp / 2 : dp; }
  bool operator==(const ParallelConfig&) const = default;
};

// The schedule name a plan document, a flag or a label uses: "dualpipe" for a written DualPipe,
// else the schedule's own.
std::string_view schedule_name(const ParallelConfig& p);

// Turns a config written with DualPipe on pp ranks and dp replicas (schedule and virtual_stages
// as parsed) into its cut-in-half form: dualpipev on pp / 2 stages, 2 chunks each, 2 x dp
// replicas, dualpipe set; an error (the caller names the field) unless pp is even, and p as it
// was.
Status fold_dualpipe(ParallelConfig& p);

// Whether the plan runs `module` of every layer again before its backward: selective recompute
// with the module among recompute_modules (full recompute runs every layer whole).
inline bool recomputes(const ParallelConfig& p, RecomputeModule module) {
  return p.recompute == Recompute::kSelective && (p.recompute_modules & module_bit(module)) != 0;
}
// "moe_act,layernorm" (Megatron's order of the modules), "" for none.
std::string recompute_modules_text(std::uint8_t modules);
// The modules of a list of their names separated by commas, '+' or spaces; an error naming the
// first unknown one.
Result<std::uint8_t> parse_recompute_modules(std::string_view text);
Result<std::uint8_t> parse_recompute_modules(const std::vector<std::string>& names);

// Megatron-core's --pipeline-model-parallel-layout, e.g. "Et*3|(tt|)*29,m|L": one entry per
// virtual stage, separated by '|', in virtual-stage order; 'E' the embedding (first entry only),
// 't' a decoder layer, 'm' a multi-token-prediction module and 'L' the loss (last entry only);
// "x*n" and "(...)*n" repeat, ',' and spaces are ignored. An error names the problem.
struct PipelineLayout {
  std::vector<int> layers;  // decoder layers ('t') per virtual stage
  int mtp = 0;              // 'm' modules (all in the last virtual stage)
};
Result<PipelineLayout> parse_pipeline_layout(std::string_view text);
// The same as Megatron-core writes it, runs of equal virtual stages grouped: {2, 3 x 30, 2} with
// no MTP module is "Et*2|(t*3|)*30t*2L".
std::string pipeline_layout_text(const std::vector<int>& layers, int mtp = 0);
// The layers per virtual stage run-length encoded: "2,3x30,2" (30 virtual stages of 3).
std::string layout_text(const std::vector<int>& layers);

// "tp8 pp8 dp16 mb1 1f1b sel zero1": a compact one-line label for tables and logs.
std::string short_label(const ParallelConfig& p);

// A capacity factor as flags and documents give it: "dropless" (0) or a number above 0 and at most
// kMaxCapacityFactor; nullopt for anything else.
inline constexpr double kMaxCapacityFactor = 64;
std::optional<double> parse_capacity_factor(std::string_view text);
// "dropless" for 0, else the factor ("1.25").
std::string capacity_factor_text(double factor);

}  // namespace planner
